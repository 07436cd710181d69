"""From raw `gpu_samples` to who-held-what intervals, hourly held time and idle runs.

Everything here is one SQL pass pushed into DuckDB (the samples never travel to Python):

1. Read the window's samples plus a margin on each side (long enough to judge an idle run or a
   scrape gap that crosses the window's edge), one row per device and sample time. A device is
   `(uuid, gpu_i_id, vgpu)`; the holder is `(namespace, pod)`, none when `namespace` is NULL.
2. Give each sample the time it stands for, `[t, t + dt)`: until the next scrape of its card
   (the next sample of the device, or the next sample of any device on the same card if that
   comes first: a time-slice replica's series vanishes when its pod leaves while the card is
   still scraped) when that comes within the gap tolerance, else one scrape step. So
   card-hours come from intervals, a short scrape gap (the whole card unseen) does not end an
   allocation, and a long one does.
3. Number the runs: an allocation continues while the next sample has the same holder (and
   MIG profile) and no long gap; an idle run continues while activity stays under the
   threshold for the same holder. Activity is GR_ENGINE_ACTIVE, else GPU_UTIL / 100.
4. Measure each idle run over its full length (the margin makes this exact at the edges); runs
   of at least `min_minutes` are idle time, "held idle" when framebuffer use averages at least
   `held_fb_mib` during the run.
5. Clip every sample's interval to the window, split it at the hour, and sum per device,
   holder and hour.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import polars as pl

from gpuledger.core.activity import ACTIVITY_SQL
from gpuledger.core.config import Settings
from gpuledger.core.window import Window, parse_duration
from gpuledger.warehouse import Warehouse

HOUR_US = 3_600_000_000
_US = 1_000_000


@dataclass(frozen=True, slots=True)
class SampleRules:
    """The knobs of the sample pass, in microseconds where they are durations."""

    step_us: int
    tolerance_us: int
    threshold: float
    min_idle_us: int
    held_fb_mib: float

    @classmethod
    def of(cls, settings: Settings) -> SampleRules:
        step = int(parse_duration(settings.prometheus.step).total_seconds() * _US)
        tolerance = max(int(settings.idle.gap_tolerance_s * _US), step)
        return cls(
            step_us=step,
            tolerance_us=tolerance,
            threshold=settings.idle.threshold,
            min_idle_us=settings.idle.min_minutes * 60 * _US,
            held_fb_mib=settings.idle.held_fb_mib,
        )

    @property
    def margin(self) -> timedelta:
        """Context read on each side of a window: enough to judge runs and gaps at its edges."""
        return timedelta(microseconds=max(self.min_idle_us, self.tolerance_us) + 2 * self.step_us)


def _epoch_us(moment: Any) -> int:
    return int(moment.timestamp() * _US)


def params(window: Window, rules: SampleRules) -> dict[str, Any]:
    return {
        "lo": window.start - rules.margin,
        "hi": window.end + rules.margin,
        "ws": _epoch_us(window.start),
        "we": _epoch_us(window.end),
        "tol": rules.tolerance_us,
        "step": rules.step_us,
        "thr": rules.threshold,
        "min_idle": rules.min_idle_us,
        "held_fb": rules.held_fb_mib,
    }


# Steps 1-4 (module docstring) as CTEs shared by the hourly, allocation and idle-run queries.
# The sorts carry only integers: a device, its card and its holder are 64-bit hashes, joined
# back to their names (`names`) after aggregation.
_RUNS_CTE = f"""
src AS (
    SELECT uuid, gpu_i_id, coalesce(vgpu, '') AS vgpu, mig_profile AS profile, node,
        namespace, pod, epoch_us(ts) AS t,
        {ACTIVITY_SQL} AS act, fb_used_mib AS fb
    FROM gpu_samples
    WHERE ts >= $lo AND ts < $hi
),
raw AS (
    SELECT hash(uuid) AS card, hash(uuid, gpu_i_id, vgpu, profile) AS dev,
        CASE WHEN namespace IS NOT NULL THEN hash(namespace, pod) END AS hold, t, act, fb
    FROM src
),
names AS (
    SELECT DISTINCT hash(uuid, gpu_i_id, vgpu, profile) AS dev,
        CASE WHEN namespace IS NOT NULL THEN hash(namespace, pod) END AS hold,
        uuid, gpu_i_id, vgpu, profile, node, namespace, pod
    FROM src
),
card AS (
    SELECT *,
        first_value(t) OVER (PARTITION BY card ORDER BY t GROUPS BETWEEN 1 FOLLOWING AND 1 FOLLOWING)
            AS t_card_next
    FROM raw
),
seq AS (
    SELECT dev, hold, t, act, fb,
        least(lead(t) OVER d, t_card_next) AS t_next, lag(t) OVER d AS t_prev,
        lag(hold) OVER d AS hold_prev, lag(act) OVER d AS act_prev
    FROM card
    WINDOW d AS (PARTITION BY dev ORDER BY t)
),
flagged AS (
    SELECT *,
        CASE WHEN t_next - t <= $tol THEN t_next - t ELSE $step END AS dt,
        coalesce(t - t_prev <= $tol, false) AND hold_prev IS NOT DISTINCT FROM hold AS continues,
        coalesce(act < $thr, false) AS idle,
        coalesce(act_prev < $thr, false) AS idle_prev
    FROM seq
),
runs AS (
    SELECT *,
        sum(CASE WHEN continues THEN 0 ELSE 1 END) OVER r AS alloc_no,
        sum(CASE WHEN idle AND idle_prev AND continues THEN 0 ELSE 1 END) OVER r AS idle_no
    FROM flagged
    WINDOW r AS (PARTITION BY dev ORDER BY t ROWS UNBOUNDED PRECEDING)
),
idle_runs AS (
    SELECT dev, idle_no, sum(dt) AS run_us, avg(fb) AS fb_avg
    FROM runs
    WHERE idle AND hold IS NOT NULL
    GROUP BY ALL
),
pieces AS (
    SELECT r.dev, r.hold, r.alloc_no, r.idle_no, r.act, r.fb, i.run_us,
        greatest(r.t, $ws) AS a, least(r.t + r.dt, $we) AS b,
        coalesce(i.run_us >= $min_idle, false) AS long_idle,
        coalesce(i.run_us >= $min_idle AND i.fb_avg >= $held_fb, false) AS held_idle
    FROM runs r
    LEFT JOIN idle_runs i ON i.dev = r.dev AND i.idle_no = r.idle_no
    WHERE r.hold IS NOT NULL AND r.t + r.dt > $ws AND r.t < $we
)
"""

_NAMED = "JOIN names n USING (dev, hold)"
_NAME_COLUMNS = "n.uuid, n.gpu_i_id, nullif(n.vgpu, '') AS vgpu, n.profile, n.node, n.namespace, n.pod"

# Step 5: split at the hour (an interval is never longer than the tolerance, at most 1 h).
_HOURLY_SQL = f"""
WITH {_RUNS_CTE},
split AS (
    SELECT *, a - a % {HOUR_US} AS h0 FROM pieces WHERE b > a
),
parts AS (
    SELECT dev, hold, act, fb, long_idle, held_idle, h0 AS hour, least(b, h0 + {HOUR_US}) - a AS len
    FROM split
    UNION ALL
    SELECT dev, hold, act, fb, long_idle, held_idle, h0 + {HOUR_US} AS hour, b - (h0 + {HOUR_US}) AS len
    FROM split WHERE b > h0 + {HOUR_US}
),
hourly AS (
    SELECT hour, dev, hold,
        sum(len) / {HOUR_US}.0 AS held_hours,
        sum(CASE WHEN long_idle THEN len ELSE 0 END) / {HOUR_US}.0 AS idle_hours,
        sum(CASE WHEN held_idle THEN len ELSE 0 END) / {HOUR_US}.0 AS held_idle_hours,
        sum(len * act) / nullif(sum(CASE WHEN act IS NOT NULL THEN len END), 0) AS active_ratio,
        max(fb) AS fb_used_max_mib
    FROM parts
    GROUP BY ALL
)
SELECT hour, {_NAME_COLUMNS}, held_hours, idle_hours, held_idle_hours, active_ratio,
    fb_used_max_mib
FROM hourly {_NAMED}
"""

_ALLOCATIONS_SQL = f"""
WITH {_RUNS_CTE},
allocs AS (
    SELECT dev, hold, min(a) AS start_us, max(b) AS end_us
    FROM pieces WHERE b > a
    GROUP BY dev, hold, alloc_no
)
SELECT {_NAME_COLUMNS}, start_us, end_us FROM allocs {_NAMED}
"""

_IDLE_RUNS_SQL = f"""
WITH {_RUNS_CTE},
idle AS (
    SELECT dev, hold, min(a) AS start_us, max(b) AS end_us, sum(b - a) / {HOUR_US}.0 AS idle_hours,
        bool_or(held_idle) AS held, max(fb) AS fb_used_max_mib, avg(act) AS active_mean,
        any_value(run_us) / {HOUR_US}.0 AS run_hours
    FROM pieces
    WHERE long_idle AND b > a
    GROUP BY dev, hold, idle_no
)
SELECT {_NAME_COLUMNS}, start_us, end_us, idle_hours, held, fb_used_max_mib, active_mean, run_hours
FROM idle {_NAMED}
"""


def _us_to_ts(*names: str) -> list[pl.Expr]:
    return [pl.col(n).cast(pl.Int64).cast(pl.Datetime("us", "UTC")) for n in names]


def held_hourly(wh: Warehouse, window: Window, rules: SampleRules) -> pl.DataFrame:
    """Held time per device, holder and hour (hours in `held_hours`, `idle_hours`, ...)."""
    frame = wh.query(_HOURLY_SQL, params(window, rules))
    return frame.with_columns(_us_to_ts("hour")).rename({"hour": "ts"})


def allocation_runs(wh: Warehouse, window: Window, rules: SampleRules) -> pl.DataFrame:
    """Each allocation (a run of one holder on one device) clipped to the window."""
    frame = wh.query(_ALLOCATIONS_SQL, params(window, rules))
    return frame.with_columns(_us_to_ts("start_us", "end_us")).rename(
        {"start_us": "start_ts", "end_us": "end_ts"}
    ).sort(["start_ts", "uuid", "gpu_i_id", "vgpu"], nulls_last=True)


def idle_runs(wh: Warehouse, window: Window, rules: SampleRules) -> pl.DataFrame:
    """Idle runs of at least `min_minutes`, clipped to the window (`run_hours`: full length)."""
    frame = wh.query(_IDLE_RUNS_SQL, params(window, rules))
    return frame.with_columns(_us_to_ts("start_us", "end_us")).rename(
        {"start_us": "start_ts", "end_us": "end_ts"}
    )
