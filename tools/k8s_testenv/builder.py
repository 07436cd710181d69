"""Compile kube-apiserver and etcd from the Go module proxy and fetch the Kueue CRDs, once.

Why from Go modules: the machines reach package registries only, so no release tarball can be
downloaded; the `go` command and the module proxy are enough to build both servers from source.
The result is cached outside the repository (see `versions.default_cache_root`), so a fresh
clone finds it and `build` returns in well under a second.

Steps of `build()`:
1. Take a file lock in the cache folder (CI and a developer may build at the same time).
2. If the stamp file names the pinned versions and every output exists, stop: cached.
3. kube-apiserver: ask the proxy for k8s.io/kubernetes' go.mod, map each `k8s.io/*` staging module
   it requires at v0.0.0 to the published v0.<minor>.<patch> with `replace` lines, write a tiny
   Go module around it and `go build` the `cmd/kube-apiserver` package with version ldflags.
4. etcd: a tiny module that requires `go.etcd.io/etcd/server/v3` and builds its main package.
5. Kueue: download `sigs.k8s.io/kueue` and copy `config/components/crd/bases/*.yaml`.
6. Write the stamp (versions, timings, sizes) last, atomically.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from tools.k8s_testenv.errors import K8sTestEnvError
from tools.k8s_testenv.versions import (
    APISERVER_PACKAGE,
    ETCD_MODULE,
    ETCD_PACKAGE,
    KUEUE_CRD_DIR,
    KUEUE_MODULE,
    Layout,
)

Echo = Callable[[str], None]

_STAGING_REQUIRE = re.compile(r"^\s*(k8s\.io/[A-Za-z0-9._-]+)\s+v0\.0\.0\s*(//.*)?$")
_GO_DIRECTIVE = re.compile(r"^go\s+(\S+)\s*$", re.MULTILINE)
_GODEBUG_DIRECTIVE = re.compile(r"^godebug\s+.*$", re.MULTILINE)
_MISSING_MODULE = re.compile(
    r"(?:module|go: )([\w./-]+@v[\w.+-]+)[^\n]*(?:not found|404|410|unknown revision|invalid version|reading)"
)


@dataclass(frozen=True)
class BuildResult:
    """What `build()` did: `cached` is True when nothing had to be compiled."""

    layout: Layout
    cached: bool
    seconds: float


def find_go() -> str:
    """The `go` command: on PATH, else the standard install at /usr/local/go/bin/go."""
    found = shutil.which("go")
    if found:
        return found
    fallback = Path("/usr/local/go/bin/go")
    if fallback.is_file():
        return str(fallback)
    raise K8sTestEnvError(
        "k8s-testenv build: the `go` command is neither on PATH nor at /usr/local/go/bin/go"
    )


def is_cached(layout: Layout) -> bool:
    """True when the stamp names these versions and every output file exists."""
    if not layout.stamp.is_file():
        return False
    try:
        stamp = json.loads(layout.stamp.read_text())
    except (OSError, ValueError):
        return False
    wanted = {"kubernetes": layout.kubernetes, "etcd": layout.etcd, "kueue": layout.kueue}
    if any(stamp.get(k) != v for k, v in wanted.items()):
        return False
    crds = list(layout.crds.glob("*.yaml")) if layout.crds.is_dir() else []
    return (
        os.access(layout.apiserver, os.X_OK) and os.access(layout.etcd_binary, os.X_OK) and len(crds) > 0
    )


def build(layout: Layout, echo: Echo = print, force: bool = False) -> BuildResult:
    """Build (or reuse) the binaries and CRDs of `layout`; raise `K8sTestEnvError` on failure."""
    started = time.monotonic()
    if not force and is_cached(layout):
        return BuildResult(layout, cached=True, seconds=time.monotonic() - started)
    layout.dir.mkdir(parents=True, exist_ok=True)
    # 1. One builder at a time; the second one finds the stamp written by the first.
    with locked(layout.dir / ".lock"):
        if not force and is_cached(layout):
            return BuildResult(layout, cached=True, seconds=time.monotonic() - started)
        go = find_go()
        layout.src.mkdir(parents=True, exist_ok=True)
        with layout.log.open("a") as log:
            log.write(f"\n=== build started {datetime.now(UTC).isoformat()} ===\n")
            timings: dict[str, float] = {}
            t = time.monotonic()
            echo(f"k8s-testenv: building kube-apiserver {layout.kubernetes} (cold build: tens of minutes)")
            _build_apiserver(go, layout, log)
            timings["kube-apiserver_s"] = round(time.monotonic() - t, 1)
            t = time.monotonic()
            echo(f"k8s-testenv: building etcd {layout.etcd}")
            _build_etcd(go, layout, log)
            timings["etcd_s"] = round(time.monotonic() - t, 1)
            t = time.monotonic()
            echo(f"k8s-testenv: copying Kueue {layout.kueue} CRDs")
            _copy_kueue_crds(go, layout, log)
            timings["kueue_crds_s"] = round(time.monotonic() - t, 1)
        _write_stamp(layout, go, timings)
    return BuildResult(layout, cached=False, seconds=time.monotonic() - started)


# --- step 3: kube-apiserver -------------------------------------------------------------------


def staging_replacements(kubernetes_gomod: str, kubernetes_version: str) -> dict[str, str]:
    """Map each `k8s.io/*` module required at v0.0.0 to its published tag v0.<minor>.<patch>.

    Kubernetes develops these modules in `staging/` and its go.mod points at them with local
    `replace` lines, which a dependent module cannot use; every release tags them as
    v0.<minor>.<patch> (v1.37.2 → v0.37.2).
    """
    match = re.fullmatch(r"v1\.(\d+)\.(\d+)", kubernetes_version)
    if match is None:
        raise K8sTestEnvError(f"k8s-testenv build: Kubernetes version {kubernetes_version!r} is not vX.Y.Z")
    published = f"v0.{match.group(1)}.{match.group(2)}"
    modules = sorted(
        {m.group(1) for line in kubernetes_gomod.splitlines() if (m := _STAGING_REQUIRE.match(line))}
    )
    if not modules:
        raise K8sTestEnvError(
            f"k8s-testenv build: k8s.io/kubernetes@{kubernetes_version} go.mod lists no k8s.io/* module at "
            "v0.0.0; the staging layout changed and the build recipe needs review"
        )
    return {module: published for module in modules}


def apiserver_gomod(kubernetes_gomod: str, kubernetes_version: str) -> str:
    """The go.mod of our wrapper module: require k8s.io/kubernetes, replace the staging modules."""
    go_directive = _GO_DIRECTIVE.search(kubernetes_gomod)
    godebug = _GODEBUG_DIRECTIVE.search(kubernetes_gomod)
    lines = [
        "// Generated by tools/k8s_testenv/build.py: compiles kube-apiserver from the module proxy.",
        "module gpuledger.local/k8s-testenv/kube-apiserver",
        "",
        f"go {go_directive.group(1) if go_directive else '1.26'}",
        "",
    ]
    if godebug:
        lines += [godebug.group(0), ""]
    lines += [f"require k8s.io/kubernetes {kubernetes_version}", "", "replace ("]
    for module, version in staging_replacements(kubernetes_gomod, kubernetes_version).items():
        lines.append(f"\t{module} => {module} {version}")
    lines += [")", ""]
    return "\n".join(lines)


def version_ldflags(version: str) -> str:
    """The -X flags Kubernetes' own build sets, so `/version` and emulation versions are right."""
    major, minor = version.lstrip("v").split(".")[:2]
    pkg = "k8s.io/component-base/version"
    flags = {
        "gitVersion": version,
        "gitMajor": major,
        "gitMinor": minor,
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
    }
    return " ".join(f"-X {pkg}.{key}={value}" for key, value in flags.items()) + " -s -w"


def _build_apiserver(go: str, layout: Layout, log: TextIO) -> None:
    info = module_download(go, f"k8s.io/kubernetes@{layout.kubernetes}", layout.src, log, log_path=layout.log)
    gomod_text = Path(info["GoMod"]).read_text()
    workdir = layout.src / "kube-apiserver"
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "go.mod").write_text(apiserver_gomod(gomod_text, layout.kubernetes))
    _go_build(go, workdir, APISERVER_PACKAGE, layout.apiserver,
              ldflags=version_ldflags(layout.kubernetes), layout=layout, log=log)


# --- step 4: etcd -----------------------------------------------------------------------------


def _build_etcd(go: str, layout: Layout, log: TextIO) -> None:
    workdir = layout.src / "etcd"
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "go.mod").write_text(
        "// Generated by tools/k8s_testenv/build.py: compiles etcd from the module proxy.\n"
        "module gpuledger.local/k8s-testenv/etcd\n\ngo 1.26\n\n"
        f"require {ETCD_MODULE} {layout.etcd}\n"
    )
    _go_build(go, workdir, ETCD_PACKAGE, layout.etcd_binary, ldflags="-s -w", layout=layout, log=log)


# --- step 5: Kueue CRDs -----------------------------------------------------------------------


def _copy_kueue_crds(go: str, layout: Layout, log: TextIO) -> None:
    info = module_download(go, f"{KUEUE_MODULE}@{layout.kueue}", layout.src, log, log_path=layout.log)
    source = Path(info["Dir"]) / KUEUE_CRD_DIR
    files = sorted(source.glob("*.yaml"))
    if not files:
        raise K8sTestEnvError(
            f"k8s-testenv build: {KUEUE_MODULE}@{layout.kueue} has no CRDs under {KUEUE_CRD_DIR}/"
        )
    tmp = layout.crds.with_name(layout.crds.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for f in files:
        shutil.copyfile(f, tmp / f.name)
    shutil.rmtree(layout.crds, ignore_errors=True)
    tmp.rename(layout.crds)


# --- helpers ----------------------------------------------------------------------------------


def go_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("GOFLAGS", "-buildvcs=false")
    env["CGO_ENABLED"] = "0"
    env["GOTOOLCHAIN"] = "local"  # never download another toolchain; fail clearly instead
    return env


def run_go(
    go: str, args: list[str], cwd: Path, log: TextIO, *, niceness: int = 5
) -> subprocess.CompletedProcess[str]:
    """Run `go args` in `cwd` at `nice niceness` with `go_env()`, its output appended to `log`."""
    log.write(f"$ (cd {cwd} && nice -n {niceness} {go} {' '.join(args)})\n")
    log.flush()
    proc = subprocess.run(
        [go, *args], cwd=cwd, env=go_env(), capture_output=True, text=True, check=False,
        preexec_fn=lambda: os.nice(niceness),
    )
    log.write(proc.stdout)
    log.write(proc.stderr)
    log.flush()
    return proc


def module_download(go: str, module_at_version: str, cwd: Path, log: TextIO, *, log_path: Path,
                    niceness: int = 5, who: str = "k8s-testenv build") -> dict[str, str]:
    """`go mod download -json module@version`: its `Dir`, `GoMod`, ...; `K8sTestEnvError` (one line,
    prefixed `who`) when the proxy does not serve it."""
    proc = run_go(go, ["mod", "download", "-json", module_at_version], cwd, log, niceness=niceness)
    try:
        info: dict[str, str] = json.loads(proc.stdout)
    except ValueError:
        info = {}
    if proc.returncode != 0 or "Error" in info or not info.get("Dir") or not info.get("GoMod"):
        detail = " ".join((info.get("Error") or tail(proc.stderr)).split())  # Go's errors span lines
        raise K8sTestEnvError(
            f"{who}: the module proxy did not serve {module_at_version}: {detail} (log: {log_path})"
        )
    return info


def _go_build(
    go: str, workdir: Path, package: str, output: Path, *, ldflags: str, layout: Layout, log: TextIO
) -> None:
    tmp = output.with_name(output.name + ".tmp")
    args = ["build", "-mod=mod", "-trimpath", "-ldflags", ldflags, "-o", str(tmp), package]
    proc = run_go(go, args, workdir, log)
    if proc.returncode != 0:
        raise K8sTestEnvError(
            f"k8s-testenv build: `go build {package}` failed{_failing_module(proc.stderr)}: "
            f"{tail(proc.stderr)} (full log: {layout.log})"
        )
    tmp.rename(output)


def _failing_module(stderr: str) -> str:
    """Name the module the proxy could not serve, when Go's message says so."""
    match = _MISSING_MODULE.search(stderr)
    return f" (module {match.group(1)} could not be resolved)" if match else ""


def tail(text: str, lines: int = 3) -> str:
    kept = [line.strip() for line in text.strip().splitlines()[-lines:]]
    return " | ".join(kept) if kept else "no output"


def _write_stamp(layout: Layout, go: str, timings: dict[str, float]) -> None:
    version = subprocess.run([go, "version"], capture_output=True, text=True, check=False).stdout.strip()
    stamp = {
        "kubernetes": layout.kubernetes,
        "etcd": layout.etcd,
        "kueue": layout.kueue,
        "go": version,
        "built_at": datetime.now(UTC).isoformat(),
        "timings": timings,
        "bytes": {
            "kube-apiserver": layout.apiserver.stat().st_size,
            "etcd": layout.etcd_binary.stat().st_size,
        },
    }
    tmp = layout.stamp.with_name(layout.stamp.name + ".tmp")
    tmp.write_text(json.dumps(stamp, indent=2) + "\n")
    tmp.rename(layout.stamp)


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
