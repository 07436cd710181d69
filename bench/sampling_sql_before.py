"""The sampling model's pass as it was before decision 0122: one SQL statement of window
functions (the "before" baseline of `bench_warehouse` and of the differential check, which must
find the Polars pass of `analytics.sampling.sweep` equal to it row for row). Frozen: do not edit;
the model lives in `analytics.sampling.model` / `analytics.sampling.sweep`.


1. Read the window's samples plus a margin on each side, each field as a reading (NaN and
   negative values are NULL).
2. One row per device and time: rows of one device at one time merge (holder kept, each
   field's reading kept).
3. Per row: the card's next scrape, and each field's last reading for the same device and
   holder within the staleness bound (`$stale`).
4. Per card: its sample spacing, the median interval between its rows no longer than the
   staleness bound (else the read window's median over cards, else `$fallback`).
5. Each row's interval `dt` (to the card's next scrape within the tolerance, else the card's
   spacing), and the runs: an allocation continues while the next row has the same holder and
   no long gap; an idle run while the carried activity stays under the threshold.
6. Idle runs measured over their full length; runs of at least `$min_idle` are idle time,
   "held idle" when framebuffer use averages at least `$held_fb`.
7. Every interval clipped to the window; the consumers split at the hour or group by run.

The sorts carry only integers: a device, its card and its holder are 64-bit hashes, joined
back to their names (`names`) after aggregation.
"""

from __future__ import annotations

from gpuledger.core.activity import activity_of, reading_sql

HOUR_US = 3_600_000_000

_ACTIVITY = activity_of("gr_c", "util_c")

RUNS_CTE = f"""
src AS (
    SELECT uuid, gpu_i_id, coalesce(vgpu, '') AS vgpu, mig_profile AS profile, node,
        namespace, pod, epoch_us(ts) AS t,
        {reading_sql("gr_engine_active")} AS gr, {reading_sql("gpu_util")} AS util,
        {reading_sql("fb_used_mib")} AS fb
    FROM gpu_samples
    WHERE ts >= $lo AND ts < $hi
),
keyed AS (
    SELECT hash(uuid) AS card, hash(uuid, gpu_i_id, vgpu, profile) AS dev,
        CASE WHEN namespace IS NOT NULL THEN hash(namespace, pod) END AS hold, t, gr, util, fb
    FROM src
),
raw AS (
    SELECT card, dev, t, min(hold) AS hold, max(gr) AS gr, max(util) AS util, max(fb) AS fb
    FROM keyed
    GROUP BY card, dev, t
),
names AS (
    SELECT hash(uuid, gpu_i_id, vgpu, profile) AS dev,
        CASE WHEN namespace IS NOT NULL THEN hash(namespace, pod) END AS hold,
        any_value(uuid) AS uuid, any_value(gpu_i_id) AS gpu_i_id, any_value(vgpu) AS vgpu,
        any_value(profile) AS profile, arg_max(node, t) AS node,
        any_value(namespace) AS namespace, any_value(pod) AS pod
    FROM src
    GROUP BY 1, 2
),
card AS (
    SELECT card, dev, hold, t, fb,
        first_value(t) OVER (PARTITION BY card ORDER BY t GROUPS BETWEEN 1 FOLLOWING AND 1 FOLLOWING)
            AS t_card_next,
        last_value(gr IGNORE NULLS) OVER carry AS gr_c,
        last_value(util IGNORE NULLS) OVER carry AS util_c,
        last_value(fb IGNORE NULLS) OVER carry AS fb_c
    FROM raw
    WINDOW carry AS (PARTITION BY dev, hold ORDER BY t RANGE BETWEEN $stale PRECEDING AND CURRENT ROW)
),
card_spacing AS (
    SELECT card, quantile_disc(t_card_next - t, 0.5) FILTER (WHERE t_card_next - t <= $stale) AS sp
    FROM card
    GROUP BY card
),
spacing AS (
    SELECT card, coalesce(sp, (SELECT quantile_disc(sp, 0.5) FROM card_spacing), $fallback) AS sp
    FROM card_spacing
),
seq AS (
    SELECT c.dev, c.hold, c.t, {_ACTIVITY} AS act, c.fb_c AS fb, s.sp, greatest($tol, s.sp) AS tol,
        least(lead(c.t) OVER d, c.t_card_next) AS t_next, lag(c.t) OVER d AS t_prev,
        lag(c.hold) OVER d AS hold_prev, lag({_ACTIVITY}) OVER d AS act_prev
    FROM card c JOIN spacing s USING (card)
    WINDOW d AS (PARTITION BY c.dev ORDER BY c.t)
),
flagged AS (
    SELECT *,
        CASE WHEN t_next - t <= tol THEN t_next - t ELSE sp END AS dt,
        coalesce(t - t_prev <= tol, false) AND hold_prev IS NOT DISTINCT FROM hold AS continues,
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

# Step 7 for the hourly frame: split at the hour (an interval is never longer than the
# tolerance, at most 1 h, so at most two pieces).
HOURLY_SQL = f"""
WITH {RUNS_CTE},
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

ALLOCATIONS_SQL = f"""
WITH {RUNS_CTE},
allocs AS (
    SELECT dev, hold, min(a) AS start_us, max(b) AS end_us
    FROM pieces WHERE b > a
    GROUP BY dev, hold, alloc_no
)
SELECT {_NAME_COLUMNS}, start_us, end_us FROM allocs {_NAMED}
"""

IDLE_RUNS_SQL = f"""
WITH {RUNS_CTE},
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


def one_pass_sql() -> str:
    """`HOURLY_SQL` and `ALLOCATIONS_SQL` as one statement over one sample pass, as the roll-up
    ran them (decision 0072): each tail a nested CTE over the shared, materialized `pieces` and
    `names`, stacked and told apart by `part`."""
    head = f"WITH {RUNS_CTE},"
    tails = ["WITH " + text.strip()[len(head):] for text in (HOURLY_SQL, ALLOCATIONS_SQL)]
    shared = head
    for cte in ("pieces", "names"):
        shared = shared.replace(f"\n{cte} AS (", f"\n{cte} AS MATERIALIZED (")
    return (
        f"{shared}\nhourly_part AS ({tails[0]}),\nalloc_part AS ({tails[1]})\n"
        "SELECT 'hourly' AS part, * FROM hourly_part "
        "UNION ALL BY NAME SELECT 'alloc' AS part, * FROM alloc_part"
    )
