"""The sample pass's read: step 1 of the sampling model (`analytics.sampling.sweep`).

Each field as a reading (`core.activity.reading_sql`: NaN and negative values are NULL), a
device, its card and its holder as 64-bit hashes computed where the samples are, and their
labels once per device and holder. Steps 2-7 run in Polars over what this returns.

Read by series (decision 0144). Through the `gpu_samples` view (`READ_SQL`) DuckDB joins every
sample row to its series and hashes four label strings (device) and two (holder) per row, and
`NAMES_SQL` groups every row by six label strings again: about 0.5 CPU-seconds of a 1,000-GPU
day's roll-up, as much as the floor's whole `GROUP BY`. Since v008 (decision 0128) the labels
are stored once per series (`gpu_series`) and each sample row holds only `ts`, an INTEGER
`series_id` and the values (`gpu_sample_values`), so `read` returns:

- `values`: `sid`, `t` (microseconds) and the three readings (`gr`, `util`, `fb`) of every row
  in the read window, straight from the values table (no join, no strings);
- `series`: per series seen in the window, its device and holder hashes (`dev`, `hold`): the
  same expressions as `READ_SQL` (so step 2's "holder kept" picks the same holder of two at
  one time);
- `names`: `NAMES_SQL`'s frame (labels per device and holder, the node of the latest sample),
  grouped from the window's series and each series' latest sample time, not from every row.

Where a catalog has no values table (a `gpu_samples` table of its own, as before v008) the
reader falls back to the view's SQL. Reading `ts` is in one place (`_T`), so a change of how the
values table stores time (`warehouse.sample_layout`) changes one expression here.
"""

from __future__ import annotations

from datetime import datetime

import polars as pl

from gpuledger.core.activity import reading_sql
from gpuledger.warehouse.protocols import ReadableWarehouse
from gpuledger.warehouse.sample_layout import SERIES_TABLE, VALUES_TABLE

DEVICE_KEY_SQL = "hash(uuid, gpu_i_id, coalesce(vgpu, ''), mig_profile)"
HOLDER_KEY_SQL = "CASE WHEN namespace IS NOT NULL THEN hash(namespace, pod) END"
_READINGS = (
    f'{reading_sql("gr_engine_active")} AS gr, {reading_sql("gpu_util")} AS util, '
    f'{reading_sql("fb_used_mib")} AS fb'
)

READ_SQL = f"""
SELECT {DEVICE_KEY_SQL} AS dev, {HOLDER_KEY_SQL} AS hold, epoch_us(ts) AS t,
    {_READINGS}
FROM gpu_samples
WHERE ts >= $lo AND ts < $hi
"""
"""Step 1 through the view: one row per sample with its device and holder hashes."""

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

_T = "epoch_us(ts)"
_WINDOW = "ts >= $lo AND ts < $hi"

VALUES_SQL = f"""
SELECT series_id AS sid, {_T} AS t,
    {_READINGS}
FROM {VALUES_TABLE}
WHERE {_WINDOW}
"""

_LIVE = f"SELECT series_id, max(ts) AS last FROM {VALUES_TABLE} WHERE {_WINDOW} GROUP BY series_id"

SERIES_SQL = f"""
SELECT s.series_id AS sid, {DEVICE_KEY_SQL} AS dev, {HOLDER_KEY_SQL} AS hold
FROM {SERIES_TABLE} s SEMI JOIN ({_LIVE}) l ON l.series_id = s.series_id
"""

# NAMES_SQL's combos (labels -> node of the latest sample) from the series, not every row.
SERIES_NAMES_SQL = NAMES_SQL.replace(
    "    FROM gpu_samples\n    WHERE ts >= $lo AND ts < $hi\n",
    f"    FROM {SERIES_TABLE} JOIN ({_LIVE.replace('max(ts) AS last', 'max(ts) AS ts')}) l "
    "USING (series_id)\n",
)
if SERIES_NAMES_SQL == NAMES_SQL:  # pragma: no cover - a guard on NAMES_SQL's text
    raise RuntimeError("NAMES_SQL changed shape: rewrite SERIES_NAMES_SQL")

_LAYOUT_SQL = (
    "SELECT count(*) AS n FROM duckdb_tables() WHERE table_name IN ($v, $s) AND schema_name = 'main' "
    "AND database_name = current_database()"
)


def has_series_layout(wh: ReadableWarehouse) -> bool:
    """Whether the catalog stores samples as series and values (v008) rather than one table."""
    found = wh.query(_LAYOUT_SQL, {"v": VALUES_TABLE, "s": SERIES_TABLE})
    return int(found["n"][0]) == 2


def read(
    wh: ReadableWarehouse, lo: datetime, hi: datetime
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """`values` (sid, t, gr, util, fb), `series` (sid, dev, hold) and `names` of `[lo, hi)`."""
    span = {"lo": lo, "hi": hi}
    if not has_series_layout(wh):
        raw = wh.query(READ_SQL, span)
        series = raw.select("dev", "hold").unique().with_row_index("sid").with_columns(
            pl.col("sid").cast(pl.Int32)
        )
        values = raw.join(series, on=["dev", "hold"], how="left", nulls_equal=True, maintain_order="left")
        return values.select("sid", "t", "gr", "util", "fb"), series, wh.query(NAMES_SQL, span)
    return wh.query(VALUES_SQL, span), wh.query(SERIES_SQL, span), wh.query(SERIES_NAMES_SQL, span)
