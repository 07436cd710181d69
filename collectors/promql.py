"""PromQL text built from parts, with values escaped (node names carry dots and dashes).

Sharding: a selector names its nodes with an anchored regex on the node label
(`Hostname` or `hostname`); the shards are sized so that series x points stays under the
engine's sample limit. A last shard catches series that carry neither node label.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta

NODE_LABELS: tuple[str, ...] = ("Hostname", "hostname")
"""dcgm-exporter's node label, renamed to lower case in 2026; both are accepted."""


def quote(value: str) -> str:
    """A PromQL double-quoted string literal."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def regex_any(values: Sequence[str]) -> str:
    """An RE2 alternation matching exactly one of `values` (PromQL anchors regexes)."""
    return "|".join(re.escape(v) for v in sorted(values))


def duration(step: timedelta) -> str:
    """A PromQL duration in milliseconds (exact for any step; negative for a negative offset)."""
    return f"{round(step.total_seconds() * 1000)}ms"


@dataclass(frozen=True, slots=True)
class Shard:
    """A set of nodes under one node label, or (`label` None) the series with no node label."""

    label: str | None
    nodes: tuple[str, ...] = ()

    def matcher(self) -> str:
        if self.label is None:
            return ",".join(f'{name}=""' for name in NODE_LABELS)
        return f"{self.label}=~{quote(regex_any(self.nodes))}"

    def __str__(self) -> str:
        if self.label is None:
            return "series without a node label"
        return f"{self.label} in {self.nodes[0]}..{self.nodes[-1]} ({len(self.nodes)} nodes)"


def selector(metric: str, *matchers: str) -> str:
    inner = ",".join(m for m in matchers if m)
    return f"{metric}{{{inner}}}" if inner else metric


def latest(expr_selector: str, step: timedelta, offset: timedelta | None = None) -> str:
    """The last raw sample within the step centred on each evaluation instant.

    A bare selector repeats a series' last value for the 5-minute lookback after it stops, so
    a pod that left a GPU would still hold it for 5 minutes next to its successor (backfilled
    history has no staleness markers). `last_over_time` over one step (less a millisecond, so
    the window is half-open on every engine) returns only series sampled in that step.

    The step is centred on the instant, `(t - step/2, t + step/2]` (an offset of `-step/2`),
    not the one ending at it: a scrape belongs to the grid instant NEAREST to it. With the
    step ending at t, a scrape jittered a second past its minute moved to the next instant
    while its successor, a second early, landed there too: one scrape lost, one minute empty,
    and every run boundary off by a minute (docs/decisions/0060). Centred, any jitter or
    clock skew under half a step leaves each scrape on its own instant. `offset` (e.g. one
    step, for the instant before) is added to the centring.
    """
    window = max(step - timedelta(milliseconds=1), timedelta(milliseconds=1))
    shift = (offset or timedelta(0)) - step / 2
    text = f" offset {duration(shift)}" if round(shift.total_seconds() * 1000) else ""
    return f"last_over_time({expr_selector}[{duration(window)}]{text})"


def raw_samples(expr_selector: str, span: timedelta) -> str:
    """An instant query (evaluated at a chunk's end) whose answer is every raw sample of the
    selector in `[end - span, end)`: a range selector answers the samples at their scrape
    times, so what is built from them does not depend on the query step. The range is
    left-open, right-closed, `(end - span, end]`, so it is shifted by one millisecond (the
    engines' timestamp unit) to take the chunk's first instant and leave its end to the next."""
    return f"{expr_selector}[{duration(span)}] offset 1ms"


def make_shards(
    nodes_by_label: Mapping[str, Sequence[str]], series_per_node: float, points: int, max_samples: int,
) -> list[Shard]:
    """Group nodes so that a shard's series x points stays under `max_samples`."""
    per_node = max(series_per_node, 1.0) * max(points, 1)
    nodes_per_shard = max(1, int(max_samples // per_node))
    shards: list[Shard] = []
    for label in NODE_LABELS:
        nodes = sorted(set(nodes_by_label.get(label, ())))
        for i in range(0, len(nodes), nodes_per_shard):
            shards.append(Shard(label, tuple(nodes[i:i + nodes_per_shard])))
    shards.append(Shard(None))
    return shards
