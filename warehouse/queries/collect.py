"""Read queries of collection (`gpuledger.collect_pipeline`): the stored rows a new chunk's
dimension rows are merged with.

Why here: only `warehouse/` speaks SQL. The merge rule (new non-null values win) is the
pipeline's; it reads what is stored only through this.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuledger.core.frames import TABLES

if TYPE_CHECKING:
    import polars as pl

    from gpuledger.warehouse.protocols import ReadableWarehouse


def dimension_rows(wh: ReadableWarehouse, table: str) -> pl.DataFrame:
    """Every stored row of the dimension table `table` (one `core.frames.TABLES` declares), its
    declared columns in declared order."""
    spec = TABLES.get(table)
    if spec is None or spec.kind != "dimension":
        raise ValueError(f"dimension_rows: {table!r} is not a declared dimension table")
    return wh.query(f"SELECT {', '.join(spec.column_names)} FROM {spec.name}")
