"""Settings of the fleet-shaping advice (`gpuledger recommend --kind ...`, `analytics.advice`).

Why a section of its own: the four advice kinds share one set of thresholds that platform
teams tune together (catalog size, fragmentation threshold, overcommit ceilings, autoscaling
targets), and maintenance windows are facts about pools that the MIG plan scheduler reads.
The defaults are the practices pooled-GPU teams report (issue 19): 2-3 standard profiles
covering 80% of workloads, 1:3-1:4 time-slicing for inference and at most 1:2 for training,
autoscaling on a 5-10 minute window.
"""

from __future__ import annotations

import re
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, field_validator

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_RANGE = re.compile(
    r"^\s*(?P<d0>[a-z]{3})\s+(?P<h0>\d{1,2}):(?P<m0>\d{2})\s*-\s*(?:(?P<d1>[a-z]{3})\s+)?"
    r"(?P<h1>\d{1,2}):(?P<m1>\d{2})\s*$", re.IGNORECASE,
)


def parse_weekly_range(text: str) -> tuple[int, int]:
    """`"Sat 01:00-05:00"` or `"Sat 22:00-Sun 04:00"` -> (start, end) in minutes of the week
    (Monday 00:00 = 0). An end at or before the start wraps (into the next day when the end
    names no day, else into the next week), so an end may pass 7 x 1440."""
    match = _RANGE.match(text)
    if not match:
        raise ValueError(f"{text!r}: expected a weekly range like 'Sat 01:00-05:00' or 'Sat 22:00-Sun 04:00'")
    d0 = match["d0"].lower()
    d1 = (match["d1"] or d0).lower()
    if d0 not in DAYS or d1 not in DAYS:
        raise ValueError(f"{text!r}: days are {', '.join(DAYS)}")
    h0, m0, h1, m1 = (int(match[k]) for k in ("h0", "m0", "h1", "m1"))
    if h0 > 23 or h1 > 24 or m0 > 59 or m1 > 59 or (h1 == 24 and m1):
        raise ValueError(f"{text!r}: hours 00-23 (24:00 as an end), minutes 00-59")
    start = DAYS.index(d0) * 1440 + h0 * 60 + m0
    end = DAYS.index(d1) * 1440 + h1 * 60 + m1
    if end <= start:  # past midnight without a day: the next day; with a day: next week
        end += 1440 if match["d1"] is None else 7 * 1440
    return start, end


class _Section(BaseModel):
    """The rules of `core.config._Section` (unknown keys refused, frozen, no NaN), restated
    rather than imported because `config.py` imports this module."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class MaintenanceWindow(_Section):
    """Weekly ranges, in the pool's time zone, when MIG layouts of the pool may be rebuilt."""

    pool: str = Field(default="*", description="pool name or glob the window applies to")
    weekly: tuple[str, ...] = Field(default=("sat 01:00-05:00",), min_length=1)
    timezone: str = "UTC"

    @field_validator("weekly")
    @classmethod
    def _ranges(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for text in value:
            parse_weekly_range(text)
        return value

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown time zone {value!r}") from exc
        return value


class AdviceSettings(_Section):
    min_monthly_saving: float = Field(
        default=1.0, ge=0,
        description="advice rows saving less than this a month (in the currency) are counted, not "
        "listed (`analytics.advice.actionable`); risk rows are always listed",
    )
    catalog_size: int = Field(default=3, ge=1, le=7, description="at most K standard MIG profiles a model")
    catalog_goal: float = Field(default=0.8, gt=0, le=1, description="workload share to cover")
    catalog_max_rounding: float = Field(
        default=1.0, ge=0, le=6,
        description="a workload is covered when its catalog profile costs at most (1 + this) x its "
        "right-sized profile (1.0: at most double)",
    )
    fragmentation_threshold: float = Field(default=0.3, ge=0, le=1)
    fragmentation_min_free: float = Field(
        default=0.25, ge=0, le=1, description="share of a node's memory slices that must be free to rebuild",
    )
    overcommit_knee_gain: float = Field(
        default=0.1, gt=0, le=1,
        description="one more replica per card must add at least this share of one holder's work",
    )
    overcommit_max: dict[str, int] = Field(default_factory=lambda: {"inference": 4, "training": 2})
    autoscaling_window_minutes: int = Field(default=5, ge=5, le=10)
    autoscaling_queue_target: float = Field(
        default=4.0, gt=0, description="waiting requests per replica the service should stay under",
    )
    autoscaling_scale_up: float = Field(default=0.8, gt=0, le=1, description="GPU activity to scale up")
    autoscaling_scale_down: float = Field(default=0.3, ge=0, lt=1, description="GPU activity to scale down")
    autoscaling_up_stabilization_s: int = Field(default=60, ge=0, le=3600)
    autoscaling_down_stabilization_s: int = Field(default=600, ge=0, le=3600)
    autoscaling_max_over_target: float = Field(
        default=0.02, ge=0, le=1, description="share of minutes the replay may spend over the queue target",
    )
    maintenance_windows: tuple[MaintenanceWindow, ...] = ()
