"""A real Kubernetes API for the tests: etcd + kube-apiserver built from Go modules, Kueue CRDs.

`python -m tools.k8s_testenv build|up|down|status`; the pytest plugin is
`tools.k8s_testenv.pytest_plugin` (fixture `k8s_cluster`). The folder is `k8s_testenv`, not
`k8s-testenv`, because a hyphenated name cannot be imported (docs/decisions/0012-k8s-package-name.md).
"""

from __future__ import annotations

from tools.k8s_testenv.errors import K8sTestEnvError
from tools.k8s_testenv.versions import ETCD_VERSION, KUBERNETES_VERSION, KUEUE_VERSION, Layout

__all__ = ["ETCD_VERSION", "KUBERNETES_VERSION", "KUEUE_VERSION", "K8sTestEnvError", "Layout"]
