"""THE sampling model: from raw `gpu_samples` to who held what, when it was active, when idle.

Real telemetry is messy: scrapes are jittered (a sample every 57 s, not 60), missed (gaps of
two or three minutes), fields arrive in different scrapes, exporters restart (Prometheus
writes staleness markers), and two Prometheus replicas send the same series twice. The
collector reads each series on the minute grid with `last_over_time(x[step - 1ms])` over the
step centred on each minute (docs/decisions/0035, 0060: a scrape is on its nearest minute),
so a row of `gpu_samples` is "what each field showed in that step", and
a field a scrape missed is NULL in that row while the others are present. This module is the
one place that decides what such rows mean (docs/decisions/0051-sampling-model.md; a worked
example in docs/guide/analytics.md):

- **A reading.** A field's value when finite and not negative (`core.activity.reading_sql`):
  NaN and negative values are not readings, they count as missing, never as zero.
- **One row per device and time.** A device is `(uuid, gpu_i_id, vgpu, profile)`, its holder
  `(namespace, pod)` (none when `namespace` is NULL). Two rows of one device at one time (HA
  replicas the collector did not merge) become one: the holder is kept, each field keeps its
  reading, so nothing is counted twice.
- **Held.** Each row stands for `[t, t + dt)`: until the card's next scrape (the device's next
  row, or any device's next row on the same card: a time-slice replica's series vanishes when
  its pod leaves while the card is still scraped) when that comes within the gap tolerance
  (`idle.gap_tolerance_s`, never less than the card's spacing), else for the card's own
  sample spacing: the median interval between the card's rows in the read window, intervals
  longer than the staleness bound left out (a gap is not a spacing); the fleet's median when
  the card has none; `FALLBACK_SPACING_US` when nobody has. Never `prometheus.step`: a bill
  of data already collected must not move when the setting changes.
- **Carried readings.** A field missing from a row inherits the last reading of THAT field for
  the same device and holder within `STALENESS_US` (5 minutes, Prometheus' default lookback
  delta: the longest a query engine itself would show an old sample). So a minute with memory
  but no activity reading keeps the last activity and never breaks an idle run.
- **Active.** Activity is the rule of `core.activity` (GR_ENGINE_ACTIVE, else GPU_UTIL / 100)
  over the carried readings. A row with no activity reading within the bound is "activity
  unknown": neither idle nor busy, it ends an idle run (nobody knows it stayed idle), and an
  hour with only such rows has `active_ratio` NULL (never 1, never 0).
- **Idle.** A run of rows of one holder with activity under `idle.threshold`, measured over
  its full length (the read margin makes this exact at the window's edges); a run of at least
  `idle.min_minutes` is idle time, "held idle" when framebuffer use averages at least
  `idle.held_fb_mib` over it.

The steps are numbered in `analytics.sampling.steps`: step 1 (the read: hashes and readings) is
SQL run in DuckDB, steps 2–7 one pass over sorted integer arrays in `analytics.sampling.sweep`
(decision 0122), which all three frames below come from.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import polars as pl

from gpuledger.analytics.sampling import sweep
from gpuledger.core.config import Settings
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse

_US = 1_000_000

STALENESS_US = 300 * _US
"""How long a reading stands for a field that later rows miss: Prometheus' default lookback
delta (`--query.lookback-delta`, 5 minutes), the bound a query engine itself applies."""

FALLBACK_SPACING_US = 60 * _US
"""The spacing assumed where the read window holds no spacing at all (a lone sample in the
whole fleet): Prometheus' default `scrape_interval`, 1 minute."""


@dataclass(frozen=True, slots=True)
class SampleRules:
    """The knobs of the sample pass, in microseconds where they are durations.

    None of them is the collection step: how long a sample stands for comes from the data.
    """

    tolerance_us: int
    threshold: float
    min_idle_us: int
    held_fb_mib: float
    staleness_us: int = STALENESS_US
    fallback_spacing_us: int = FALLBACK_SPACING_US

    @classmethod
    def of(cls, settings: Settings) -> SampleRules:
        return cls(
            tolerance_us=int(settings.idle.gap_tolerance_s * _US),
            threshold=settings.idle.threshold,
            min_idle_us=settings.idle.min_minutes * 60 * _US,
            held_fb_mib=settings.idle.held_fb_mib,
        )

    @property
    def step_us(self) -> int:
        """What one last observation of a card stands for when its spacing is unknown.

        The fallback spacing, kept under this name for `analytics.billing.bill`'s capacity (which
        used to pass `prometheus.step`); it is never the collection step.
        """
        return self.fallback_spacing_us

    @property
    def margin(self) -> timedelta:
        """Context read on each side of a window: enough to judge runs and gaps at its edges."""
        widest = max(self.min_idle_us, self.tolerance_us, self.staleness_us)
        return timedelta(microseconds=widest + 2 * self.staleness_us)


def _epoch_us(moment: Any) -> int:
    return int(moment.timestamp() * _US)


def params(window: Window, rules: SampleRules) -> dict[str, Any]:
    return {
        "lo": window.start - rules.margin,
        "hi": window.end + rules.margin,
        "ws": _epoch_us(window.start),
        "we": _epoch_us(window.end),
        "tol": rules.tolerance_us,
        "stale": rules.staleness_us,
        "fallback": rules.fallback_spacing_us,
        "thr": rules.threshold,
        "min_idle": rules.min_idle_us,
        "held_fb": rules.held_fb_mib,
    }


def _us_to_ts(*names: str) -> list[pl.Expr]:
    return [pl.col(n).cast(pl.Int64).cast(pl.Datetime("us", "UTC")) for n in names]


def held_hourly(wh: Warehouse, window: Window, rules: SampleRules) -> pl.DataFrame:
    """Held time per device, holder and hour (hours in `held_hours`, `idle_hours`, ...).

    `active_ratio` is NULL exactly when no row of that hour had an activity reading (carried
    ones included): activity unknown.
    """
    return hourly_frame(sweep.run(wh, params(window, rules)))


def hourly_frame(pieces: sweep.Pieces) -> pl.DataFrame:
    """`held_hourly` of a pass already run (the roll-up shares one with the allocations)."""
    frame = sweep.hourly(pieces)
    return frame.with_columns(_us_to_ts("hour")).rename({"hour": "ts"})


def allocation_runs(wh: Warehouse, window: Window, rules: SampleRules) -> pl.DataFrame:
    """Each allocation (a run of one holder on one device) clipped to the window."""
    return allocation_frame(sweep.run(wh, params(window, rules)))


def allocation_frame(pieces: sweep.Pieces) -> pl.DataFrame:
    """`allocation_runs` of a pass already run."""
    frame = sweep.allocations(pieces)
    return frame.with_columns(_us_to_ts("start_us", "end_us")).rename(
        {"start_us": "start_ts", "end_us": "end_ts"}
    ).sort(["start_ts", "uuid", "gpu_i_id", "vgpu"], nulls_last=True)


def idle_runs(wh: Warehouse, window: Window, rules: SampleRules) -> pl.DataFrame:
    """Idle runs of at least `min_minutes`, clipped to the window (`run_hours`: full length)."""
    frame = sweep.idle_runs(sweep.run(wh, params(window, rules)))
    return frame.with_columns(_us_to_ts("start_us", "end_us")).rename(
        {"start_us": "start_ts", "end_us": "end_ts"}
    )
