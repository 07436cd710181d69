"""Read queries of HAMi's allocations (`vgpu_allocations`, `core.frames_hami`).

Why here: only `warehouse/` speaks SQL. Which samples a HAMi holder holds
(`analytics.sampling.holders`) and what share it pays (`analytics.devices.vgpu`) are analytics
rules; they read the allocations only through this. Windows are half-open `[start, end)`.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

    from gpuledger.warehouse.protocols import ReadableWarehouse


def vgpu_allocations_between(wh: ReadableWarehouse, start: datetime, end: datetime) -> pl.DataFrame:
    """HAMi allocations alive in `[start, end)` from every source: `uuid`, `namespace`, `pod`,
    `container_index`, `source`, `mem_mib`, `cores_pct`, `card_mem_mib`, `start_ts`, `end_ts`."""
    return wh.query(
        "SELECT uuid, namespace, pod, container_index, source, mem_mib, cores_pct, card_mem_mib, "
        "start_ts, end_ts FROM vgpu_allocations WHERE end_ts > ? AND start_ts < ? "
        "ORDER BY uuid, namespace, pod, start_ts",
        [start, end],
    )
