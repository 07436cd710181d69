"""Compile `helm` from the Go module proxy, once, into ~/.cache/gpuledger/helm/ (and the CRDs).

Why from Go modules: the machines reach package registries only, so Helm's release tarball
cannot be downloaded; `go build helm.sh/helm/v4/cmd/helm` from the module proxy gives the same
program. Built like `tools.k8s_testenv` builds kube-apiserver (its `find_go`, a file lock, a
stamp written last, `nice`), into `<cache>/helm/<version>/helm`, outside the repository, so a
fresh clone reuses it and `build` returns at once when cached. The version is set the way Helm's
own Makefile sets it (`-X helm.sh/helm/v4/internal/version.version=...`), so `helm version`
names the release.

Second step: the Prometheus Operator's ServiceMonitor and PrometheusRule CRDs, which the chart
renders and the dry-run test applies to the real kube-apiserver. The operator's repository
module is not served by the proxy, its API types module is; the CRDs are generated from those
types with controller-gen (`sigs.k8s.io/controller-tools`), which is how the operator itself
produces them.

Cold build on the 2-core shared machine: helm 435 s (load average 5-12), controller-gen and the
CRDs 195 s; cached: well under a second.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from tools.k8s_testenv.builder import find_go, locked
from tools.k8s_testenv.errors import K8sTestEnvError
from tools.k8s_testenv.versions import cache_root

HELM_VERSION = "v4.3.1"
HELM_MODULE = "helm.sh/helm/v4"
HELM_PACKAGE = "helm.sh/helm/v4/cmd/helm"
CONTROLLER_TOOLS = ("sigs.k8s.io/controller-tools", "v0.23.0")
MONITORING_APIS = ("github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring", "v0.95.2")
CRDS = ("servicemonitors", "prometheusrules")
CACHE_ENV = "GPULEDGER_HELM_CACHE"


class HelmBuildError(K8sTestEnvError):
    """The Helm build failed; the message names the step and the log file."""


def default_cache_root() -> Path:
    """Where this build is cached (`k8s_testenv.versions.cache_root`, `$GPULEDGER_HELM_CACHE`)."""
    return cache_root(CACHE_ENV, "helm")


@dataclass(frozen=True)
class HelmLayout:
    root: Path
    version: str = HELM_VERSION

    @property
    def dir(self) -> Path:
        return self.root / self.version

    @property
    def binary(self) -> Path:
        return self.dir / "helm"

    @property
    def crds(self) -> Path:
        """`monitoring.coreos.com_<plural>.yaml` for each of `CRDS`."""
        return self.dir / f"monitoring-crds-{MONITORING_APIS[1]}"

    def crd(self, plural: str) -> Path:
        return self.crds / f"monitoring.coreos.com_{plural}.yaml"

    @property
    def stamp(self) -> Path:
        return self.dir / "BUILD-OK.json"

    @property
    def log(self) -> Path:
        return self.dir / "build.log"


def is_cached(layout: HelmLayout) -> bool:
    try:
        stamp = json.loads(layout.stamp.read_text())
    except (OSError, ValueError):
        return False
    return (
        stamp.get("helm") == layout.version and stamp.get("monitoring") == MONITORING_APIS[1]
        and os.access(layout.binary, os.X_OK) and all(layout.crd(p).is_file() for p in CRDS)
    )


def helm_binary(layout: HelmLayout | None = None) -> Path | None:
    """The cached `helm`, or None when `build` has not run on this machine."""
    layout = layout or HelmLayout(default_cache_root())
    return layout.binary if is_cached(layout) else None


def build(layout: HelmLayout, *, force: bool = False) -> tuple[bool, float]:
    """Build (or reuse) helm; returns (cached, seconds). Raises `HelmBuildError`."""
    started = time.monotonic()
    if not force and is_cached(layout):
        return True, time.monotonic() - started
    layout.dir.mkdir(parents=True, exist_ok=True)
    with locked(layout.dir / ".lock"):
        if not force and is_cached(layout):
            return True, time.monotonic() - started
        go = find_go()
        timings = {"helm_s": _build_helm(go, layout)}
        t = time.monotonic()
        _generate_crds(go, layout)
        timings["crds_s"] = round(time.monotonic() - t, 1)
        stamp = {"helm": layout.version, "monitoring": MONITORING_APIS[1],
                 "built_at": datetime.now(UTC).isoformat(), "timings": timings,
                 "bytes": layout.binary.stat().st_size}
        tmp = layout.stamp.with_name("BUILD-OK.json.tmp")
        tmp.write_text(json.dumps(stamp, indent=2) + "\n")
        tmp.rename(layout.stamp)
    return False, time.monotonic() - started


def _go(go: str, args: list[str], cwd: Path, layout: HelmLayout, what: str) -> None:
    env = {**os.environ, "CGO_ENABLED": "0", "GOTOOLCHAIN": "local", "GOFLAGS": "-buildvcs=false"}
    with layout.log.open("a") as log:
        log.write(f"\n=== {datetime.now(UTC).isoformat()} $ (cd {cwd} && go {' '.join(args)})\n")
        log.flush()
        proc = subprocess.run([go, *args], cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                              check=False, preexec_fn=lambda: os.nice(5))
    if proc.returncode != 0:
        raise HelmBuildError(f"helm build: {what} failed (exit {proc.returncode}; log: {layout.log})")


def _build_helm(go: str, layout: HelmLayout) -> float:
    started = time.monotonic()
    src = layout.dir / "src" / "helm"
    src.mkdir(parents=True, exist_ok=True)
    (src / "go.mod").write_text(
        "// Generated by tools/helm_build: compiles helm from the module proxy.\n"
        f"module gpuledger.local/helm-build\n\ngo 1.26\n\nrequire {HELM_MODULE} {layout.version}\n"
    )
    tmp = layout.binary.with_name("helm.tmp")
    ldflags = f"-s -w -X {HELM_MODULE}/internal/version.version={layout.version}"
    _go(go, ["build", "-mod=mod", "-trimpath", "-ldflags", ldflags, "-o", str(tmp), HELM_PACKAGE],
        src, layout, f"`go build {HELM_PACKAGE}@{layout.version}`")
    tmp.rename(layout.binary)
    return round(time.monotonic() - started, 1)


def _generate_crds(go: str, layout: HelmLayout) -> None:
    """controller-gen over the operator's v1 API types; keep the CRDs the chart uses."""
    src = layout.dir / "src" / "crds"
    src.mkdir(parents=True, exist_ok=True)
    tools_mod, tools_version = CONTROLLER_TOOLS
    apis_mod, apis_version = MONITORING_APIS
    (src / "go.mod").write_text(
        "// Generated by tools/helm_build: controller-gen and the monitoring API types.\n"
        f"module gpuledger.local/monitoring-crds\n\ngo 1.26\n\nrequire (\n\t{tools_mod} {tools_version}\n"
        f"\t{apis_mod} {apis_version}\n)\n"
    )
    (src / "tools.go").write_text(
        f'//go:build tools\n\npackage tools\n\nimport (\n\t_ "{apis_mod}/v1"\n'
        f'\t_ "{tools_mod}/cmd/controller-gen"\n)\n'
    )
    _go(go, ["mod", "tidy"], src, layout, "`go mod tidy` (controller-gen, monitoring APIs)")
    gen = src / "controller-gen"
    _go(go, ["build", "-o", str(gen), f"{tools_mod}/cmd/controller-gen"], src, layout,
        "`go build controller-gen`")
    out = src / "out"
    shutil.rmtree(out, ignore_errors=True)
    args = ["crd:crdVersions=v1,maxDescLen=0,allowDangerousTypes=true", f"paths={apis_mod}/v1",
            f"output:crd:dir={out}"]
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod"}
    with layout.log.open("a") as log:
        proc = subprocess.run([str(gen), *args], cwd=src, env=env, stdout=log, stderr=subprocess.STDOUT,
                              check=False, preexec_fn=lambda: os.nice(5))
    if proc.returncode != 0:
        raise HelmBuildError(f"helm build: controller-gen failed (log: {layout.log})")
    tmp = layout.crds.with_name(layout.crds.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    for plural in CRDS:
        name = f"monitoring.coreos.com_{plural}.yaml"
        shutil.copyfile(out / name, tmp / name)
    shutil.rmtree(layout.crds, ignore_errors=True)
    tmp.rename(layout.crds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.helm_build", description="build helm (cached)")
    parser.add_argument("command", choices=["build", "path", "kustomize"])
    parser.add_argument("--version", default=HELM_VERSION)
    parser.add_argument("--cache", type=Path, default=None)
    parser.add_argument("--force", action="store_true")
    args = parser.parse_args(argv)
    layout = HelmLayout(args.cache or default_cache_root(), args.version)
    if args.command == "kustomize":
        from tools.helm_build.kustomize import write

        found = helm_binary(layout)
        if found is None:
            print("helm-build: error: helm is not built (run `build` first)", file=sys.stderr)
            return 1
        for path in write(str(found)):
            print(f"helm-build: wrote {path}")
        return 0
    if args.command == "path":
        found = helm_binary(layout)
        print(found or "not built")
        return 0 if found else 1
    try:
        if not is_cached(layout) or args.force:
            print(f"helm-build: building helm {layout.version} from Go modules (cold: minutes)", flush=True)
        cached, seconds = build(layout, force=args.force)
    except K8sTestEnvError as exc:
        print(f"helm-build: error: {exc}", file=sys.stderr)
        return 1
    print(f"helm-build: {'cached' if cached else 'built'} helm {layout.version} at {layout.binary} "
          f"({seconds:.1f}s)")
    return 0
