"""Settings section `retention`: how long raw samples stay before only roll-ups remain.

Its own module because `core/config.py` is near its size limit; `Settings.retention` is the one
line there. The model mirrors `config._Section` (unknown keys refused, frozen) and is strict, so
`raw_days: true` is refused instead of read as one day.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class RetentionSettings(BaseModel):
    """`raw_days`: raw GPU samples younger than this many days are kept; older ones are removed
    by `gpuledger compact` once the hourly roll-up covers them (docs/decisions/0071).

    35 days by default: a whole billing month plus a few days to re-collect or re-roll a late
    month before its raw rows go.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, strict=True)

    raw_days: int = Field(default=35, ge=1, le=3650)
