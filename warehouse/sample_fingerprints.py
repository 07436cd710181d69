"""The stored samples' and roll-ups' fingerprints per UTC day, kept by every write (v018,
decision 0274; the roll-ups and the other tables the serving store keeps per day since v019,
decision 0289).

Why: a reader that keeps what a query gave for a day (`warehouse.day_parts`) must know whether
the day's inputs changed since. It used to hash the inputs themselves each time: the count and
the sum of row hashes of every GPU and token sample of the month, on every hourly
`refresh-serving` (91 M rows at 1,000 GPUs, about 1.5 s, and ten times that at 10,000), to
learn that only the running day moved. A sum of row hashes is additive, so the writer keeps it
instead, in the same transaction as the rows: every statement that replaces or removes a time
range of a fingerprinted table runs inside `kept_current`, which subtracts the range's sums
before and adds them after. The cost is the written range's rows, not the day's or the month's.

The serving store's publish had the same need for the tables it keeps per UTC day
(`warehouse.serving_day_parts`: the hourly and daily roll-ups, the allocations, the queue
samples): it hashed every row of each, of every month the warehouse holds, on every publish
(a 10,000-GPU month's 14 M hourly rows and the rest: 0.57 s quietly, 2-4 s inside a refresh,
and three times that with three months kept); their writers keep the same sums now
(`ROLLUPS`), so a publish reads a few rows a day.

Rules:
1. A fingerprint is of the content, not a record of the writes: the row count and the sum of
   the row hashes (`Fingerprinted.row_hash`) of the stored rows of a day (and, for the GPU
   samples, a series: the pods a day's samples name are read from them), so loading the same
   rows again leaves it as it was, and it always equals what `Fingerprinted.of` computes from
   the rows (the tests hold every writer to that: a load, a late load, a reload, compaction,
   migration). A key whose count reaches 0 loses its row.
2. Every writer of a fingerprinted table goes through `kept_current` (the load around each
   table's write, `daily_rollup.refresh_days` around the days it rewrites, `retention.compact`
   around its delete); a migration that rewrites the rows calls `rebuild`.
3. A row hash names every stored column, never the row as a whole: a column added by a later
   migration must not change the hash of rows summed before it (that migration rebuilds).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

import duckdb

from gpuledger.core.frames import (
    ALLOCATIONS,
    CARD_HOURS_DAILY,
    CARD_HOURS_HOURLY,
    METRIC_COLUMNS,
    QUEUE_SAMPLES,
    TOKEN_SAMPLES,
)
from gpuledger.warehouse.sample_layout import VALUES_TABLE
from gpuledger.warehouse.utc_sql import DAY_US, utc_unit_number

_DAY_OF_TS = f"DATE '1970-01-01' + CAST({utc_unit_number('ts', DAY_US)} AS INTEGER)"
"""A row's UTC day as a DATE, by integer division (`warehouse.utc_sql`)."""
_RANGE = "ts >= $start AND ts < $end"


@dataclass(frozen=True)
class Fingerprinted:
    """A stored table (`source`, with a `ts`) whose rows are fingerprinted per UTC day and
    `keys` in `table`, hashing `columns` (rule 3)."""

    source: str
    table: str
    columns: tuple[str, ...]
    keys: tuple[str, ...] = ()

    @property
    def row_hash(self) -> str:
        return f"hash({', '.join(self.columns)})"

    @property
    def ddl(self) -> str:
        keys = "".join(f"  {key} INTEGER NOT NULL,\n" for key in self.keys)
        return (f"CREATE TABLE IF NOT EXISTS {self.table} (\n  day DATE NOT NULL,\n{keys}"
                "  sample_rows BIGINT NOT NULL,\n  row_hashes HUGEINT NOT NULL\n)")

    def of(self, where: str = "TRUE", sign: str = "") -> str:
        """SQL: the fingerprints (rule 1) computed from the stored rows matching `where`
        (`sign` "-": negated, to be subtracted)."""
        keys = "".join(f"{key}, " for key in self.keys)
        return (f"SELECT {_DAY_OF_TS} AS day, {keys}{sign}count(*) AS sample_rows, "
                f"{sign}CAST(sum({self.row_hash}) AS HUGEINT) AS row_hashes FROM {self.source} "
                f"WHERE {where} GROUP BY ALL")


SAMPLES = Fingerprinted(VALUES_TABLE, "gpu_sample_fingerprints",
                        ("ts", "series_id", *METRIC_COLUMNS), ("series_id",))
"""The GPU samples' values, per day and series (`warehouse.sample_layout`)."""
TOKENS = Fingerprinted("token_samples", "token_sample_fingerprints", TOKEN_SAMPLES.column_names)
"""The vLLM token samples, per day."""
ROLLUPS = tuple(Fingerprinted(spec.name, f"{spec.name}_fingerprints", spec.column_names)
                for spec in (CARD_HOURS_HOURLY, CARD_HOURS_DAILY, ALLOCATIONS, QUEUE_SAMPLES))
"""The tables the serving store keeps per UTC day (`warehouse.serving_day_parts.PARTITIONED`),
per day: the hourly roll-up and the allocations (each roll-up load's window), the daily
roll-up (the days that load touches, `warehouse.daily_rollup.refresh_days`), the queue samples
(their loads)."""
ALL = (SAMPLES, TOKENS, *ROLLUPS)
BY_SOURCE = {f.source: f for f in ALL}
_DELTA = "sample_fingerprint_delta"
_MERGED = "sample_fingerprint_merged"


@contextmanager
def kept_current(con: duckdb.DuckDBPyConnection, kind: Fingerprinted, start: datetime,
                 end: datetime) -> Iterator[None]:
    """Around the statements that replace or remove `kind`'s rows of `[start, end)` (inside
    the caller's transaction: a failure in between stores neither): the range's fingerprints
    before are subtracted and after added, and each touched key rewritten once."""
    window = {"start": start, "end": end}
    con.execute(f"CREATE OR REPLACE TEMP TABLE {_DELTA} AS {kind.of(_RANGE, '-')}", window)
    yield
    con.execute(f"INSERT INTO {_DELTA} {kind.of(_RANGE)}", window)
    last = end - timedelta(microseconds=1)
    days = {"lo": start.astimezone(UTC).date(), "hi": last.astimezone(UTC).date()}  # the range's UTC days
    key = f"({', '.join(('day', *kind.keys))})"
    touched = f"FROM {kind.table} WHERE day BETWEEN $lo AND $hi AND {key} IN (SELECT {key} FROM {_DELTA})"
    con.execute(f"CREATE OR REPLACE TEMP TABLE {_MERGED} AS SELECT {key[1:-1]}, sum(sample_rows) "
                f"AS sample_rows, sum(row_hashes) AS row_hashes FROM (SELECT * FROM {_DELTA} UNION ALL "
                f"SELECT * {touched}) GROUP BY ALL", days)
    con.execute(f"DELETE {touched}", days)
    con.execute(f"INSERT INTO {kind.table} SELECT * FROM {_MERGED} WHERE sample_rows > 0")
    con.execute(f"DROP TABLE {_MERGED}; DROP TABLE {_DELTA}")


def rebuild(con: duckdb.DuckDBPyConnection, kind: Fingerprinted, since: date | None = None) -> None:
    """`kind`'s fingerprints computed again from the stored rows (what migration v18 filled
    the tables with), of every day or of the UTC days from `since` on: for a writer that
    rewrites the rows wholesale, outside `kept_current`."""
    days = {"since": since or date.min}
    con.execute(f"DELETE FROM {kind.table} WHERE day >= $since", days)
    con.execute(f"INSERT INTO {kind.table} {kind.of(f'{_DAY_OF_TS} >= $since')}", days)
