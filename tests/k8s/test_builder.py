"""The build recipe: staging `replace` lines derived from Kubernetes' own go.mod; the cache stamp.

Cases:
- every `k8s.io/*` module required at v0.0.0 maps to v0.<minor>.<patch>; modules required at a
  real version (kube-openapi, utils) are left alone;
- the generated go.mod keeps Kubernetes' `go` and `godebug` directives and requires the release;
- a version that is not vX.Y.Z and a go.mod without staging modules are clear errors;
- `is_cached` is false for a stamp naming other versions or with a binary missing.
"""

from __future__ import annotations

import json

import pytest

from tools.k8s_testenv.builder import apiserver_gomod, is_cached, staging_replacements
from tools.k8s_testenv.errors import K8sTestEnvError
from tools.k8s_testenv.versions import Layout

GOMOD = """module k8s.io/kubernetes

go 1.26.0

godebug default=go1.26

require (
\tgithub.com/google/cel-go v0.29.2
\tk8s.io/api v0.0.0
\tk8s.io/apiserver v0.0.0
\tk8s.io/kube-openapi v0.0.0-20260721132016-d427ff9ee9ad
\tk8s.io/utils v0.0.0-20260626114624-be93311217bd
)

require (
\tk8s.io/cri-streaming v0.0.0 // indirect
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
)
"""


def test_staging_replacements():
    assert staging_replacements(GOMOD, "v1.37.2") == {
        "k8s.io/api": "v0.37.2", "k8s.io/apiserver": "v0.37.2", "k8s.io/cri-streaming": "v0.37.2"}


def test_generated_gomod():
    text = apiserver_gomod(GOMOD, "v1.37.2")
    assert "\ngo 1.26.0\n" in text
    assert "\ngodebug default=go1.26\n" in text
    assert "require k8s.io/kubernetes v1.37.2" in text
    assert "\tk8s.io/cri-streaming => k8s.io/cri-streaming v0.37.2" in text
    assert "kube-openapi =>" not in text
    assert "./staging" not in text


def test_recipe_errors():
    with pytest.raises(K8sTestEnvError, match=r"not vX\.Y\.Z"):
        staging_replacements(GOMOD, "v1.37")
    with pytest.raises(K8sTestEnvError, match=r"no k8s\.io"):
        staging_replacements("module x\n", "v1.37.2")


def test_is_cached(tmp_path):
    layout = Layout(tmp_path)
    assert not is_cached(layout)
    layout.dir.mkdir(parents=True)
    for exe in (layout.apiserver, layout.etcd_binary):
        exe.write_text("#!/bin/sh\n")
        exe.chmod(0o755)
    layout.crds.mkdir()
    (layout.crds / "a.yaml").write_text("kind: CustomResourceDefinition\n")
    stamp = {"kubernetes": layout.kubernetes, "etcd": layout.etcd, "kueue": layout.kueue}
    layout.stamp.write_text(json.dumps(stamp))
    assert is_cached(layout)
    layout.stamp.write_text(json.dumps({**stamp, "etcd": "v3.6.0"}))
    assert not is_cached(layout)
    layout.stamp.write_text(json.dumps(stamp))
    layout.etcd_binary.unlink()
    assert not is_cached(layout)


def test_cli_build_failure_is_one_clear_line(tmp_path):
    """A release the module proxy does not serve: exit 1 and a message naming the module."""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-m", "tools.k8s_testenv", "--cache", str(tmp_path), "--kubernetes", "v1.99.0", "build"],
        capture_output=True, text=True, cwd=repo, timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    error_lines = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(error_lines) == 1 and "Traceback" not in proc.stderr
    assert "k8s.io/kubernetes@v1.99.0" in error_lines[0]
    assert not (tmp_path / "v1.99.0" / "BUILD-OK.json").exists()
