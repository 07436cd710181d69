"""The embedded engine of the org bill: DuckDB over the lake's Parquet files.

DuckDB scans the files through a pyarrow dataset on the lake's own file system (local or S3,
pyarrow's native object store), so one code path serves both, no DuckDB extension has to be
downloaded, and only the columns the query names are read.
"""

from __future__ import annotations

from typing import Any

from gpuledger.warehouse.lake.location import Lake
from gpuledger.warehouse.lake.org_sql import DETAIL_VIEW


def run_grouped(lake: Lake, files: list[str], sql: str) -> Any:
    """Run `sql` over the detail `files`; a Polars frame (sums as decimals)."""
    import polars as pl
    import pyarrow.dataset as ds

    from gpuledger.warehouse.connection import connect

    dataset = ds.dataset(files, filesystem=lake.filesystem(), format="parquet")
    con = connect(":memory:")  # bounded like every connection (docs/decisions/0221)
    try:
        con.register(DETAIL_VIEW, dataset)
        table = con.sql(sql).to_arrow_table()
    finally:
        con.close()
    return pl.from_arrow(table)
