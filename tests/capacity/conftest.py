"""Fixtures of the capacity tests: the real kube-apiserver with Kueue's CRDs (the session's
`k8s_cluster`) and Volcano's (`tests.volcano.conftest.volcano_cluster`, reused, not copied)."""

from tests.volcano.conftest import volcano_cluster

__all__ = ["volcano_cluster"]
