"""How a warehouse table is declared: its columns with DuckDB types, its key and its load kind.

The declarations themselves live in `core.frames` (telemetry and inventory) and
`core.frames_ledger` (plans, audit, watermarks, report issues); this module holds only the
machinery, so every table module can use it without importing the others. The DDL a
declaration stands for is written by the warehouse (`warehouse.schema.table_ddl`): only
`warehouse/` speaks SQL.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

LoadKind = Literal["timeseries", "interval", "dimension", "append"]
MergeRule = Literal["replace", "earliest", "latest"]
WHOLE_GPU = -1
"""`gpu_i_id` of a sample or allocation that concerns the whole card."""


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: str
    nullable: bool = True
    doc: str = ""
    merge: MergeRule = "replace"  # how a dimension load combines new and stored values


@dataclass(frozen=True, slots=True)
class TableSpec:
    name: str
    kind: LoadKind
    columns: tuple[Column, ...]
    key: tuple[str, ...] = ()
    doc: str = ""

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)


def col(name: str, type_: str, nullable: bool = True, doc: str = "", merge: MergeRule = "replace") -> Column:
    return Column(name, type_, nullable, doc, merge)


TS = "TIMESTAMPTZ"


_POLARS_TYPES = {
    "VARCHAR": "String", "INTEGER": "Int32", "BIGINT": "Int64", "DOUBLE": "Float64",
    "DATE": "Date", "JSON": "String",
}


def polars_schema(spec: TableSpec) -> dict[str, Any]:
    """The Polars schema of a table's frame (JSON columns travel as strings)."""
    import polars as pl

    out: dict[str, Any] = {}
    for col in spec.columns:
        if col.type == TS:
            out[col.name] = pl.Datetime("us", "UTC")
        else:
            out[col.name] = getattr(pl, _POLARS_TYPES[col.type])
    return out
