"""Settings of the queue systems (`queues:`): which ones run in the cluster, and when
preemption losses become a recommendation.

Why a list: Kueue and Volcano run side by side on many GPU platforms (Volcano for gang-
scheduled training, Kueue for the rest), so the collectors read every listed system's objects
and metrics (`collectors.queues.queue_collectors`). The names are checked against the
collect stage's registry when a collector is built (a misspelt name fails there with the
known ones listed), not here: `core` does not know the systems.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator


class QueueSettings(BaseModel):
    """Mirrors `config._Section` (its own module: config.py is near its size limit); the share is
    strict so `preemption_share: true` is refused rather than read as 1."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    systems: tuple[str, ...] = ("kueue",)
    """Queue systems to collect, first one's pod label first: `kueue`, `volcano`."""
    preemption_share: Annotated[float, Field(ge=0, le=1, strict=True)] = 0.05
    """Flag a queue losing more than this share of its spend to preemption (admit-before-run)."""

    @field_validator("systems")
    @classmethod
    def _names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value or any(not v.isidentifier() for v in value) or len(set(value)) != len(value):
            raise ValueError("queues.systems: one or more distinct names, e.g. [kueue, volcano]")
        return value
