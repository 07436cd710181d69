"""Field effects that only damage telemetry: the truth never sees them.

Applied to the dcgm-exporter rows just before they are rendered (OpenMetrics file and served
`/metrics`), never to the generator's state, so the ground truth and `batches()` stay exactly
as without them. Every draw is counter-based noise (`noise.uniform`) keyed by what it is
about (node and step, series and hour, series, step and field), so any chunking gives the
same damage. Numbered steps, in `Damage.apply`:

1. missed scrapes: a (node, step) has no sample at all;
2. exporter restarts: every series of a node has a hole longer than the staleness bound
   (`RESTART_HOLE_S`, so Prometheus marks them stale); dcgm fields are gauges, so what
   "starts over" is the series itself, after the hole;
3. per-series gaps: in a fraction of (series, hour), one field (`GAP_FIELDS`) is missing for
   2 or 3 minutes while the others are present;
4. util-only nodes: an old dcgm-exporter without the profiling module reports
   `DCGM_FI_DEV_GPU_UTIL` but no `DCGM_FI_PROF_*` field;
5. bad samples: a fraction of field values is NaN or negative (-1);
6. timestamps: each scrape moves by up to ± `jitter_s`, each node's clock by a fixed
   ± `clock_skew_s`; they are written in milliseconds.
Label renames and HA replicas act on the rendered lines (`Renderer`, `ha_lines`).

`Damage.apply` is the one place these drops are decided: the renderer writes the rows it
keeps, and the field-mode idle truth reads its activity readings from the same rows
(`Simulation._as_emitted`, `field_truth`), so telemetry and truth can never disagree.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from gpuledger.simulator.field import FieldEffects
from gpuledger.simulator.noise import uniform
from gpuledger.simulator.simulated_fleet import SimulatedFleet

RESTART_HOLE_S = 420
"""An exporter restart leaves every series of the node without samples this long (> 5 min)."""
GAP_FIELDS = ("gr_engine_active", "fb_used_mib", "gpu_util", "power_w")
PROF_FIELDS = ("gr_engine_active", "sm_active", "tensor_active", "dram_active")
BAD_FIELDS = ("gr_engine_active", "gpu_util", "fb_used_mib", "power_w")
REPLICAS = ("a", "b")


class Damage:
    """The telemetry-only effects of one simulation (see the module docstring)."""

    def __init__(self, sim: SimulatedFleet) -> None:
        self.fx: FieldEffects = sim.spec.field
        self.seed, self.tb = sim.seed, sim.tb
        hw = sim.hw
        self.slot_node = np.array([hw.gpus[s.gpu].node for s in hw.slots], dtype=np.int64)
        plain = [i for i, n in enumerate(hw.nodes) if hw.pools[n.pool].sharing != "mig"]
        self.util_only = np.array(plain[: self.fx.util_only_nodes], dtype=np.int64)
        self.restarts = exporter_restarts(sim)
        self.rename_s = sim.tb.origin_s + (sim.tb.steps // 2) * sim.tb.step_s
        self.timed = bool(self.fx.jitter_s or self.fx.clock_skew_s)

    def apply(self, frame: pl.DataFrame) -> pl.DataFrame:
        """Damaged rows of a `gpu_samples` frame with ids; adds `_ms` (the written timestamp)."""
        fx = self.fx
        t = frame["ts"].dt.epoch("s").to_numpy()
        k = (t - self.tb.origin_s) // self.tb.step_s
        slot = frame["_slot"].to_numpy()
        node = self.slot_node[slot]
        keep = np.ones(len(frame), dtype=bool)
        if fx.missed_scrapes:  # 1.
            keep &= uniform(self.seed, 101, node, k) >= fx.missed_scrapes
        for r_node, r0, r1 in self.restarts:  # 2.
            keep &= ~((node == r_node) & (t >= r0) & (t < r1))
        nulls = {c: np.zeros(len(frame), dtype=bool) for c in PROF_FIELDS + GAP_FIELDS}
        if fx.series_gaps:  # 3.
            hour = t // 3600
            hit = uniform(self.seed, 102, slot, hour) < fx.series_gaps
            which = (uniform(self.seed, 103, slot, hour) * len(GAP_FIELDS)).astype(np.int64)
            m0 = (uniform(self.seed, 104, slot, hour) * 57).astype(np.int64) * 60
            length = np.where(uniform(self.seed, 105, slot, hour) < 0.5, 120, 180)
            inside = hit & (t % 3600 >= m0) & (t % 3600 < m0 + length)
            for i, column in enumerate(GAP_FIELDS):
                nulls[column] |= inside & (which == i)
        if self.util_only.size:  # 4.
            old = np.isin(node, self.util_only)
            for column in PROF_FIELDS:
                nulls[column] |= old
        frame = frame.with_columns(
            [pl.when(pl.Series(mask)).then(None).otherwise(pl.col(c)).alias(c)
             for c, mask in nulls.items() if mask.any()]
        )
        if fx.bad_samples:  # 5.
            frame = frame.with_columns(
                [self._bad(frame, c, i, slot, k) for i, c in enumerate(BAD_FIELDS)]
            )
        ms = t * 1000  # 6.
        for stream, step, bound in ((108, k, fx.jitter_s), (109, 0, fx.clock_skew_s)):
            if bound:
                offset = (2 * uniform(self.seed, stream, node, step) - 1) * bound * 1000
                ms = ms + np.round(offset).astype(np.int64)
        return frame.with_columns(pl.Series("_ms", ms, dtype=pl.Int64)).filter(pl.Series(keep))

    def _bad(self, frame: pl.DataFrame, column: str, i: int, slot: np.ndarray, k: np.ndarray) -> pl.Expr:
        key = slot * len(BAD_FIELDS) + i
        bad = uniform(self.seed, 106, key, k) < self.fx.bad_samples
        nan = uniform(self.seed, 107, key, k) < 0.5
        values = frame[column].to_numpy().astype(np.float64, copy=True)
        present = ~np.isnan(values) & ~frame[column].is_null().to_numpy()
        values = np.where(bad & present, np.where(nan, np.nan, -1.0), values)
        out = pl.Series(column, values, dtype=pl.Float64, nan_to_null=False)
        return pl.when(frame[column].is_null()).then(None).otherwise(out).alias(column)

    def renamed(self, frame: pl.DataFrame) -> pl.Series:
        """True on rows at or after the mid-window label rename."""
        return frame["ts"].dt.epoch("s") >= self.rename_s


def exporter_restarts(sim: SimulatedFleet) -> list[tuple[int, int, int]]:
    """(node, hole start s, hole end s) of each exporter restart, spread over the window."""
    n, tb = sim.spec.field.exporter_restarts, sim.tb
    out = []
    for i in range(n):
        node = int(float(uniform(sim.seed, 110, np.array([i]), 0)[0]) * len(sim.hw.nodes))
        at = tb.origin_s + ((i + 1) * tb.steps // (n + 1)) * tb.step_s
        out.append((node, at, at + RESTART_HOLE_S))
    return out


def ms_text(ms: pl.Expr) -> pl.Expr:
    """Milliseconds as OpenMetrics seconds with three decimals (`1764547200.123`)."""
    return pl.concat_str([(ms // 1000).cast(pl.String), pl.lit("."),
                          (ms % 1000).cast(pl.String).str.zfill(3)])


def ha_lines(lines: pl.Series) -> pl.Series:
    """Every sample line twice, as two Prometheus replicas store it: `replica="a"` and `"b"`."""
    parts = [lines.str.replace("{", f'{{replica="{r}",', literal=True, n=1) for r in REPLICAS]
    return pl.concat(parts)
