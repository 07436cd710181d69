"""The serving store's `serving_results` table: the month results a writer stores, with their rules.

Why apart from `warehouse.serving_store`: that module publishes the store's tables; this one
is the one table the publisher's caller writes itself (`Publication.put_result`, docs/decisions
0121) and the pages read back. Each result records the rules it was computed under
(`core.rules_record`, docs/decisions/0150) in `rules` (the fingerprint, for a person reading
the file) and `rules_json` (the record a reader compares and prints). A store published before
results recorded their rules gains the two columns in place at its next publish
(`ensure_table`); until then its results read as "rules not recorded".
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from gpuledger.core.rules_record import RecordedRules
from gpuledger.warehouse.keyed_rows import replace_row
from gpuledger.warehouse.store import Warehouse

RESULTS_TABLE = "serving_results"


@dataclass(frozen=True)
class StoredResult:
    """One stored result and the rules it was computed under (None: not recorded)."""

    payload: bytes
    rules: RecordedRules | None


def ensure_table(con: duckdb.DuckDBPyConnection, catalog: str) -> None:
    """Create the table in `catalog` (the store being published), or add the rules' columns."""
    con.execute(f"CREATE TABLE IF NOT EXISTS {catalog}.{RESULTS_TABLE} (name VARCHAR, period VARCHAR, "
                "basis VARCHAR, payload BLOB, rules VARCHAR, rules_json VARCHAR, PRIMARY KEY (name, period))")
    for column in ("rules", "rules_json"):
        con.execute(f"ALTER TABLE {catalog}.{RESULTS_TABLE} ADD COLUMN IF NOT EXISTS {column} VARCHAR")


def stored_basis(con: duckdb.DuckDBPyConnection, catalog: str) -> dict[tuple[str, str], str]:
    """(name, period) → basis of every result in the store (what `put` stored)."""
    rows = con.execute(f"SELECT name, period, basis FROM {catalog}.{RESULTS_TABLE}").fetchall()
    return {(str(n), str(p)): str(b) for n, p, b in rows}


def put(con: duckdb.DuckDBPyConnection, catalog: str, name: str, period: str, *, basis: str,
        payload: bytes, rules: RecordedRules | None) -> None:
    """Store (or replace, `keyed_rows`) one result with the rules it was computed under (None:
    not recorded)."""
    fingerprint, text = (rules.fingerprint, rules.to_json()) if rules is not None else (None, None)
    replace_row(con, f"{catalog}.{RESULTS_TABLE}", {"name": name, "period": period},
                {"basis": basis, "rules": fingerprint, "rules_json": text, "payload": payload})


def stored_result(wh: Warehouse, name: str, period: str, *, payload: bool = True) -> StoredResult | None:
    """A stored result, or None (not computed, or not a serving store); `payload=False` reads
    only its rules (the payload comes back empty)."""
    where = f"FROM {RESULTS_TABLE} WHERE name = ? AND period = ?"
    body = "payload" if payload else "''"
    try:
        try:
            rows = wh.con.execute(f"SELECT {body}, rules_json {where}", [name, period]).fetchall()
        except duckdb.BinderException:  # a store from before results recorded their rules
            rows = wh.con.execute(f"SELECT {body}, NULL {where}", [name, period]).fetchall()
    except duckdb.CatalogException:
        return None
    if not rows:
        return None
    data, rules = rows[0]
    return StoredResult(bytes(data) if payload else b"", RecordedRules.from_json(rules))
