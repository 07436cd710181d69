"""Pinned versions and the cache layout of the Kubernetes test environment.

Why pinned here: the build is keyed by these versions, so bumping one is a one-line change that
makes the next `build` compile into a fresh cache folder while the old one stays usable.

Choice (see docs/decisions/0027-k8s-testenv-versions.md): the newest Kubernetes release whose Go
dependency graph resolves from the module proxy, etcd at the minor Kubernetes itself requires
(newest patch of that minor), and the Kueue release whose CRDs serve `kueue.x-k8s.io/v1beta2`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

KUBERNETES_VERSION = "v1.37.2"
ETCD_VERSION = "v3.7.3"
KUEUE_VERSION = "v0.17.0"

#: Where the main package of each binary lives (etcd moved its main into the server module in 3.5).
APISERVER_PACKAGE = "k8s.io/kubernetes/cmd/kube-apiserver"
ETCD_MODULE = "go.etcd.io/etcd/server/v3"
ETCD_PACKAGE = "go.etcd.io/etcd/server/v3"
KUEUE_MODULE = "sigs.k8s.io/kueue"
KUEUE_CRD_DIR = "config/components/crd/bases"

#: Environment variable that moves the cache (read only by the CLI and the pytest plugin).
CACHE_ENV = "GPULEDGER_K8S_TESTENV_CACHE"


def cache_root(env: str, leaf: str) -> Path:
    """`$env`, else `$XDG_CACHE_HOME/gpuledger/<leaf>`, else `~/.cache/gpuledger/<leaf>`: where each
    slow build of the test tools is kept (the apiserver, helm, the twin's binaries).

    Outside the repository on purpose: CI runs in a fresh clone on the same machine and must
    reuse binaries that took many minutes to compile.
    """
    explicit = os.environ.get(env)
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "gpuledger" / leaf


def default_cache_root() -> Path:
    """The apiserver test environment's cache (`cache_root`, `$GPULEDGER_K8S_TESTENV_CACHE`)."""
    return cache_root(CACHE_ENV, "k8s-testenv")


@dataclass(frozen=True)
class Layout:
    """The files of one cached build, all under `root/<kubernetes version>/`."""

    root: Path
    kubernetes: str = KUBERNETES_VERSION
    etcd: str = ETCD_VERSION
    kueue: str = KUEUE_VERSION

    @property
    def dir(self) -> Path:
        return self.root / self.kubernetes

    @property
    def apiserver(self) -> Path:
        return self.dir / "kube-apiserver"

    @property
    def etcd_binary(self) -> Path:
        return self.dir / f"etcd-{self.etcd}"

    @property
    def crds(self) -> Path:
        return self.dir / f"kueue-{self.kueue}-crds"

    @property
    def src(self) -> Path:
        """Scratch Go modules used to compile (kept: a rebuild reuses their go.sum)."""
        return self.dir / "src"

    @property
    def stamp(self) -> Path:
        """Written last by a successful build; its presence (and content) means "cached"."""
        return self.dir / "BUILD-OK.json"

    @property
    def log(self) -> Path:
        return self.dir / "build.log"
