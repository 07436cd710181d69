"""Step 1 of the sampling model read by series: integer values rows, labels once per series.

`analytics.sampling.steps.READ_SQL` reads through the `gpu_samples` view, so DuckDB joins every
sample row to its series and hashes four label strings (device) and two (holder) per row, and
`NAMES_SQL` groups every row by six label strings again: about 0.5 CPU-seconds of a 1,000-GPU
day's roll-up, as much as the floor's whole `GROUP BY` (decision 0144). Since v008 (decision
0128) the labels are stored once per series (`gpu_series`) and each sample row holds only `ts`,
an INTEGER `series_id` and the values (`gpu_sample_values`), so this module reads:

- `values`: `sid`, `t` (microseconds) and the three readings of every row in the read window,
  straight from the values table (no join, no strings);
- `series`: per series seen in the window, its device and holder hashes: the same expressions
  as `READ_SQL` (so step 2's "holder kept" picks the same holder of two at one time);
- `names`: `NAMES_SQL`'s frame (labels per device and holder, the node of the latest sample),
  grouped from the window's series and each series' latest sample time, not from every row.

Where a catalog has no values table (a `gpu_samples` table of its own, as before v008) the
reader falls back to the view's SQL. Reading `ts` is in one place (`_T`), so a change of how the
values table stores time (warehouse.sample_layout) changes one expression here.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from gpuledger.analytics.sampling.steps import DEVICE_KEY_SQL, HOLDER_KEY_SQL, NAMES_SQL, READ_SQL
from gpuledger.core.activity import reading_sql
from gpuledger.warehouse.sample_layout import SERIES_TABLE, VALUES_TABLE

_T = "epoch_us(ts)"
_WINDOW = "ts >= $lo AND ts < $hi"

VALUES_SQL = f"""
SELECT series_id AS sid, {_T} AS t,
    {reading_sql("gr_engine_active")} AS gr, {reading_sql("gpu_util")} AS util,
    {reading_sql("fb_used_mib")} AS fb
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
    raise RuntimeError("analytics.sampling.steps.NAMES_SQL changed shape: rewrite SERIES_NAMES_SQL")


def has_series_layout(wh: Any) -> bool:
    """Whether the catalog stores samples as series and values (v008) rather than one table."""
    found = wh.query(
        "SELECT count(*) AS n FROM duckdb_tables() WHERE table_name IN ($v, $s) AND schema_name = 'main' "
        "AND database_name = current_database()",
        {"v": VALUES_TABLE, "s": SERIES_TABLE},
    )
    return int(found["n"][0]) == 2


def read(wh: Any, window: dict[str, Any]) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """`values` (sid, t, gr, util, fb), `series` (sid, dev, hold), `names` of the read window."""
    if not has_series_layout(wh):
        raw = wh.query(READ_SQL, window)
        series = raw.select("dev", "hold").unique().with_row_index("sid").with_columns(
            pl.col("sid").cast(pl.Int32)
        )
        values = raw.join(series, on=["dev", "hold"], how="left", nulls_equal=True, maintain_order="left")
        return values.select("sid", "t", "gr", "util", "fb"), series, wh.query(NAMES_SQL, window)
    return wh.query(VALUES_SQL, window), wh.query(SERIES_SQL, window), wh.query(SERIES_NAMES_SQL, window)
