"""Settings of the queue systems (`queues:`): which ones run in the cluster, and when
preemption losses become a recommendation.

Why a list: Kueue and Volcano run side by side on many GPU platforms (Volcano for gang-
scheduled training, Kueue for the rest), so the collectors read every listed system's objects
and metrics (`collectors.queues.queue_collectors`). The names are checked against the
collect stage's registry when a collector is built (a misspelt name fails there with the
known ones listed), not here: `core` does not know the systems.
"""

from __future__ import annotations

import re
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

    kueue_dra_resources: tuple[str, ...] = ()
    """Kueue DRA quota resource names (the `name`s of Kueue's `resources.deviceClassMappings`)
    to plan like GPUs where a ClusterQueue declares them; by their name alone they look like
    any other resource, so unlisted ones are left as they are (decision 0113)."""

    @field_validator("kueue_dra_resources")
    @classmethod
    def _dra_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [v for v in value if not _RESOURCE_NAME.fullmatch(v)]
        if bad or len(set(value)) != len(value):
            raise ValueError(f"queues.kueue_dra_resources: distinct Kubernetes resource names "
                             f"(e.g. [gpu.example.com]); got {bad[0]!r}" if bad else
                             "queues.kueue_dra_resources: a name is listed twice")
        return value

    @field_validator("systems")
    @classmethod
    def _names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value or any(not v.isidentifier() for v in value) or len(set(value)) != len(value):
            raise ValueError("queues.systems: one or more distinct names, e.g. [kueue, volcano]")
        return value


_RESOURCE_NAME = re.compile(r"([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
"""A Kubernetes resource name: an optional DNS-subdomain prefix and a qualified name."""
