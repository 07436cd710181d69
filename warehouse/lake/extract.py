"""What a partition copies from a cluster's warehouse besides the bill: the hourly card-hours
and allocations of the period, and the inventory (cards, nodes) as it stands.

Rows are sorted by each table's key so the same warehouse gives the same Parquet bytes, which
is what makes re-publishing recognisably a no-op.
"""

from __future__ import annotations

from typing import Any

from gpuledger.core.frames import TABLES
from gpuledger.core.window import Window
from gpuledger.warehouse.store import Warehouse

PERIOD_TABLES: tuple[str, ...] = ("card_hours_hourly", "allocations")
INVENTORY_TABLES: tuple[str, ...] = ("gpus", "nodes")


def partition_tables(wh: Warehouse, window: Window, cluster: str) -> dict[str, Any]:
    """Polars frames of the copied tables, each with a leading `cluster` column."""
    out: dict[str, Any] = {}
    for name in (*PERIOD_TABLES, *INVENTORY_TABLES):
        spec = TABLES[name]
        order = ", ".join(f"{k} NULLS FIRST" for k in spec.key)
        where, params = "", []
        if name in PERIOD_TABLES:
            where, params = " WHERE ts >= ? AND ts < ?", [window.start, window.end]
        sql = f"SELECT ? AS cluster, * FROM {name}{where} ORDER BY {order}"
        out[name] = wh.query(sql, [cluster, *params])
    return out
