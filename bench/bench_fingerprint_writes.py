"""What keeping the samples' fingerprints costs a load (decision 0274): `collect --follow`'s
one-minute loads of GPU and token samples, with the fingerprints kept (`kept_current`) and
without (the load as before v18), alternating minute by minute in one process on one copy of a
warehouse, so both see the same file and the same machine.

    python -m bench.bench_fingerprint_writes WAREHOUSE [--minutes 30] [--name NAME]

WAREHOUSE: a month's warehouse (`bench_scale --build-only` makes the demo's at any size); a
copy of it is migrated to today's schema first. Each minute of the month's last `--minutes`
is read back and loaded again, so the stored rows stay the same: the fingerprints must equal
their rebuild at the end (checked), and the file's size before and after is recorded (the
fingerprints' rows are rewritten by every load; DuckDB reclaims the old ones at checkpoints).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from contextlib import nullcontext
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.common import load_average, write_result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("warehouse", type=Path)
    parser.add_argument("--minutes", type=int, default=30)
    parser.add_argument("--name", default="fingerprint_writes")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        copy = Path(work) / "w.duckdb"
        shutil.copyfile(args.warehouse, copy)
        write_result(args.name, {"warehouse": str(args.warehouse), **measure(copy, args.minutes)})


def measure(path: Path, minutes: int) -> dict[str, Any]:
    from gpuledger.core.window import Window, as_utc
    from gpuledger.warehouse import LoadBatch, Warehouse, store
    from gpuledger.warehouse.sample_fingerprints import SAMPLES, TOKENS, rebuild

    started = time.perf_counter()
    Warehouse.open(path).close()  # migrated (v18 fills the fingerprints)
    migrate_s = round(time.perf_counter() - started, 2)
    kept_current = store.kept_current
    times: dict[str, list[float]] = {"kept": [], "without": []}
    load_before = load_average()
    with Warehouse.open(path) as wh:
        bytes_before = path.stat().st_size
        last = as_utc(wh.scalar("SELECT max(ts) FROM gpu_sample_values"))
        first = last.replace(second=0, microsecond=0) - timedelta(minutes=minutes - 1)
        for n in range(minutes):
            window = Window(first + timedelta(minutes=n), first + timedelta(minutes=n + 1))
            frames = {table: wh.query(f"SELECT * FROM {table} WHERE ts >= ? AND ts < ?",
                                      [window.start, window.end])
                      for table in ("gpu_samples", "token_samples")}
            way = ("kept", "without")[n % 2]
            store.kept_current = kept_current if way == "kept" else (lambda *_: nullcontext())  # type: ignore[assignment]
            started = time.perf_counter()
            wh.load(LoadBatch(frames, window=window))
            times[way].append(time.perf_counter() - started)
        store.kept_current = kept_current
        kinds = (SAMPLES, TOKENS)
        rows = {kind.table: wh.query(f"SELECT * FROM {kind.table} ORDER BY ALL") for kind in kinds}
        for kind in kinds:
            rebuild(wh.con, kind)
            assert wh.query(f"SELECT * FROM {kind.table} ORDER BY ALL").equals(rows[kind.table]), kind.table
        gpu_rows = wh.count("gpu_samples")
    return {
        "command": "Warehouse.load of one minute's GPU and token samples, reloaded",
        "migrate_s": migrate_s, "minutes": minutes, "samples_rows": gpu_rows,
        "fingerprint_rows": {table: frame.height for table, frame in rows.items()},
        "load_s_median": {way: round(statistics.median(t), 4) for way, t in times.items()},
        "load_s_max": {way: round(max(t), 4) for way, t in times.items()},
        "file_mib": {"before": round(bytes_before / 2**20, 1),
                     "after": round(path.stat().st_size / 2**20, 1)},
        "load_average_before_after": [load_before, load_average()],
        "note": "alternating minute by minute in one process: even minutes with the fingerprints "
                "kept, odd ones without (the load before v18); the fingerprints equal their rebuild after",
    }


if __name__ == "__main__":
    main()
