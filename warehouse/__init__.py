"""The one DuckDB writer: schema migrations, idempotent transactional loads, exports."""

from gpuledger.warehouse.store import LoadBatch, LoadStats, Warehouse

__all__ = ["LoadBatch", "LoadStats", "Warehouse"]
