"""The one error the test environment raises: a build or start-up step that could not finish."""

from __future__ import annotations

from gpuledger.core.errors import GpuledgerError


class K8sTestEnvError(GpuledgerError):
    """Building, starting or talking to the local kube-apiserver/etcd failed.

    The message names the step, the command or URL, and where the log is, so a CI failure can
    be read without a traceback.
    """
