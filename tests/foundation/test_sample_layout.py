"""Raw GPU samples stored as a series dimension and integer-keyed values (v8, decision 0128).

Cases:
- what a load stores reads back through the `gpu_samples` view exactly as the frame held it
  (labels with NULLs included), compared with the frame itself, not with the layout's code;
- one label tuple is one series: re-loading a window adds no series and leaves the same rows;
  a later window reuses the stored series and numbers only the new ones after the largest id;
- rows are stored ordered (hour, series, ts) whatever order the frame had;
- a v7 file (every step up to 7 applied from its frozen text, rows in `gpu_samples`) migrates
  to v8 keeping every row, and a load after the migration continues its series;
- compaction removes the values of old hours and the series no kept sample refers to.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from gpuledger.core.frames import GPU_SAMPLES, METRIC_COLUMNS
from gpuledger.core.window import Window
from gpuledger.warehouse import LoadBatch, Warehouse, schema
from tests.foundation.released_files import released_file

T0 = datetime(2026, 11, 1, tzinfo=UTC)
HOURS2 = Window(T0, T0 + timedelta(hours=2))
COLS = GPU_SAMPLES.column_names
LABELS = [
    ("n1", "GPU-1", -1, None, None, "ml", "train-0", "main"),
    ("n1", "GPU-4", -1, None, None, None, None, None),          # a card, unattributed
    ("n1", "GPU-2", 3, "3g.40gb", None, "ml", "infer", "srv"),
    ("n2", "GPU-3", -1, None, "1", "web", "w-0", None),         # a time-slice replica
]


def frame(minutes: int, labels: list[tuple[Any, ...]], start: datetime = T0) -> pl.DataFrame:
    """One row per label tuple per minute; values differ by row so a mix-up shows."""
    rows = []
    for m in range(minutes):
        for i, label in enumerate(labels):
            value = round(0.001 * (m + 1) + 0.1 * i, 6)
            metrics = [value] * len(METRIC_COLUMNS)
            for c, step in ((1, 100), (5, 10), (6, 100), (7, 100)):  # stored at 0.01 / 0.1 (0143)
                metrics[c] = (m + 1 + 1000 * i) / step  # on the step: stored exactly
            metrics[2] = None if i == 1 else float(m)  # gpu_util NULL for one series
            rows.append((start + timedelta(minutes=m), *label, *metrics))
    return pl.DataFrame(rows, schema=list(COLS), orient="row").cast(
        {"gpu_i_id": pl.Int32, **{m: pl.Float64 for m in METRIC_COLUMNS}}
    )


def stored(wh: Warehouse) -> list[tuple[Any, ...]]:
    return sorted(wh.query(f"SELECT {', '.join(COLS)} FROM gpu_samples").rows(), key=repr)


def expected(f: pl.DataFrame) -> list[tuple[Any, ...]]:
    return sorted(f.rows(), key=repr)


def test_a_load_reads_back_exactly_through_the_view(tmp_path: Path):
    batch = frame(120, LABELS).sample(fraction=1.0, shuffle=True, seed=3)  # any input order
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        wh.load(LoadBatch({"gpu_samples": batch}, window=HOURS2))
        assert stored(wh) == expected(batch)
        assert wh.scalar("SELECT count(*) FROM gpu_series") == len(LABELS)
        order = wh.query(
            "SELECT ts, series_id FROM gpu_sample_values ORDER BY rowid"
        ).rows()
    hours = [(ts.replace(minute=0), sid, ts) for ts, sid in order]
    assert hours == sorted(hours)


def test_reloading_adds_no_series_and_later_windows_reuse_them(tmp_path: Path):
    first = frame(120, LABELS)
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        wh.load(LoadBatch({"gpu_samples": first}, window=HOURS2))
        ids = wh.query("SELECT * FROM gpu_series ORDER BY series_id").rows()
        again = wh.load(LoadBatch({"gpu_samples": first}, window=HOURS2))
        assert again.replaced == {"gpu_samples": first.height}
        assert wh.query("SELECT * FROM gpu_series ORDER BY series_id").rows() == ids
        assert stored(wh) == expected(first)
        newcomer = ("n2", "GPU-3", -1, None, "2", "web", "w-1", None)
        later = frame(60, [LABELS[1], newcomer], start=HOURS2.end)
        wh.load(LoadBatch({"gpu_samples": later}, window=Window(HOURS2.end, HOURS2.end + timedelta(hours=1))))
        series = wh.query("SELECT * FROM gpu_series ORDER BY series_id").rows()
        assert series[: len(ids)] == ids
        assert series[len(ids):] == [(len(ids) + 1, *newcomer)]
        assert stored(wh) == expected(pl.concat([first, later]))


def _v7_file(path: Path, rows: pl.DataFrame) -> None:
    """A warehouse as the v7 release left it: steps 1..7 from their frozen text, and samples."""
    con = released_file(path, 7)
    con.execute("INSERT INTO gpuledger_meta VALUES ('application', 'gpuledger') ON CONFLICT DO NOTHING")
    con.register("v", rows.to_arrow())
    con.execute(f"INSERT INTO gpu_samples SELECT {', '.join(COLS)} FROM v")
    con.close()


def test_a_v7_file_migrates_keeping_every_sample(tmp_path: Path):
    path = tmp_path / "v7.duckdb"
    old = frame(120, LABELS)
    _v7_file(path, old)
    with Warehouse.open(path) as wh:
        assert schema.current_version(wh.con) == schema.LATEST
        assert stored(wh) == expected(old)
        assert wh.scalar("SELECT count(*) FROM gpu_series") == len(LABELS)
        later = frame(60, LABELS, start=HOURS2.end)
        wh.load(LoadBatch({"gpu_samples": later}, window=Window(HOURS2.end, HOURS2.end + timedelta(hours=1))))
        assert wh.scalar("SELECT count(*) FROM gpu_series") == len(LABELS)
        assert stored(wh) == expected(pl.concat([old, later]))
    with Warehouse.open(path, read_only=True) as ro:
        assert ro.count("gpu_samples") == old.height + later.height


def test_compaction_prunes_series_without_samples(tmp_path: Path):
    from gpuledger.warehouse.retention import compact

    gone = ("n9", "GPU-9", -1, None, None, "old", "done", "c")
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        wh.load(LoadBatch({"gpu_samples": frame(60, [gone, LABELS[0]])}, window=Window(T0, T0 + timedelta(hours=1))))
        later = frame(60, [LABELS[0]], start=T0 + timedelta(hours=1))
        wh.load(LoadBatch({"gpu_samples": later}, window=Window(T0 + timedelta(hours=1), T0 + timedelta(hours=2))))
        wh.execute("INSERT INTO card_hours_hourly (ts, uuid, gpu_i_id, node, model, sharing_mode, "
                   "share, held_hours, card_hours, idle_card_hours, held_idle_card_hours) "
                   "VALUES (?, 'GPU-1', -1, 'n1', 'H100', 'exclusive', 1, 1, 1, 0, 0)", [T0])
        wh.load(LoadBatch({}, watermarks={"rollup": T0 + timedelta(hours=2)}))
        stats = compact(wh, T0 + timedelta(hours=1), margin=timedelta(0), rollup_source="rollup")
        assert stats.removed_rows == 120
        assert wh.query("SELECT pod FROM gpu_series").rows() == [("train-0",)]
        assert stored(wh) == expected(later)
