"""Read queries of the workload views (`analytics.workloads`): per-allocation activity and
memory statistics, cards' memory, pods' owners and labels, and vLLM token increases per day.

Why here: only `warehouse/` speaks SQL. `analytics.workloads.requested` (requested vs used, the
workload a pod belongs to) and `analytics.workloads.tokens` (token cost) hold the rules and read
the samples and the inventory only through these. The activity of a sample is the one rule of
`core.activity`. Windows are half-open `[start, end)`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import datetime
from functools import cache
from typing import TYPE_CHECKING

from gpuledger.core.activity import ActivitySource, activity_sql
from gpuledger.warehouse.connection import memory_limit_bytes
from gpuledger.warehouse.queries.freshness import fingerprints_kept
from gpuledger.warehouse.queries.pods import newest_incarnation
from gpuledger.warehouse.queries.sampling import has_series_layout
from gpuledger.warehouse.sample_fingerprints import SAMPLES
from gpuledger.warehouse.sample_layout import SERIES_TABLE, VALUES_TABLE

if TYPE_CHECKING:
    import polars as pl

    from gpuledger.warehouse.protocols import ReadableWarehouse

_VALUE_AGGREGATES = """count(*) AS samples,
    sum(({activity})::DECIMAL(38, 18))::DOUBLE / count({activity}) AS act_mean,
    quantile_cont({activity}, 0.95) AS act_p95,
    stddev_pop({activity}) AS act_std,
    quantile_cont(fb_used_mib, 0.95) AS fb_p95_mib,
    max(fb_used_mib) AS fb_max_mib,
    min(ts) AS first_ts,
    max(ts) AS last_ts"""
"""Each allocation's statistics. The mean is an exact sum (DECIMAL) over the count, not `avg`:
DuckDB's threads add a double sum in an order of their own, so two statements gave means
apart in the last bits, and where a mean lies on a ninth-decimal boundary (readings of few
decimals) `steady` rounded it one step apart (87 of 173,401 allocations at 1,000 GPUs; decision
0263). The p95s are order statistics, the same every time; the standard deviation's last bits
still move, but a square root almost never lies on such a boundary (none of the 173,401)."""
_AGGREGATES = ("namespace, pod, uuid, gpu_i_id, nullif(coalesce(vgpu, ''), '') AS vgpu,\n"
               "    mig_profile AS profile,\n    " + _VALUE_AGGREGATES)

_VIEW_STATS_SQL = """
SELECT {aggregates}
FROM gpu_samples
WHERE ts >= $start AND ts < $end AND namespace IS NOT NULL
GROUP BY namespace, pod, uuid, gpu_i_id, coalesce(vgpu, ''), mig_profile
"""
"""A catalog without the series layout (before v008): every allocation in one statement."""

_ALLOCATIONS_SQL = f"""
WITH labelled AS (
    SELECT series_id, namespace, pod, uuid, gpu_i_id, coalesce(vgpu, '') AS vg, mig_profile,
        min(series_id) OVER (PARTITION BY namespace, pod, uuid, gpu_i_id, coalesce(vgpu, ''), mig_profile)
            AS allocation
    FROM {SERIES_TABLE}
    WHERE namespace IS NOT NULL
      AND hash(namespace, pod, uuid, gpu_i_id, coalesce(vgpu, ''), mig_profile) % $parts = $part
), part AS (
    SELECT * FROM labelled{{touching}}
)"""
"""The allocations of one part (`part`: their series and first series id), of those touching
the ranges where `{touching}` is `_TOUCHING`: the CTEs `_SERIES_STATS_SQL` opens with, and
what `allocation_stats` counts the asked samples of."""
_SERIES_STATS_SQL = _ALLOCATIONS_SQL + f""", stats AS (
    SELECT allocation, {{aggregates}}
    FROM {VALUES_TABLE} JOIN (SELECT series_id, allocation FROM part) USING (series_id)
    WHERE ts >= $start AND ts < $end
    GROUP BY allocation
)
SELECT p.namespace, p.pod, p.uuid, p.gpu_i_id, nullif(p.vg, '') AS vgpu, p.mig_profile AS profile,
    s.* EXCLUDE (allocation)
FROM stats s JOIN part p ON p.series_id = s.allocation
"""
_TOUCHING = f"""
    WHERE allocation IN (SELECT allocation FROM labelled WHERE series_id IN (
        SELECT DISTINCT series_id FROM {VALUES_TABLE} WHERE {{ranges}}))"""
"""Only the allocations with a sample in the ranges `$lo<i>`, `$hi<i>` (`allocation_stats`'s
`touching`), each over all its samples of the window."""
"""One part of the allocations (a hash of their labels modulo `$parts`): the part is picked
among the series (a few thousand rows), so the values table's rows of other parts are dropped
by the join before any aggregate state is built. The samples are grouped by an allocation's
first series id (an integer) and its labels joined to the result: at 1,000 GPUs × 31 days
3.0 s against 4.1 s grouping 44 M rows by six label strings, the same memory."""

QUANTILE_STATE_BYTES = 32
"""DuckDB's memory per sample while it takes the two exact p95s of `allocation_stats`: the
statement over a 256-GPU month (19.7 M samples) fails under a 512 MiB `memory_limit` and
completes under 640 MiB (docs/decisions/0244)."""


@cache
def _allocation_stats_sql(activity: ActivitySource, series_layout: bool, touching: int = 0) -> str:
    """The statement under `activity`; on the series layout, of the allocations with a sample in
    `touching` ranges (all of them when 0)."""
    rule = activity_sql(None, activity)
    if not series_layout:
        return _VIEW_STATS_SQL.format(aggregates=_AGGREGATES.format(activity=rule))
    return _SERIES_STATS_SQL.format(aggregates=_VALUE_AGGREGATES.format(activity=rule),
                                    touching=_touching(touching))


def _touching(ranges: int) -> str:
    """The filter of the allocations with a sample in `ranges` ranges `$lo<i>`..`$hi<i>` (none: "")."""
    if not ranges:
        return ""
    return _TOUCHING.format(ranges=" OR ".join(f"(ts >= $lo{i} AND ts < $hi{i})" for i in range(ranges)))


def allocation_stats_version(activity: ActivitySource) -> str:
    """The name a window's allocation statistics are kept under (`warehouse.day_parts.DayParts
    .spanning`): the statement's digest under `activity`."""
    from gpuledger.warehouse.queries.advice import query_version

    return query_version("allocation_stats", _allocation_stats_sql(activity, True))


def quantile_parts(samples: int, memory_limit_bytes: int) -> int:
    """How many statements `allocation_stats` splits the allocations into so that one part's
    quantile state (`QUANTILE_STATE_BYTES` a sample) takes at most half of DuckDB's memory bound.

    Why: an exact quantile is a holistic aggregate; DuckDB keeps every value of every group
    until the end and cannot spill that state, so one statement over a month fails under a
    bound that the rest of the refresh fits in (0222). Splitting by allocation keeps each
    result exact and the same; each part costs one more scan of the window's values."""
    return max(1, math.ceil(samples * QUANTILE_STATE_BYTES / (memory_limit_bytes / 2)))


def allocation_stats(
    wh: ReadableWarehouse, start: datetime, end: datetime, activity: ActivitySource,
    touching: Sequence[tuple[datetime, datetime]] = (),
) -> pl.DataFrame:
    """Per allocation (a pod on one device) with samples in `[start, end)`: `namespace`, `pod`,
    `uuid`, `gpu_i_id`, `vgpu` (NULL when unlabeled), `profile`, `samples`, `act_mean`,
    `act_p95`, `act_std` (activity by the rule of `core.activity` under `activity`, the
    caller's `SamplingRules.activity`), `fb_p95_mib`, `fb_max_mib`, `first_ts` and `last_ts`
    (its first and last sample); in `quantile_parts` statements, each over a part of the
    allocations. `touching`: time ranges; when given, at least the allocations with a sample in
    one of them (exactly those on the series layout), each still over the whole window (what
    `DayParts.spanning` recomputes when some days changed)."""
    import polars as pl

    window = {"start": start, "end": end}
    if not has_series_layout(wh):
        return wh.query(_allocation_stats_sql(activity, False), window)
    ranges: dict[str, datetime] = {}
    for i, (lo, hi) in enumerate(touching):
        ranges |= {f"lo{i}": lo, f"hi{i}": hi}
    sql = _allocation_stats_sql(activity, True, len(touching))
    counted = _SAMPLE_ROWS if fingerprints_kept(wh) else _SAMPLES_COUNTED
    parts = quantile_parts(int(wh.scalar(counted.format(asked=""), window)), memory_limit_bytes(wh))
    if touching and parts > 1:  # sized by the samples of the allocations asked for, not the window's
        asked = _ALLOCATIONS_SQL.format(touching=_touching(len(touching))) + "\n" + counted.format(
            asked=" SEMI JOIN part USING (series_id)")
        parts = quantile_parts(int(wh.scalar(asked, {**window, **ranges, "parts": 1, "part": 0})),
                               memory_limit_bytes(wh))
    return pl.concat([wh.query(sql, {**window, **ranges, "parts": parts, "part": i}) for i in range(parts)])


_SAMPLE_ROWS = (f"SELECT coalesce(sum(sample_rows), 0) FROM {SAMPLES.table}{{asked}} "
                "WHERE day >= CAST($start AS DATE) AND day <= CAST($end - INTERVAL 1 MICROSECOND AS DATE)")
"""How many samples `allocation_stats` sizes its parts by (`{asked}`: of the allocations asked
for), from the fingerprints every write keeps per day and series (`warehouse.sample_fingerprints`):
their 2.5 M rows at 10,000 GPUs, not the month's 758 M values (the running day's allocations'
samples counted in 1.2-1.3 s against 1.5-1.9 s; finding those allocations is the rest). The
UTC days the window reaches: more than the window's samples where its edges cut a day (a bound
sized by more samples splits into more parts, never fewer)."""
_SAMPLES_COUNTED = f"SELECT count(*) FROM {VALUES_TABLE}{{asked}} WHERE ts >= $start AND ts < $end"
"""The same counted from the values, for a catalog without the fingerprints (before v018)."""


def card_memory(wh: ReadableWarehouse) -> pl.DataFrame:
    """Every inventoried card: `uuid`, `model`, `card_memory_mib`, `card_mode` (its sharing mode)."""
    return wh.query(
        "SELECT uuid, model, memory_mib AS card_memory_mib, sharing_mode AS card_mode FROM gpus"
    )


def pod_owner_rows(wh: ReadableWarehouse) -> pl.DataFrame:
    """Each pod name once, as its newest stored interval says: `namespace`, `pod`, `owner_kind`,
    `owner_name`, `requests` (GPU requests, JSON text), `labels` (JSON text). A StatefulSet's
    recreated pod keeps its name (one row per incarnation in `pods`); one row per interval
    repeated its allocations once per incarnation where joined on the name."""
    return wh.query(newest_incarnation({
        "owner_kind": "p.owner_kind", "owner_name": "p.owner_name",
        "requests": "CAST(p.gpu_requests AS VARCHAR)", "labels": "CAST(p.labels AS VARCHAR)"}))


def last_pod_owners(wh: ReadableWarehouse) -> pl.DataFrame:
    """Each pod once, as its newest interval stored it: `namespace`, `pod`, `owner_kind`,
    `owner_name`, `labels` (JSON text)."""
    return wh.query(newest_incarnation({
        "owner_kind": "p.owner_kind", "owner_name": "p.owner_name", "labels": "CAST(p.labels AS VARCHAR)"}))


_TOKEN_PIECE_SQL = """
WITH k AS (  -- the piece's series, numbered in name order
    SELECT row_number() OVER (ORDER BY namespace, pod, model_name) AS sid, * FROM (
        SELECT DISTINCT namespace, pod, model_name FROM token_samples WHERE ts >= $lo AND ts < $hi)
), s AS (
    SELECT ts, k.sid, prompt_tokens_total AS p, generation_tokens_total AS g,
        lag(prompt_tokens_total) OVER w AS p0, lag(generation_tokens_total) OVER w AS g0,
        row_number() OVER w AS n
    FROM token_samples t JOIN k ON k.namespace = t.namespace AND k.pod = t.pod AND k.model_name = t.model_name
    WHERE ts >= $lo AND ts < $hi
    WINDOW w AS (PARTITION BY k.sid ORDER BY ts)
)
SELECT k.namespace, k.pod, k.model_name, m.* EXCLUDE (sid) FROM (
    SELECT sid,
        sum(CASE WHEN n = 1 THEN NULL WHEN p0 IS NULL THEN p WHEN p >= p0 THEN p - p0 ELSE p END)
            AS prompt_within,
        sum(CASE WHEN n = 1 THEN NULL WHEN g0 IS NULL THEN g WHEN g >= g0 THEN g - g0 ELSE g END)
            AS generation_within,
        min(ts) AS first_ts, arg_min_null(p, ts) AS first_p, arg_min_null(g, ts) AS first_g,
        arg_max_null(p, ts) AS last_p, arg_max_null(g, ts) AS last_g
    FROM s GROUP BY sid
) m JOIN k ON k.sid = m.sid
ORDER BY m.sid
"""
"""One piece of time `[lo, hi)` of the token counters, per series: the increases between its
samples inside the piece (`*_within`: a drop is a reset, the new value is the increase since),
and its first and last sample, which join the piece to its neighbours (`token_increases`).
The series are numbered once (`k`, in name order, so the rows come out in the names' order)
and the window and the grouping key on the number: vLLM pods' names are long and share long
prefixes, and partitioning by them was most of the piece (a 10,000-GPU day 3.3-3.8 CPU-s, now
1.2-1.9; 1,000 GPUs 0.12-0.15 s, now 0.08; the same rows, decision 0276)."""
_SERIES = ["namespace", "pod", "model_name"]


def token_piece_version() -> str:
    """The name a UTC day's token piece is kept under in the day parts (its SQL's digest)."""
    from gpuledger.warehouse.queries.advice import query_version

    return query_version("token_pieces", _TOKEN_PIECE_SQL)


def token_piece(wh: ReadableWarehouse, lo: datetime, hi: datetime) -> pl.DataFrame:
    """The token counters of `[lo, hi)` as one piece (`_TOKEN_PIECE_SQL`): a UTC day's piece
    depends only on that day's samples, so a refresh can keep it (`warehouse.day_parts`)."""
    return wh.query(_TOKEN_PIECE_SQL, {"lo": lo, "hi": hi})


def token_increases(
    wh: ReadableWarehouse, start: datetime, end: datetime, *, since: datetime,
    read: Callable[[ReadableWarehouse, datetime, datetime], pl.DataFrame] = token_piece,
) -> pl.DataFrame:
    """vLLM's prompt and generated token counters' increases in `[start, end)`, per UTC day,
    namespace, pod and model: `day`, `namespace`, `pod`, `model_name`, `prompt_tokens`,
    `generation_tokens`.

    A counter that drops was reset: the new value is the increase since the reset. A series
    is measured from its last sample in `[since, start)`; one with none there counts its first
    value in the window (a new pod), unless that value lies at `start` itself.

    Read as pieces (`read`, `token_piece` by default): `[since, start)`, then each UTC day of
    the window. A day's increases are its pieces' own plus the step from the series' last
    sample in an earlier piece to its first in this one, the pair one query over `[since, end)`
    would have taken (issue 34: a refresh reads the one day that changed, not the month)."""
    import polars as pl

    from gpuledger.core.window import Window

    bounds = [(since, start)] if since < start else []
    bounds += [(day.start, day.end) for day in Window(start, end).days()]
    pieces = [read(wh, lo, hi).with_columns(pl.lit(lo).alias("piece")) for lo, hi in bounds]
    frame = pl.concat(pieces, how="vertical_relaxed").sort([*_SERIES, "piece"])
    return (
        frame.with_columns(_step("prompt", start), _step("generation", start))
        .filter(pl.col("piece") >= start)
        .select(pl.col("piece").dt.date().alias("day"), *_SERIES, "prompt_tokens", "generation_tokens")
        .sort(["day", *_SERIES])
    )


def _step(name: str, start: datetime) -> pl.Expr:
    """A piece's `name` increase: its own, plus the step into its first sample from the
    series' last in the piece before (none: the first value counts unless it lies at `start`),
    NULL where both are NULL, as SQL's sum of the same terms."""
    import polars as pl

    column = "p" if name == "prompt" else "g"
    first, within = pl.col(f"first_{column}"), pl.col(f"{name}_within")
    before = pl.col(f"last_{column}").shift().over(_SERIES)
    into = (pl.when(before.is_null()).then(pl.when(pl.col("first_ts") > start).then(first).otherwise(0.0))
            .when(first >= before).then(first - before).otherwise(first))
    total = within.fill_null(0.0) + into.fill_null(0.0)
    return pl.when(within.is_null() & into.is_null()).then(None).otherwise(total).alias(f"{name}_tokens")
