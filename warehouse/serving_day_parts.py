"""The serving store's growing tables kept per UTC day (decision 0266; `warehouse.serving_store`,
point 2): each day of each table with a fingerprint (row count and the sum of row hashes, as the
day parts' stamps take them: `warehouse.queries.advice`), so a publish rewrites only the days
whose fingerprint changed: an hourly refresh, the running day. Not the XOR of the hashes, which
the month parts used: two equal rows cancel there, so a day whose pair of equal rows became
another pair kept its fingerprint.

The tables that do not grow by day are kept whole the same way: one fingerprint each, copied
only when it changed (`update_whole`).

Apart from the store's publication because it is one rule with its own table: which days of a
table the store holds as the warehouse does, proven by the fingerprints whatever wrote them (a
late sample, a re-rolled hour, a migration), not by a record of the writes. The fingerprints of
the partitioned tables are the ones their writers keep (`day_fingerprints`, decision 0289):
fingerprints of the content all the same, held to the rows by the tests of every writer.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import duckdb

from gpuledger.warehouse.sample_fingerprints import BY_SOURCE, Fingerprinted

PARTITIONED: dict[str, str] = {"card_hours_hourly": "ts", "card_hours_daily": "ts", "allocations": "ts",
                               "queue_samples": "ts"}
"""Tables kept per UTC day (their time column, `ts` in each: the day their fingerprints take,
`day_fingerprints`): the ones that grow with the fleet's history."""
PARTS_TABLE = "serving_day_parts"
"""Each partitioned table's days in the store and their fingerprints. A store published with the
month parts before (`serving_parts`) loses that table as a stale one and copies each partitioned
table whole once."""
WHOLE = date(1, 1, 1)
"""The `day` under which a table kept whole (`update_whole`) has its one fingerprint."""


def ensure_parts_table(con: duckdb.DuckDBPyConnection, srv: str) -> None:
    con.execute(f"CREATE TABLE IF NOT EXISTS {srv}.{PARTS_TABLE} (tbl VARCHAR, day DATE, "
                "fingerprint VARCHAR, PRIMARY KEY (tbl, day))")


def columns_of(con: duckdb.DuckDBPyConnection, catalog: str, table: str) -> list[tuple[str, str]]:
    """`table`'s (column, type) pairs in `catalog`, in order (none: no such table)."""
    rows = con.execute(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_catalog = ? "
        "AND table_schema = 'main' AND table_name = ? ORDER BY ordinal_position", [catalog, table]
    ).fetchall()
    return [(str(n), str(t)) for n, t in rows]


def update_partitioned(
    con: duckdb.DuckDBPyConnection, catalog: str, table: str, col: str, srv: str,
) -> tuple[int, int]:
    """Point 2: rewrite the UTC days whose fingerprint changed, a run of consecutive days in one
    delete and one insert; (rewritten, kept) days. A table new to the store, whose schema
    changed, or without day fingerprints yet is copied whole in one statement."""
    columns = columns_of(con, catalog, table)
    src = f'"{catalog}".main."{table}"'
    now = day_fingerprints(con, catalog, table, [n for n, _ in columns])
    parts = f"{srv}.{PARTS_TABLE}"
    stored = dict(con.execute(f"SELECT day, fingerprint FROM {parts} WHERE tbl = ?", [table]).fetchall())
    if not stored or columns_of(con, srv, table) != columns:  # new, or its schema or parts changed
        con.execute(f'CREATE OR REPLACE TABLE {srv}."{table}" AS SELECT * FROM {src}')
        con.execute(f"DELETE FROM {parts} WHERE tbl = ?", [table])
        _put_parts(con, parts, table, now)
        return len(now), 0
    changed = sorted(d for d in set(now) | set(stored) if now.get(d) != stored.get(d))
    for lo, hi in _runs(changed):
        bounds = [_day_start(lo), _day_start(hi)]
        con.execute(f'DELETE FROM {srv}."{table}" WHERE {col} >= ? AND {col} < ?', bounds)
        con.execute(f'INSERT INTO {srv}."{table}" SELECT * FROM {src} WHERE {col} >= ? AND {col} < ?', bounds)
    con.execute(f"DELETE FROM {parts} WHERE tbl = ? AND list_contains(?::DATE[], day)", [table, changed])
    _put_parts(con, parts, table, {d: now[d] for d in changed if d in now})
    return len(changed), len(now) - len([d for d in changed if d in now])


def day_fingerprints(con: duckdb.DuckDBPyConnection, catalog: str, table: str,
                     columns: list[str]) -> dict[date, str]:
    """`table`'s fingerprint per UTC day of `ts` ("rows:sum of row hashes" of its `columns`, the
    rule of `warehouse.sample_fingerprints.Fingerprinted`): read from the ones its writers keep
    (v019, decision 0289) where the catalog has them for these very columns; else computed from
    every row by the same rule (a catalog not migrated yet: for the four tables of a 10,000-GPU
    month 0.57 s quietly, 2-4 s inside a refresh, and every month the warehouse holds is hashed
    again each publish)."""
    kind = BY_SOURCE.get(table)
    if kind is not None and kind.columns == tuple(columns) and columns_of(con, catalog, kind.table):
        sql = f'SELECT day, sample_rows, row_hashes FROM "{catalog}".main."{kind.table}"'
    else:
        rows = Fingerprinted(f'"{catalog}".main."{table}"', f"{table}_fingerprints",
                             tuple(f'"{c}"' for c in columns))
        sql = rows.of()
    return {day: f"{n}:{h}" for day, n, h in con.execute(sql).fetchall()}


def update_whole(con: duckdb.DuckDBPyConnection, catalog: str, table: str, srv: str) -> bool:
    """A table that does not grow by day (pods, series, preemptions): copied whole, but only when
    its fingerprint (one, under `WHOLE`) or its schema changed; whether it was. At 1,000 GPUs
    the fingerprints of such tables cost 0.09 s where copying the unchanged ones cost 0.35 s."""
    columns = columns_of(con, catalog, table)
    src = f'"{catalog}".main."{table}"'
    names = ", ".join(f'"{n}"' for n, _ in columns)
    count, total = con.execute(f"SELECT count(*), sum(hash({names})) FROM {src}").fetchall()[0]
    now, parts = f"{count}:{total}", f"{srv}.{PARTS_TABLE}"
    stored = con.execute(f"SELECT fingerprint FROM {parts} WHERE tbl = ? AND day = ?",
                         [table, WHOLE]).fetchall()
    if stored == [(now,)] and columns_of(con, srv, table) == columns:
        return False
    con.execute(f'CREATE OR REPLACE TABLE {srv}."{table}" AS SELECT * FROM {src}')
    con.execute(f"DELETE FROM {parts} WHERE tbl = ?", [table])
    _put_parts(con, parts, table, {WHOLE: now})
    return True


def _put_parts(con: duckdb.DuckDBPyConnection, parts: str, table: str, days: dict[date, str]) -> None:
    """Record `days`' fingerprints of `table`, in one statement (none is a no-op)."""
    con.execute(f"INSERT INTO {parts} SELECT ?, unnest(?::DATE[]), unnest(?::VARCHAR[])",
                [table, list(days), list(days.values())])



def _day_start(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def _runs(days: list[date]) -> list[tuple[date, date]]:
    """Sorted `days` as half-open runs of consecutive days: [lo, hi)."""
    runs: list[tuple[date, date]] = []
    for day in days:
        if runs and runs[-1][1] == day:
            runs[-1] = (runs[-1][0], day + timedelta(days=1))
        else:
            runs.append((day, day + timedelta(days=1)))
    return runs
