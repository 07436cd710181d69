"""The twin's builder without compiling: wrapper modules, the cache check, one-line errors.

The compile itself is exercised by `python -m tools.twin_build build` and measured by its `bench`
(bench/results/twin_build.json); these tests pin what decides a build and what "cached" means.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tools.twin_build.builder import TwinBuildError, build, is_cached, wrapper_gomod
from tools.twin_build.versions import PARTS, Layout

KUBERNETES_GOMOD = """module k8s.io/kubernetes

go 1.26.0

godebug default=go1.26

require (
\tgithub.com/spf13/cobra v1.9.1
\tk8s.io/api v0.0.0
\tk8s.io/client-go v0.0.0
\tk8s.io/component-base v0.0.0 // indirect
)
"""


def test_scheduler_wrapper_requires_kubernetes_and_maps_each_staging_module() -> None:
    text = wrapper_gomod(PARTS["kube-scheduler"], "v1.37.2", KUBERNETES_GOMOD)
    lines = text.splitlines()
    assert "module gpuledger.local/twin-build/kube-scheduler" in lines
    assert "require k8s.io/kubernetes v1.37.2" in lines
    assert "go 1.26.0" in lines and "godebug default=go1.26" in lines
    # three staging modules at v0.0.0 above, each to v0.<minor>.<patch> of v1.37.2
    replaced = sorted(line.strip() for line in lines if "=>" in line)
    assert replaced == [f"k8s.io/{m} => k8s.io/{m} v0.37.2" for m in ("api", "client-go", "component-base")]


def test_kwok_wrapper_requires_the_module_at_its_go_version() -> None:
    text = wrapper_gomod(PARTS["kwok"], "v0.8.0", "module sigs.k8s.io/kwok\n\ngo 1.26.0\n\nrequire k8s.io/api v0.36.1\n")
    assert text.splitlines()[1:] == ["module gpuledger.local/twin-build/kwok", "", "go 1.26.0", "",
                                     "require sigs.k8s.io/kwok v0.8.0"]


def _fake_build(layout: Layout, name: str, version: str) -> None:
    part = PARTS[name]
    binary = layout.binary(part)
    binary.parent.mkdir(parents=True, exist_ok=True)
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    layout.stamp(part).write_text(json.dumps({"version": version}))


def test_cached_means_stamp_of_this_version_and_an_executable(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    part = PARTS["kube-scheduler"]
    assert not is_cached(layout, part)
    _fake_build(layout, "kube-scheduler", "v1.36.0")  # another Kubernetes: not ours
    assert not is_cached(layout, part)
    _fake_build(layout, "kube-scheduler", layout.kubernetes)
    assert is_cached(layout, part)
    os.chmod(layout.binary(part), 0o644)
    assert not is_cached(layout, part)


def test_kwok_is_not_cached_without_its_stages(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    _fake_build(layout, "kwok", PARTS["kwok"].version)
    assert not is_cached(layout, PARTS["kwok"])
    layout.kwok_stages(PARTS["kwok"].version).mkdir()
    assert is_cached(layout, PARTS["kwok"])


def test_a_cached_part_is_returned_without_running_go(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    _fake_build(layout, "kube-scheduler", layout.kubernetes)
    [result] = build(layout, ["kube-scheduler"], echo=lambda _s: None)
    assert result.cached and result.path == layout.binary(PARTS["kube-scheduler"])


def test_unknown_part_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(TwinBuildError, match="unknown part 'kubelet'"):
        build(Layout(tmp_path), ["kubelet"])
    env = dict(os.environ, GPULEDGER_TWIN_BUILD_CACHE=str(tmp_path))
    proc = subprocess.run([sys.executable, "-m", "tools.twin_build", "build", "kubelet"],
                          capture_output=True, text=True, env=env, check=False,
                          cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "twin-build: unknown part 'kubelet'; choose from kube-scheduler, kube-controller-manager, kwok, kueue"]
