"""Settings of quota plans a team can trust: floors, the fairness bound, the gain threshold and
the backtest (`plans.quota` in the config file).

Why its own module: `core.config` is near its size limit; `PlanSettings` holds this section as
one field. The base mirrors `core.config._Section` (unknown keys refused, no NaN/Inf, no
true/false for a number) without importing it, which would be circular.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator


class QuotaPlanSettings(BaseModel):
    """What a quota plan must respect, and how its effect is measured (see
    docs/guide/optimizer.md, "Plans a team can trust")."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    floor_quantile: float = Field(
        default=0.9, ge=0, le=1,
        description="each queue keeps at least this quantile of its own observed demand "
        "(capped at its current quota; never below teams.guaranteed_gpus)",
    )
    floor_keep_share: float = Field(
        default=0.2, ge=0, le=1,
        description="each queue keeps this share of its current quota for bursts, unless "
        "floor_evidence_windows horizons of history show it never needed that much "
        "(docs/decisions/0170)",
    )
    floor_evidence_windows: int = Field(
        default=4, ge=1, le=52,
        description="whole horizons of history before a queue's kept share may be released to its peak",
    )
    floor_burst_share: float = Field(
        default=0.5, ge=0, le=10,
        description="a released floor is the queue's peak over those horizons plus this share of it "
        "(at least one unit); the held-out repair adds the same share to the need it measured",
    )
    allow_zero_quota: bool = Field(
        default=False,
        description="a queue with no demand at all over the lookback may be cut to zero",
    )
    max_pending_rise_share: float = Field(
        default=0.05, ge=0, le=1,
        description="no queue's pending GPU-minutes may rise by more than this share of its own demand",
    )
    min_gain_share: float = Field(
        default=0.05, ge=0, le=1,
        description="below this out-of-sample cut of pending GPU-minutes no plan is proposed",
    )
    backtest_origins: int = Field(default=3, ge=1, le=52, description="rolling origins of the backtest")
    backtest_days: float | None = Field(
        default=None, gt=0, le=366,
        description="held-out days per origin (default: the plan's horizon)",
    )
    min_fit_days: float = Field(
        default=7, gt=0, le=366,
        description="the shortest history a backtest origin is fitted on (a week: weekly seasonality)",
    )

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        """`min_gain_share: true` is a slip, not 1."""
        if info.field_name != "allow_zero_quota" and isinstance(value, bool):
            raise ValueError(f"expected a value, not {str(value).lower()}")
        return value
