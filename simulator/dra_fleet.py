"""The DRA pool (`simulator.dra`) repeated over any window, as frames: for the demo fleet.

Why apart from `DraPool`: the pool's plan is six hours; a demo month is 124 such blocks. Each
block is a `DraPool` of its own (claim UIDs tagged by block, so a claim recreated in the next
block is a new claim, as a template-generated one is), its samples are the `gpu_samples` rows a
collector would store from its series (minute grid, whole GPU `gpu_i_id` -1, MIG devices
`1 + placement`), and its objects the snapshots a collector listing every 10 minutes would see.
The roof (`gpuledger.pipeline.load_simulation`) turns the snapshots into DRA frames through the
collector's parser and loads the samples together with the rest of the fleet's.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from gpuledger.core.frames import GPU_SAMPLES, polars_schema
from gpuledger.core.window import Window
from gpuledger.simulator.dra import BLOCK_MINUTES, TEAMS, DraField, DraPool

BLOCK = timedelta(minutes=BLOCK_MINUTES)


class DraFleet:
    """The pool over `window`, block by block (a last partial block is cut at the window's end)."""

    def __init__(self, window: Window, field: DraField | None = None) -> None:
        self.window = window
        starts: list[datetime] = []
        at = window.start
        while at < window.end:
            starts.append(at)
            at += BLOCK
        self.pools = [DraPool(s, tag=str(i), field=field) for i, s in enumerate(starts)]

    def minutes(self, pool: DraPool) -> range:
        """The minutes of `pool`'s plan inside the window."""
        return range(min(BLOCK_MINUTES, int((self.window.end - pool.start) / timedelta(minutes=1))))

    def write_openmetrics(self, path: Path, **kwargs: bool) -> dict[str, int]:
        """Every block's series inside the window (`simulator.dra_metrics.write_openmetrics`)."""
        from gpuledger.simulator.dra_metrics import write_openmetrics

        return write_openmetrics(self.pools, path, minutes=[self.minutes(p) for p in self.pools], **kwargs)

    def snapshots(self) -> Iterator[tuple[datetime, dict[str, list[dict[str, Any]]]]]:
        for pool in self.pools:
            for at, objs in pool.snapshots():
                if at <= self.window.end:
                    yield at, objs

    def gpu_samples(self, chunk: Window) -> pl.DataFrame:
        """The `gpu_samples` rows of the minutes inside `chunk` (built by column: a day is
        tens of thousands of rows)."""
        names = ("ts", "node", "uuid", "gpu_i_id", "mig_profile", "vgpu", "namespace", "pod",
                 "container", "gr_engine_active", "fb_used_mib")
        cols: dict[str, list[Any]] = {name: [] for name in names}
        for pool in self.pools:
            if pool.end <= chunk.start or pool.start >= chunk.end:
                continue
            for labels, minute, active, fb in pool.series():
                ts = pool.at(minute)
                if not (chunk.start <= ts < chunk.end and ts < self.window.end):
                    continue
                profile = labels.get("GPU_I_PROFILE")
                row = (ts, labels["Hostname"], labels["UUID"],
                       int(labels["GPU_I_ID"]) if profile else -1, profile, None,
                       labels["namespace"], labels["pod"], labels["container"], active, fb)
                for name, value in zip(names, row, strict=True):
                    cols[name].append(value)
        schema = polars_schema(GPU_SAMPLES)
        frame = pl.DataFrame(cols, schema={k: schema[k] for k in names})
        return frame.select([pl.col(c) if c in frame.columns else pl.lit(None, schema[c]).alias(c)
                             for c in GPU_SAMPLES.column_names])

    def namespaces(self) -> pl.DataFrame:
        """The pool's namespaces with their team labels (`namespaces` rows)."""
        import json

        return pl.DataFrame([
            {"namespace": n, "team": t, "labels": json.dumps({"team": t}), "observed_at": self.window.start}
            for n, t in TEAMS.items()
        ], schema={"namespace": pl.String, "team": pl.String, "labels": pl.String,
                   "observed_at": pl.Datetime("us", "UTC")})

    def truth(self) -> dict[str, dict[str, float]]:
        """Per team `card_hours` and `idle_card_hours` over the window (blocks' truths summed;
        a block cut by the window's end counts only its minutes inside)."""
        out: dict[str, dict[str, float]] = {}
        for pool in self.pools:
            for team, figures in pool.truth(until=len(self.minutes(pool))).items():
                mine = out.setdefault(team, dict.fromkeys(figures, 0.0))
                for key, value in figures.items():
                    mine[key] += value
        return out
