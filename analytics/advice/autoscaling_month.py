"""A month of serving minutes, handed to the autoscaling replay one Deployment at a time, in as
many passes over the month's days as keep the minutes held at once under a bound.

Why (issue 34, docs/decisions/0269): each Deployment is replayed from its whole month (step 2's
hourly 5th percentiles and the replay itself run over the month), and the minutes arrive a UTC
day at a time, every Deployment in each day. Holding the month until the last day is read held
every Deployment's minutes at once: about 330 MB at 1,000 GPUs, the peak of `refresh-serving`
under a bounded DuckDB, and about ten times that at 10,000 GPUs. So the Deployments are split by
a stable hash of their names into `passes` groups; a pass reads every day again and keeps only
its group's minutes (copied out of the day, so the rest of the day is freed), replays them and
drops them. The first pass learns what the month needs of every Deployment (GPUs per replica,
the models served). A pass after the first costs the days' decoding from the day parts (about
0.4 s a pass at 1,000 GPUs): more passes are asked for only when the days are kept
(`repeatable`), never when each would query the warehouse again.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from gpuledger.analytics.advice.autoscaling import SERIES_SCHEMA
from gpuledger.core.mig import canonical_model
from gpuledger.core.window import Window

REPLAY_BUDGET = 512 * 2**20
"""The most bytes of replay minutes (`REPLAY_COLUMNS`) held at once, estimated from the first
day with minutes. A 1,000-GPU month (about 330 MB) stays one pass: there a pass more costs
about 0.4 s and saves about 100 MB of a 1.7 GB peak that is mostly DuckDB's; a 10,000-GPU
month (about 3.3 GB) takes seven (bench/results/autoscaling_month_passes.json)."""
REPLAY_COLUMNS = [c for c in SERIES_SCHEMA if c not in ("namespace", "deployment")]
Key = tuple[str, str]


@dataclass
class ServingMonth:
    """The serving minutes of `window`, read a UTC day at a time by `read(day)` (the day's frame
    sorted by namespace, deployment, ts; `warehouse.queries.advice.serving_minutes`).
    `repeatable`: the days can be read again for the cost of decoding them (day parts)."""

    read: Callable[[Window], pl.DataFrame]
    window: Window
    repeatable: bool
    widest: dict[Key, int] = field(default_factory=dict)
    """Per Deployment, the most GPUs per replica seen in the month (complete once a first
    Deployment is handed out)."""
    models: set[str] = field(default_factory=set)
    """The models served in the month (canonical names; complete as `widest`)."""
    passes: int = 1
    """How many passes the month takes (known once the first day with minutes is read)."""

    def deployments(self) -> Iterator[tuple[Key, pl.DataFrame]]:
        """Each Deployment's month of minutes (`REPLAY_COLUMNS`, by ts), in name order within a
        pass; every Deployment once."""
        sized, done = False, 0
        while done < self.passes:
            held: dict[Key, list[pl.DataFrame]] = {}
            for day in self.window.days():
                part = self.read(day)
                runs = part.group_by("namespace", "deployment", maintain_order=True).agg(
                    pl.len(), pl.col("gpus_per_replica").max())
                if done == 0:
                    self._learn(part, runs)
                if part.is_empty():
                    continue
                if not sized:
                    self.passes, sized = self._passes_for(part, runs.height), True
                self._hold(part, runs, done, held)
            for key in sorted(held):
                yield key, pl.concat(held.pop(key), how="vertical_relaxed")
            done += 1

    def _learn(self, part: pl.DataFrame, runs: pl.DataFrame) -> None:
        """The month's facts from a day of every Deployment (the first pass reads every day);
        `runs`: the day's Deployments in order, their minutes and most GPUs per replica."""
        self.models |= {canonical_model(str(m)) for m in part["model"].drop_nulls().unique()}
        for ns, dep, _, found in runs.iter_rows():
            key = (str(ns), str(dep))
            if found is not None and int(found) > self.widest.get(key, 0):
                self.widest[key] = int(found)

    def _passes_for(self, part: pl.DataFrame, deployments: int) -> int:
        """How many passes keep a pass's minutes under `REPLAY_BUDGET`, were every day of the
        window as large as `part` (of `deployments`: no more passes than that); one where the
        days cannot be read again cheaply."""
        if not self.repeatable:
            return 1
        month = part.select(REPLAY_COLUMNS).estimated_size() * len(list(self.window.days()))
        return max(1, min(deployments, math.ceil(month / REPLAY_BUDGET)))

    def _hold(self, part: pl.DataFrame, runs: pl.DataFrame, batch: int,
              held: dict[Key, list[pl.DataFrame]]) -> None:
        """Keep the day's minutes of the Deployments in pass `batch`: with one pass, slices of
        the day's replay columns (views: they hold those columns' buffers and no others); with
        more, the group's rows copied out first, so the other groups' minutes are freed."""
        keys = [(str(ns), str(dep)) for ns, dep in runs.select("namespace", "deployment").iter_rows()]
        lengths = runs["len"].to_numpy()
        replay = part.select(REPLAY_COLUMNS)
        if self.passes > 1:
            mine = np.fromiter((pass_of(key, self.passes) == batch for key in keys), bool, len(keys))
            replay = replay.filter(pl.Series(np.repeat(mine, lengths)))
            keys, lengths = [k for k, m in zip(keys, mine, strict=True) if m], lengths[mine]
        offset = 0
        for key, length in zip(keys, lengths.tolist(), strict=True):
            held.setdefault(key, []).append(replay.slice(offset, length))
            offset += length


def pass_of(key: Key, passes: int) -> int:
    """The pass that replays Deployment `key`: a hash stable across processes and days (CRC-32
    of its namespace and name), so a Deployment's days all land in one pass."""
    return zlib.crc32("\0".join(key).encode()) % passes
