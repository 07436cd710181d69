"""`gpuledger simulate` writes what it is asked for and serves live metrics.

Cases: files (Parquet frames, ground truth, manifests, OpenMetrics) land in --out and the
truth sums to GPUs x hours; --load fills a warehouse; a bad fleet file is one line on stderr
with exit code 2; nothing to do is an error; the live server answers /metrics at the clock's
instant, 404 elsewhere and 503 outside the window; `--serve` from the command line answers a
real HTTP request and stops by itself.
"""

from __future__ import annotations

import select
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from datetime import timedelta

import polars as pl
import pytest
import yaml

from gpuledger.cli import main
from gpuledger.simulator.serve import make_server
from tests.simulator.conftest import START


def test_files_and_load(tmp_path):
    out = tmp_path / "out"
    wh = tmp_path / "wh.duckdb"
    code = main(["--warehouse", str(wh), "simulate", "--gpus", "8", "--start", "2026-11-02",
                 "--end", "2026-11-02T06:00:00Z", "--out", str(out), "--parquet", "--ground-truth",
                 "--manifests", "--openmetrics", "--metrics-step", "10m", "--load", "--chunk", "3h"])
    assert code == 0
    truth = pl.read_parquet(out / "ground_truth.parquet")
    assert truth["card_hours"].sum() == pytest.approx(8 * 6)
    assert pl.read_parquet(out / "parquet" / "gpus.parquet").height == 8
    assert len(list((out / "parquet" / "gpu_samples").glob("*.parquet"))) == 2
    kinds = {d["kind"] for d in yaml.safe_load_all((out / "manifests.yaml").read_text())}
    assert kinds == {"Namespace", "ConfigMap", "Node", "Pod"}
    assert (out / "metrics.om").read_text().endswith("# EOF\n")
    from gpuledger.warehouse import Warehouse

    with Warehouse.open(wh, read_only=True) as w:
        assert w.count("gpu_samples") == 8 * 360
        assert w.count("gpus") == 8


def test_bad_fleet_file(tmp_path, capsys):
    bad = tmp_path / "fleet.yaml"
    bad.write_text("pools:\n  - name: x\n    model: T4\n    nodes: 1\n")
    code = main(["simulate", "--fleet", str(bad), "--out", str(tmp_path), "--ground-truth"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and str(bad) in err and "pools.0.model" in err


def test_nothing_to_do(capsys):
    assert main(["simulate", "--gpus", "8"]) == 2
    assert "nothing to do" in capsys.readouterr().err


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_live_server(tiny_sim):
    import threading

    now = [START + timedelta(hours=5, seconds=30)]
    server = make_server(tiny_sim, "127.0.0.1", 0, clock=lambda: now[0])
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        status, body = _get(server.url)
        assert status == 200
        frames = tiny_sim.step_frames(300, 301)
        lines = [x for x in body.splitlines() if x.startswith("DCGM_FI_PROF_GR_ENGINE_ACTIVE{")]
        assert len(lines) == frames["gpu_samples"].height
        assert 'kube_namespace_labels{namespace="nlp"' in body
        assert _get(server.url.replace("/metrics", "/nope"))[0] == 404
        now[0] = START - timedelta(days=1)
        assert _get(server.url)[0] == 503
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    assert not thread.is_alive()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serve_command_stops_by_itself():
    # The server lives 6 s: wait for the line it prints once its socket listens (a connection
    # made after that waits in the backlog until served), never poll for the transient "up".
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpuledger", "simulate", "--serve", "--gpus", "8", "--port", str(port),
         "--serve-seconds", "6"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        assert ready, "the serve command printed nothing within 60 s"
        line = proc.stdout.readline()
        assert line.startswith("serving 8 simulated GPUs at " + url), line
        status, body = _get(url)
        assert status == 200 and "DCGM_FI_DEV_POWER_USAGE{" in body
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
