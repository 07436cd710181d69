"""The steps of the sampling model (`analytics.sampling.model` states the model) and the SQL of step 1.

1. Read the window's samples plus a margin on each side, each field as a reading (NaN and
   negative values are NULL); a device, its card and its holder as 64-bit hashes (`READ_SQL`,
   run where the samples are), their labels once per device and holder (`NAMES_SQL`).
2. One row per device and time: rows of one device at one time merge (holder kept, each
   field's reading kept).
3. Per row: the card's next scrape, and each field's last reading for the same device and
   holder within the staleness bound (`stale`).
4. Per card: its sample spacing, the median interval between its rows no longer than the
   staleness bound (else the read window's median over cards, else `fallback`).
5. Each row's interval `dt` (to the card's next scrape within the tolerance, else the card's
   spacing), and the runs: an allocation continues while the next row has the same holder and
   no long gap; an idle run while the carried activity stays under the threshold.
6. Idle runs measured over their full length; runs of at least `min_idle` are idle time,
   "held idle" when framebuffer use averages at least `held_fb`.
7. Every interval clipped to the window; the consumers split at the hour or group by run.

Steps 2–7 run in `analytics.sampling.sweep` over the integer columns of step 1, sorted once
(decision 0122); before, they were one SQL statement of window functions (its text is the
baseline in `bench/sampling_sql_before.py`).
"""

from __future__ import annotations

from gpuledger.core.activity import reading_sql

HOUR_US = 3_600_000_000

DEVICE_KEY_SQL = "hash(uuid, gpu_i_id, coalesce(vgpu, ''), mig_profile)"
HOLDER_KEY_SQL = "CASE WHEN namespace IS NOT NULL THEN hash(namespace, pod) END"

READ_SQL = f"""
SELECT {DEVICE_KEY_SQL} AS dev, {HOLDER_KEY_SQL} AS hold, epoch_us(ts) AS t,
    {reading_sql("gr_engine_active")} AS gr, {reading_sql("gpu_util")} AS util,
    {reading_sql("fb_used_mib")} AS fb
FROM gpu_samples
WHERE ts >= $lo AND ts < $hi
"""

# Labels per device and holder: grouped on the labels themselves first (cheaper than hashing
# every row), then per hash; the node is the one of the latest sample.
NAMES_SQL = f"""
WITH combos AS (
    SELECT uuid, gpu_i_id, vgpu, mig_profile, namespace, pod, arg_max(node, ts) AS node,
        max(ts) AS last
    FROM gpu_samples
    WHERE ts >= $lo AND ts < $hi
    GROUP BY ALL
)
SELECT {DEVICE_KEY_SQL} AS dev, {HOLDER_KEY_SQL} AS hold, hash(any_value(uuid)) AS card,
    any_value(uuid) AS uuid, any_value(gpu_i_id) AS gpu_i_id,
    nullif(any_value(coalesce(vgpu, '')), '') AS vgpu,
    any_value(mig_profile) AS profile, arg_max(node, last) AS node,
    any_value(namespace) AS namespace, any_value(pod) AS pod
FROM combos
GROUP BY 1, 2
"""
