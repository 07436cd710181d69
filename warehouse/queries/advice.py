"""Read queries of the fleet-shaping advice (`analytics.advice`): layouts over time, shared
cards' holders per minute, serving Deployments per minute, hourly node activity.

Why here: only `warehouse/` speaks SQL; the advice modules take these frames and never see a
statement. Every query is bounded by a half-open window `[start, end)`. A sample's activity is
the one rule of `core.activity` under the source the caller passes (`SamplingRules.activity`):
a sample without a reading (missing, NaN, negative) has none, never 0, and an aggregate over
a minute or hour without any reading is NULL (docs/decisions/0157).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime, timedelta
from functools import cache
from typing import TYPE_CHECKING

import polars as pl

from gpuledger.core.activity import ActivitySource, activity_sql
from gpuledger.core.window import DAY, floor_time
from gpuledger.warehouse.queries.freshness import fingerprints_kept
from gpuledger.warehouse.queries.pods import newest_incarnation
from gpuledger.warehouse.sample_fingerprints import SAMPLES, TOKENS
from gpuledger.warehouse.utc_sql import DAY_US, HOUR_US, MINUTE_US, utc_floor

if TYPE_CHECKING:
    from gpuledger.warehouse.protocols import ReadableWarehouse

_LAYOUTS_SQL = """
WITH t AS (
    SELECT unnest(generate_series(CAST($start AS TIMESTAMPTZ), CAST($end AS TIMESTAMPTZ) - INTERVAL 1 SECOND,
                                  CAST($step AS INTERVAL))) AS ts
), seen AS (SELECT min(start_ts) AS lo, max(end_ts) AS hi FROM mig_instances),
cards AS (SELECT uuid, node, pool, model FROM gpus WHERE sharing_mode = 'mig'),
alive AS (
    SELECT t.ts, m.uuid, m.profile, count(*) AS n
    FROM t JOIN mig_instances m ON m.start_ts <= t.ts AND t.ts <= m.end_ts + CAST($slack AS INTERVAL)
    GROUP BY ALL
)
SELECT t.ts, c.pool, c.node, c.uuid, c.model, a.profile, coalesce(a.n, 0) AS n
FROM t CROSS JOIN cards c CROSS JOIN seen
LEFT JOIN alive a ON a.ts = t.ts AND a.uuid = c.uuid
WHERE t.ts >= seen.lo AND t.ts <= seen.hi + CAST($slack AS INTERVAL)
ORDER BY t.ts, c.node, c.uuid, a.profile
"""


def mig_layouts(
    wh: ReadableWarehouse, start: datetime, end: datetime, step: timedelta = timedelta(hours=1),
    slack: timedelta = timedelta(minutes=10),
) -> pl.DataFrame:
    """MIG cards' instances alive at each `step` in `[start, end)` while layouts were
    observed: `ts`, `pool`, `node`, `uuid`, `model`, `profile` (NULL: no instance), `n`."""
    return wh.query(_LAYOUTS_SQL, {"start": start, "end": end, "step": step, "slack": slack})


_NODE_ACTIVITY_SQL = """
SELECT {hour} AS ts, s.node,
    sum(({activity})::DECIMAL(38, 18))::DOUBLE / nullif(count({activity}), 0) AS activity
FROM gpu_samples s WHERE s.ts >= $start AND s.ts < $end
GROUP BY ALL ORDER BY node, ts
"""


def node_activity_hourly(
    wh: ReadableWarehouse, start: datetime, end: datetime, activity: ActivitySource,
) -> pl.DataFrame:
    """Mean activity per node and hour over its devices' samples that have a reading (the rule
    of `core.activity` under `activity`): `ts`, `node`, `activity` (NULL for an hour whose
    samples have no reading at all: unknown, not idle). Every hour lies in one UTC day, so
    the fragmentation advice reads it a day at a time, through the day parts. The mean is an
    exact sum (DECIMAL) over the count, as the allocations' (decision 0263): with `avg`, a day's
    statement and the window's added their doubles in their threads' orders, and the same
    hour's mean came out apart in the last bit."""
    return wh.query(_with_activity(PER_MINUTE_TEMPLATES["node_activity_hourly"], activity, "s"),
                    {"start": start, "end": end})


_TOKENS_RATE = """
tok AS (
    SELECT {token_minute} AS minute, {key},
        sum(CASE WHEN ts0 IS NOT NULL THEN CASE WHEN d < 0 THEN v ELSE d END
                 / nullif(epoch(ts) - epoch(ts0), 0) END) AS tokens_per_s{gauges}
    FROM (
        SELECT ts, {pod_key}, generation_tokens_total AS v, num_requests_waiting, num_requests_running,
            generation_tokens_total - lag(generation_tokens_total) OVER w AS d, lag(ts) OVER w AS ts0
        FROM token_samples t {pods}
        WHERE ts >= $start - INTERVAL 10 MINUTE AND ts < $end
        WINDOW w AS (PARTITION BY {pod_key}, t.model_name ORDER BY ts)
    ) WHERE ts >= $start GROUP BY ALL
)"""
"""vLLM's counters per pod and minute: generated tokens per second (NULL in a minute without
two samples of a series to take a rate from) and, with `{gauges}`, the waiting and running
gauges summed, in one pass over the token samples. Only the counters of the pods `{pods}`
joins are read (the query's own: the shared cards' holders, the Deployments' pods), before the
window sorts them: a pod's rate reads only its own counters, so the rows are the same, and at
1,000 GPUs no vLLM pod held a shared card (the shared cards' query sorted 516,000 token samples
a day for nothing, half its time). `{pod_key}` names the pod: the names, or the Deployments'
query's pod number (`_SERVING_SQL`); `{key}`, the same columns once selected, is derived from it
(`_tokens_rate`)."""


def _tokens_rate(pods: str, pod_key: str, gauges: str) -> str:
    """`_TOKENS_RATE` over the counters of the pods `pods` joins (as `k`), keyed by `pod_key`."""
    key = ", ".join(column.split(".")[-1] for column in pod_key.split(", "))
    return _TOKENS_RATE.format(pods=pods, pod_key=pod_key, key=key, gauges=gauges,
                               token_minute=utc_floor("ts", MINUTE_US))  # the token samples' own time


_GAUGES = ", sum(num_requests_waiting) AS waiting, sum(num_requests_running) AS running"

_SHARED_BODY = """
WITH held AS (
    SELECT {minute} AS minute, s.uuid, s.namespace, s.pod,
        max({activity}) AS activity
    FROM gpu_samples s JOIN gpus g ON g.uuid = s.uuid
    WHERE s.ts >= $start AND s.ts < $end AND g.sharing_mode IN ('timeslice', 'vgpu') AND s.pod IS NOT NULL
    GROUP BY ALL
), owners AS ({holders_owners}  -- one row per pod name (`queries.pods`)
), {tokens_rate_held}
-- `held` is one row per minute, card and pod (namespace and name), and the joins add none: count(*)
-- is the pods holding the card (count(DISTINCT h.pod) merged same-named pods of two namespaces
-- and cost a distinct aggregate, a third of the query)
SELECT h.minute AS ts, h.uuid, g.pool, g.model, count(*) AS holders,
    max(h.activity) AS activity, sum(t.tokens_per_s) AS tokens_per_s,
    count(t.tokens_per_s) AS token_holders, min(p.owner_kind) AS owner_kind, min(p.class_label) AS class_label
FROM held h JOIN gpus g ON g.uuid = h.uuid
LEFT JOIN tok t ON t.minute = h.minute AND t.namespace = h.namespace AND t.pod = h.pod
LEFT JOIN owners p ON p.namespace = h.namespace AND p.pod = h.pod
GROUP BY ALL"""
_SHARED_SQL = _SHARED_BODY + " ORDER BY h.uuid, ts\n"
_SHARED_LEVELS_SQL = """
SELECT pool, model, owner_kind, class_label, holders, count(*) AS minutes,
    sum(activity) AS activity_sum, count(activity) AS activity_n,
    sum(tokens) AS tokens_sum, count(tokens) AS tokens_n, min(ts) AS first_ts, max(ts) AS last_ts
FROM (
    SELECT *, CASE WHEN token_holders = holders THEN tokens_per_s END AS tokens FROM ({shared})
)
GROUP BY ALL ORDER BY pool, model, owner_kind, class_label, holders
"""


def shared_card_minutes(
    wh: ReadableWarehouse, start: datetime, end: datetime, activity: ActivitySource,
) -> pl.DataFrame:
    """Time-sliced and vGPU cards per minute: `ts`, `uuid`, `pool`, `model`, `holders`,
    `activity` (card level, the rule under `activity`; NULL in a minute without a reading),
    `tokens_per_s` (generated, summed over holders with vLLM counters), `token_holders`,
    `owner_kind`, `class_label` (a holder's)."""
    return wh.query(_with_activity(_SHARED_SQL, activity, "s"), {"start": start, "end": end})


def shared_card_levels(
    wh: ReadableWarehouse, start: datetime, end: datetime, activity: ActivitySource,
) -> pl.DataFrame:
    """`shared_card_minutes` summed per (`pool`, `model`, `owner_kind`, `class_label`,
    `holders`): `minutes` (card-minutes), `activity_sum` and `activity_n` (sum and count of the
    minutes with a reading), `tokens_sum` and `tokens_n` (over the minutes where every holder
    had vLLM counters: a minute with some holders unmeasured has no card figure), `first_ts`,
    `last_ts`. A few rows per pool instead of one per card-minute."""
    sql = _with_activity(PER_MINUTE_TEMPLATES["shared_card_levels"], activity, "s")
    return wh.query(sql, {"start": start, "end": end})


_SERVING_SQL = """
WITH owners AS (  -- one row per pod name (`queries.pods`), numbered: `pid` per pod, `did` per Deployment
    SELECT row_number() OVER (ORDER BY namespace, deployment, pod) AS pid,
        dense_rank() OVER (ORDER BY namespace, deployment) AS did, *
    FROM (SELECT namespace, pod, CASE
        WHEN hash IS NOT NULL AND ends_with(owner_name, '-' || hash)
        THEN owner_name[1:length(owner_name) - length(hash) - 1]
        ELSE regexp_replace(owner_name, '-[a-z0-9]{{4,10}}$', '') END AS deployment
    FROM ({replica_set_pods}))
), cards AS (  -- only the Deployments' pods' samples (most samples are not serving pods')
    SELECT {minute} AS minute, o.pid, s.uuid, sum({activity}) AS act_sum, count({activity}) AS act_n
    FROM gpu_samples s JOIN owners o ON o.namespace = s.namespace AND o.pod = s.pod
    WHERE s.ts >= $start AND s.ts < $end AND s.pod IS NOT NULL
    GROUP BY ALL
), held AS (  -- per minute and pod: its cards counted as rows of `cards` (no distinct aggregate)
    SELECT c.minute, c.pid, count(*) AS gpus, sum(c.act_sum) / nullif(sum(c.act_n), 0) AS activity,
        max(g.model) AS model
    FROM cards c LEFT JOIN gpus g ON g.uuid = c.uuid
    GROUP BY ALL
), {tokens_rate_owners}
-- one `held` row per minute and pod, the joins add none: count(*) is the replicas (a distinct
-- aggregate over the pod names counted the same, 10-20 % slower)
SELECT d.namespace, d.deployment, m.* EXCLUDE (did) FROM (
    SELECT o.did, h.minute AS ts, count(*) AS replicas,
        sum(t.waiting) AS queue, avg(h.activity) AS activity, sum(t.running) AS running,
        sum(t.tokens_per_s) AS tokens_per_s, max(h.gpus) AS gpus_per_replica, max(h.model) AS model
    FROM held h JOIN owners o ON o.pid = h.pid
    LEFT JOIN tok t ON t.minute = h.minute AND t.pid = h.pid
    GROUP BY ALL
) m JOIN (SELECT DISTINCT did, namespace, deployment FROM owners) d ON d.did = m.did
ORDER BY m.did, m.ts
"""
"""Deployments' pods per minute. Every join, window and group after the first keys on the
owners' numbers, not the names (`pid` a pod, `did` a Deployment, numbered in name order so the
rows come out in the names' order), and a pod's cards per minute are counted as rows of
`cards`, not by `count(DISTINCT uuid)`: at 10,000 GPUs a day took 12.9 CPU-s hashing and
comparing long pod names (the token rate's window partitioned by them alone 3.3 s) and
splitting the distinct aggregate, now 6.7-7.0 CPU-s, the same rows (decision 0276). The mean
activity is the samples' sum over their count (what `avg` over them was)."""


def serving_minutes(
    wh: ReadableWarehouse, start: datetime, end: datetime, activity: ActivitySource,
) -> pl.DataFrame:
    """Deployments' GPU pods per minute (owner ReplicaSet without its `pod-template-hash`):
    `namespace`, `deployment`, `ts`, `replicas`, `queue` and `running` (vLLM's waiting and
    running gauges summed over replicas; NULL where not collected), `activity` (mean per
    replica of the rule under `activity`, over the samples with a reading), `tokens_per_s`,
    `gpus_per_replica`, `model`. The three names, the same on every minute of a Deployment,
    come as Polars categoricals: a day part of them is read back in a third of the time
    (decompressing 230,000 strings a column was two thirds of reading a 1,000-GPU day's part),
    and the month's Deployments are told apart on their codes."""
    frame = wh.query(_with_activity(PER_MINUTE_TEMPLATES["serving_minutes"], activity, "s"),
                     {"start": start, "end": end})
    return frame.with_columns(pl.col("namespace", "deployment", "model").cast(pl.Categorical))


PER_MINUTE_TEMPLATES = {
    "shared_card_levels": _SHARED_LEVELS_SQL.format(shared=_SHARED_BODY),
    "serving_minutes": _SERVING_SQL,
    "node_activity_hourly": _NODE_ACTIVITY_SQL,
}
"""The per-minute queries read a day at a time that a refresh keeps day parts of, by name (their
SQL before `_with_activity`): what `per_minute_query_version` digests and the stamp covers."""


PerMinuteRead = Callable[["ReadableWarehouse", datetime, datetime, ActivitySource], "pl.DataFrame"]
PER_MINUTE_READS: dict[str, PerMinuteRead] = {
    "shared_card_levels": shared_card_levels,
    "serving_minutes": serving_minutes,
    "node_activity_hourly": node_activity_hourly,
}
"""The reads of `PER_MINUTE_TEMPLATES`, by the same names (what `analytics.advice.run.keep_day`
reads ahead for a day)."""


@cache
def _with_activity(template: str, activity: ActivitySource, alias: str) -> str:
    """`template` with the activity rule and the UTC minute and hour (columns of `alias`,
    `warehouse.utc_sql`) and the token rate filled in."""
    return template.format(activity=activity_sql(alias, activity),
                           minute=utc_floor(f"{alias}.ts", MINUTE_US), hour=utc_floor(f"{alias}.ts", HOUR_US),
                           tokens_rate_held=_tokens_rate(
                               "SEMI JOIN held k ON k.namespace = t.namespace AND k.pod = t.pod",
                               "t.namespace, t.pod", ""),
                           tokens_rate_owners=_tokens_rate(
                               "JOIN owners k ON k.namespace = t.namespace AND k.pod = t.pod",
                               "k.pid", _GAUGES),
                           holders_owners=_HOLDERS_OWNERS, replica_set_pods=_REPLICA_SET_PODS)


_HOLDERS_OWNERS = newest_incarnation(
    {"owner_kind": "p.owner_kind",
     "class_label": """json_extract_string(p.labels, '$."gpuledger.io/workload-class"')"""}, within="held")
"""The shared cards' holders' owner kind and workload-class label, one row per name."""
_REPLICA_SET_PODS = newest_incarnation(
    {"owner_name": "p.owner_name", "hash": """json_extract_string(p.labels, '$."pod-template-hash"')"""},
    where="p.owner_kind = 'ReplicaSet'")
"""The ReplicaSets' pods' owner and pod-template hash, one row per name."""


_STAMPS_SQL = """
WITH samples AS (
    SELECT * FROM {samples} WHERE day BETWEEN $first AND $last
), tokens AS (  -- the day's token samples and the rate's 10 minutes before it
    SELECT day, sample_rows, row_hashes FROM {tokens} WHERE day BETWEEN $first AND $last
    UNION ALL SELECT day + 1, sample_rows, row_hashes FROM ({tail})
), held AS (
    SELECT DISTINCT f.day, s.namespace, s.pod FROM samples f JOIN gpu_series s USING (series_id)
), pods AS (
    SELECT h.day, count(*) AS sample_rows,
        sum(hash(p.namespace, p.pod, p.owner_kind, p.owner_name, p.labels)) AS row_hashes
    FROM pods p JOIN held h ON h.namespace = p.namespace AND h.pod = p.pod GROUP BY h.day
)
SELECT d.day,
    (SELECT coalesce(sum(sample_rows), 0) || '.' || coalesce(sum(row_hashes), 0) FROM samples f
     WHERE f.day = d.day) AS samples,
    (SELECT coalesce(sum(sample_rows), 0) || '.' || coalesce(sum(row_hashes), 0) FROM tokens t
     WHERE t.day = d.day) AS tokens,
    (SELECT coalesce(sum(sample_rows), 0) || '.' || coalesce(sum(row_hashes), 0) FROM pods p
     WHERE p.day = d.day) AS pods
FROM (SELECT unnest($days::DATE[]) AS day) d
"""
_SPAN = "ts >= $first AND ts < $last + INTERVAL 1 DAY"
_TOKEN_TAIL = (f"ts >= $first - INTERVAL 10 MINUTE AND ts < $last "
               f"AND epoch_us(ts) % {DAY_US} >= {DAY_US - 10 * MINUTE_US}")
"""The token samples of the 10 minutes before each day, read for the rate at its start."""
_CARDS_STAMP_SQL = ("SELECT count(*) || '.' || coalesce(sum(hash(uuid, node, model, pool, sharing_mode)), 0) "
                    "FROM gpus")


def per_minute_inputs_stamps(wh: ReadableWarehouse, days: Sequence[tuple[datetime, datetime]]) -> list[str]:
    """A content stamp, per whole UTC day `[start, end)` of `days`, of every row the queries kept
    in day parts (`PER_MINUTE_TEMPLATES`: `shared_card_levels`, `serving_minutes`,
    `node_activity_hourly`), the token counters' pieces (`warehouse.queries.workloads
    .token_piece`) and the allocations' statistics (`allocation_stats`, kept whole under every
    day's stamp) can read for it: the day's GPU samples (their fingerprint: the row count and
    sum of row hashes, every column), the token samples from the rate's 10 minutes before, the
    cards' pool, model and sharing mode, and the pods of the day's samples (owner and labels).
    Equal stamps, equal inputs: a sample backfilled, replaced or dropped, a card moved to
    another pool or a pod relabelled changes it (a count and a sum of row hashes per table, so
    a duplicated row does too).

    One statement for all days, from the fingerprints every write keeps of the GPU samples
    (per day and series: the pods are those of the day's series) and of the token samples
    (per day; the 10 minutes before each day read here), `warehouse.sample_fingerprints`,
    decision 0274: hashing the month's samples took about 1.5 s at 1,000 GPUs on every hourly
    refresh. A catalog without them (not migrated) has them computed from its rows, the same
    numbers."""
    dates = [_whole_day(start, end) for start, end in days]
    if not dates:
        return []
    kept = fingerprints_kept(wh)
    sql = _STAMPS_SQL.format(samples=SAMPLES.table if kept else f"({SAMPLES.of(_SPAN)})",
                             tokens=TOKENS.table if kept else f"({TOKENS.of(_SPAN)})",
                             tail=TOKENS.of(_TOKEN_TAIL))
    found = {day: (samples, tokens, pods) for day, samples, tokens, pods in
             wh.query(sql, {"days": dates, "first": min(dates), "last": max(dates)}).iter_rows()}
    cards = wh.scalar(_CARDS_STAMP_SQL)
    return ["|".join((found[day][0], found[day][1], cards, found[day][2])) for day in dates]


def _whole_day(start: datetime, end: datetime) -> date:
    """The UTC date of the window `[start, end)`, which must be one whole UTC day."""
    if end - start != DAY or floor_time(start, DAY) != start:
        raise ValueError(f"not a whole UTC day: [{start.isoformat()}, {end.isoformat()})")
    return start.astimezone(UTC).date()


def per_minute_query_version(name: str, activity: ActivitySource) -> str:
    """`name` and a digest of the SQL it runs under `activity`: a stored day part computed by
    other SQL (another release, another activity rule) is never read as this query's."""
    return query_version(name, _with_activity(PER_MINUTE_TEMPLATES[name], activity, "s"))


def query_version(name: str, sql: str) -> str:
    """The name a day part of query `name` is kept under: `name` and a digest of its `sql`."""
    import hashlib

    return f"{name}:{hashlib.sha256(sql.encode()).hexdigest()[:16]}"
