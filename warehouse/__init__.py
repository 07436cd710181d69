"""The one DuckDB writer and the only code that speaks SQL: frozen schema migrations, idempotent
transactional loads, named read queries, exports.

May import only `gpuledger.core` (and duckdb, polars, pyarrow).
"""

from gpuledger.warehouse.store import LoadBatch, LoadStats, Warehouse, prepare

__all__ = ["LoadBatch", "LoadStats", "Warehouse", "prepare"]
