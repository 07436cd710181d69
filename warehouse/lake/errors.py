"""The lake's own errors: one clear line each (the CLI maps every `GpuledgerError`)."""

from __future__ import annotations

from gpuledger.core.errors import GpuledgerError


class LakeError(GpuledgerError):
    """The lake cannot be reached, or a partition in it is not what its manifest says."""


class FinalizedPartitionError(LakeError):
    """Publishing different numbers over a finalized period without `reissue`."""
