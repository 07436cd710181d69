"""Replacing a keyed BLOB row (decision 0270): DuckDB's `INSERT OR REPLACE` against
`warehouse.keyed_rows.replace_row` (a DELETE and an INSERT in one transaction), side by side
in one run, on a parts table shaped as a 1,000-GPU month's day parts: 31 days of 2 MB serving
minutes, three small parts a day, and one 8 MB part of allocation statistics (random bytes:
the parts are zstd output). Each round replaces what an hourly refresh replaces (the running
day's four parts and the statistics); then the month is read back and the file closed.

    python -m bench.bench_keyed_rows [--rounds 5] [--scale 1]

`--scale 10`: the sizes of a 10,000-GPU month.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import duckdb

from bench.common import load_average, write_result
from gpuledger.warehouse.keyed_rows import replace_row

DDL = "CREATE TABLE parts (name VARCHAR, day DATE, stamp VARCHAR, payload BLOB, PRIMARY KEY (name, day))"
MONTH = [date(2026, 10, 1) + timedelta(days=n) for n in range(31)]


def _parts(scale: int) -> list[tuple[str, date, bytes]]:
    big, day, small = os.urandom(8 * 2**20 * scale), os.urandom(2 * 2**20 * scale), os.urandom(25_000 * scale)
    rows = [("allocation_stats", MONTH[0], big)]
    for d in MONTH:
        rows += [("serving_minutes", d, day), ("token_pieces", d, small), ("node_activity", d, small),
                 ("shared_levels", d, small)]
    return rows


def _one(how: str, rows: list[tuple[str, date, bytes]], rounds: int, file: Path) -> dict[str, Any]:
    con = duckdb.connect(str(file))
    con.execute(DDL)
    con.executemany("INSERT INTO parts VALUES (?, ?, 'v0', ?)", rows)
    con.execute("CHECKPOINT")
    hourly = [r for r in rows if r[0] == "allocation_stats" or r[1] == MONTH[-1]]
    started = time.perf_counter()
    for n in range(1, rounds + 1):
        for name, day, payload in hourly:
            if how == "insert_or_replace":
                con.execute("INSERT OR REPLACE INTO parts VALUES (?, ?, ?, ?)", [name, day, f"v{n}", payload])
            else:
                replace_row(con, "parts", {"name": name, "day": day}, {"stamp": f"v{n}", "payload": payload})
    replaced = time.perf_counter() - started
    started = time.perf_counter()
    month = con.execute("SELECT day, payload FROM parts WHERE name = 'serving_minutes'").fetchall()
    read = time.perf_counter() - started
    started = time.perf_counter()
    con.close()
    closed = time.perf_counter() - started
    assert len(month) == len(MONTH)
    return {"replace_s_per_round": round(replaced / rounds, 4), "read_month_s": round(read, 4),
            "close_s": round(closed, 4), "rows_replaced_per_round": len(hourly)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--scale", type=int, default=1)
    parser.add_argument("--name", default="keyed_rows")
    args = parser.parse_args()
    rows = _parts(args.scale)
    loads = {"before": load_average()}
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for how in ("insert_or_replace", "replace_row", "insert_or_replace again", "replace_row again"):
            out[how] = _one(how.split()[0], rows, args.rounds, Path(tmp) / f"{how.replace(' ', '_')}.duckdb")
            loads[f"after {how}"] = load_average()
    write_result(args.name, {"rounds": args.rounds, "scale": args.scale, "runs": out,
                             "load_average_1_5_15": loads})


if __name__ == "__main__":
    main()
