"""One root exception with domain subclasses.

The CLI maps any `GpuledgerError` to a one-line message and a non-zero exit (traceback only
with `--debug`), so every message here must stand on its own: name the file, key, query or
object and say what was expected.
"""

from __future__ import annotations


class GpuledgerError(Exception):
    """Root of every error gpuledger raises on purpose."""

    exit_code: int = 1


class ConfigError(GpuledgerError):
    """The configuration file is missing, unreadable or invalid."""

    exit_code = 2


class InputError(GpuledgerError):
    """A file, URL, flag or API object given to a command is malformed."""

    exit_code = 2


class WarehouseError(GpuledgerError):
    """The DuckDB warehouse cannot be opened, migrated or written."""


class WarehouseLockedError(WarehouseError):
    """Another process holds the warehouse for writing (one writer at a time)."""


class SchemaVersionError(WarehouseError):
    """The warehouse file was written by a newer gpuledger than this one."""


class SourceError(GpuledgerError):
    """A metrics source (Prometheus, NVML) failed or answered something unusable."""


class ClusterError(GpuledgerError):
    """The Kubernetes API refused or failed a request."""

    temporary: bool = False


class ConflictError(ClusterError):
    """HTTP 409: the object changed since it was read (stale resourceVersion)."""


class NotFoundError(ClusterError):
    """HTTP 404: the object does not exist."""


class ForbiddenError(ClusterError):
    """HTTP 401/403: RBAC refused the request."""


class InvalidError(ClusterError):
    """HTTP 400/415/422: the API server rejected the request body."""


class TemporaryClusterError(ClusterError):
    """HTTP 429/5xx or a connection failure: retrying may succeed."""

    temporary = True


def error_for_status(status: int, message: str, *, hint: bool = False) -> ClusterError:
    """THE map from an HTTP status of the Kubernetes API to our error class (one home).

    Why here: the collectors (reads) and the actuator's gateway (writes) must agree on what is
    temporary (retried) and what is permanent, and a caller catching `NotFoundError` must get it
    from both. `message` is used verbatim; `hint=True` appends what the user can do about a
    conflict or an RBAC refusal (the gateway's messages carry it, the collectors' do not).
    Status 0 (no answer at all) and anything unmapped give a plain, permanent `ClusterError`.
    """
    cls = _STATUS_CLASSES.get(status)
    if cls is None:
        cls = TemporaryClusterError if status >= 500 else ClusterError
    return cls(message + (_STATUS_HINTS.get(cls, "") if hint else ""))


_STATUS_CLASSES: dict[int, type[ClusterError]] = {
    409: ConflictError, 404: NotFoundError, 401: ForbiddenError, 403: ForbiddenError,
    400: InvalidError, 415: InvalidError, 422: InvalidError, 429: TemporaryClusterError,
}
_STATUS_HINTS: dict[type[ClusterError], str] = {
    ConflictError: " (the object changed since it was read)",
    ForbiddenError: " (check the RBAC rules in deploy/rbac.yaml)",
}


class PlanError(GpuledgerError):
    """A plan cannot be built, stored or moved to the requested state."""


class ConflictingPlanError(PlanError):
    """The plan cannot move as asked: the cluster moved since it was computed (re-plan), or another
    action changed its status first (re-read it)."""


class SolverError(PlanError):
    """The optimizer could not find any feasible plan."""


class AccessDeniedError(GpuledgerError):
    """The user's role does not allow this action."""

    exit_code = 3


class ReportError(GpuledgerError):
    """A report cannot be produced (no data, period locked, ...)."""


class TimeLimitError(SolverError):
    """A solver command ran past its wall-clock bound (reading the inputs included)."""
