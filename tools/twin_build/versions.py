"""Pinned versions, packages and the cache layout of the scheduling twin's binaries.

kube-scheduler and kube-controller-manager come from the SAME `k8s.io/kubernetes` version the test
environment builds kube-apiserver from (`tools.k8s_testenv.versions`), so the twin's control plane
is one release and the Go build cache already holds the packages the three binaries share.
KWOK and Kueue are separate modules with their own `k8s.io/*` versions (their go.mod decides).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tools.k8s_testenv.versions import KUBERNETES_VERSION, KUEUE_MODULE, KUEUE_VERSION, cache_root

KWOK_MODULE = "sigs.k8s.io/kwok"
KWOK_VERSION = "v0.8.0"
#: KWOK's default node and pod lifecycle ("fast": Ready at once, Jobs' pods complete at once).
KWOK_STAGE_DIRS = ("kustomize/stage/node/fast", "kustomize/stage/pod/fast")

#: Environment variable that moves the cache.
CACHE_ENV = "GPULEDGER_TWIN_BUILD_CACHE"


@dataclass(frozen=True)
class Part:
    """One binary: the module that holds it, its version and its main package."""

    name: str
    module: str
    version: str
    package: str

    @property
    def from_kubernetes(self) -> bool:
        return self.module == "k8s.io/kubernetes"


PARTS: dict[str, Part] = {
    "kube-scheduler": Part("kube-scheduler", "k8s.io/kubernetes", KUBERNETES_VERSION,
                           "k8s.io/kubernetes/cmd/kube-scheduler"),
    "kube-controller-manager": Part("kube-controller-manager", "k8s.io/kubernetes", KUBERNETES_VERSION,
                                    "k8s.io/kubernetes/cmd/kube-controller-manager"),
    "kwok": Part("kwok", KWOK_MODULE, KWOK_VERSION, f"{KWOK_MODULE}/cmd/kwok"),
    "kueue": Part("kueue", KUEUE_MODULE, KUEUE_VERSION, f"{KUEUE_MODULE}/cmd/kueue"),
}


def default_cache_root() -> Path:
    """Where this build is cached (`k8s_testenv.versions.cache_root`, `$GPULEDGER_TWIN_BUILD_CACHE`)."""
    return cache_root(CACHE_ENV, "twin-build")


@dataclass(frozen=True)
class Layout:
    """The files of one cached build, under `root/<kubernetes version>/`; one stamp per binary."""

    root: Path
    kubernetes: str = KUBERNETES_VERSION

    @property
    def dir(self) -> Path:
        return self.root / self.kubernetes

    def binary(self, part: Part) -> Path:
        return self.dir / (part.name if part.from_kubernetes else f"{part.name}-{part.version}")

    def stamp(self, part: Part) -> Path:
        """Written last by a successful build of `part`; its presence means "cached"."""
        return self.dir / f"{part.name}.BUILD-OK.json"

    def src(self, part: Part) -> Path:
        """The scratch Go module `part` is compiled in (kept: a rebuild reuses its go.sum)."""
        return self.dir / "src" / part.name

    def kwok_stages(self, version: str) -> Path:
        """KWOK's Stage files, copied from its module by the build."""
        return self.dir / f"kwok-{version}-stages"

    @property
    def log(self) -> Path:
        return self.dir / "build.log"
