"""No etcd or kube-apiserver outlives the session that started it.

Cases (each runs a nested pytest session in a subprocess that uses the `k8s_cluster` fixture,
started without CRDs to keep it quick; the process handling is the same):
- the nested session's only test fails on purpose: afterwards its etcd and kube-apiserver pids
  are gone and no process mentions its work directory;
- the nested session is SIGKILLed while the cluster runs (no finalizer, no atexit): the servers
  die with it anyway (PR_SET_PDEATHSIG);
- the manual CLI: `up` leaves a reachable cluster, `status` shows its pids alive, `down` stops it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import requests

from tools.k8s_testenv.processes import pid_alive

pytestmark = [pytest.mark.k8s, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]

NESTED_TEST = textwrap.dedent('''
    import json, os, time

    def test_cluster_then_fail(k8s_cluster):
        out = os.environ["HYGIENE_OUT"]
        with open(out + ".tmp", "w") as f:
            json.dump({"pids": k8s_cluster.pids, "workdir": str(k8s_cluster.workdir)}, f)
        os.rename(out + ".tmp", out)
        if os.environ.get("HYGIENE_HANG"):
            time.sleep(300)
        assert False, "fails on purpose"
''')


def nested_session(tmp_path: Path, hang: bool) -> tuple[subprocess.Popen, Path]:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text('pytest_plugins = ["tools.k8s_testenv.pytest_plugin"]\n')
    (suite / "test_nested.py").write_text(NESTED_TEST)
    out = tmp_path / "pids.json"
    # No third-party plugin autoload (dash's, playwright's): the nested session starts faster.
    env = dict(os.environ, HYGIENE_OUT=str(out), PYTHONPATH=str(REPO), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    if hang:
        env["HYGIENE_HANG"] = "1"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(suite),
         "--basetemp", str(tmp_path / "basetemp"), "--k8s-testenv-no-crds", str(suite)],
        cwd=suite, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    return proc, out


def processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline and pid_alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def wait_dead(pids: list[int], timeout_s: float = 20.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        alive = [p for p in pids if pid_alive(p)]
        if not alive:
            return []
        time.sleep(0.1)
    return [p for p in pids if pid_alive(p)]


def test_failing_session_leaves_no_servers(tmp_path):
    proc, out = nested_session(tmp_path, hang=False)
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 1, output  # the nested test failed, as written
    assert "fails on purpose" in output
    info = json.loads(out.read_text())
    assert len(info["pids"]) == 2
    assert wait_dead(info["pids"], timeout_s=1.0) == []
    assert processes_mentioning(info["workdir"]) == []


def test_killed_session_leaves_no_servers(tmp_path):
    proc, out = nested_session(tmp_path, hang=True)
    deadline = time.monotonic() + 300
    while not out.exists():
        assert proc.poll() is None, proc.communicate()[0]
        assert time.monotonic() < deadline, "nested session never started its cluster"
        time.sleep(0.2)
    info = json.loads(out.read_text())
    assert all(pid_alive(p) for p in info["pids"])
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert wait_dead(info["pids"]) == []
    assert processes_mentioning(info["workdir"]) == []


def test_cli_up_status_down():
    env = dict(os.environ, PYTHONPATH=str(REPO))
    cli = [sys.executable, "-m", "tools.k8s_testenv"]
    build = subprocess.run([*cli, "build"], capture_output=True, text=True, env=env, cwd=REPO, timeout=60)
    assert build.returncode == 0 and "cached" in build.stdout, build.stdout + build.stderr
    up = subprocess.run([*cli, "up", "--no-crds"], capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        status = json.loads(subprocess.run([*cli, "status"], capture_output=True, text=True, env=env,
                                           cwd=REPO, timeout=60).stdout)
        running = status["running"]
        assert status["cached"] is True and running["alive"] == [True, True]
        answer = requests.get(f"{running['server']}/readyz", verify=running["ca_file"], timeout=5,
                              headers={"Authorization": f"Bearer {running['admin_token']}"})
        assert answer.status_code == 200
    finally:
        down = subprocess.run([*cli, "down"], capture_output=True, text=True, env=env, cwd=REPO, timeout=60)
    assert down.returncode == 0, down.stdout + down.stderr
    assert wait_dead(running["pids"]) == []
