"""The stored samples' fingerprints per UTC day, kept by every write (v18, decision 0274).

Each case compares the tables with the fingerprints computed here from the stored rows: the
day and the sums in Python, every stored column hashed by DuckDB (its `hash` is the one thing
taken from it), so neither the module's SQL nor its column lists are reused:
- GPU sample loads: a window across midnight, the same samples again (unchanged), other values
  for a window (changed), a late sample in an earlier day, a series gone from a whole day (its
  row dropped); token sample loads the same way, per day;
- a load that fails after the samples were written leaves them as they were;
- compaction removes old days' fingerprints with their samples;
- a v7 file migrates (through v8's layout and v18's fill) to the fingerprints of its rows;
- the day stamps read from them equal the stamps computed from the rows, and move only for
  the day a load changed (a token sample in a day's last 10 minutes moves the next day's too:
  its rate reads them);
- every stored column is hashed (a column added later must be named, rule 3);
- queue sample loads keep their day fingerprints the same way (v19; the roll-ups' are checked
  through their own loads in tests/analytics/test_daily_rollup.py).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest

from gpuledger.core.frames import QUEUE_SAMPLES, TOKEN_SAMPLES, polars_schema
from gpuledger.core.window import Window
from gpuledger.warehouse import LoadBatch, Warehouse, store
from gpuledger.warehouse.queries.advice import per_minute_inputs_stamps
from gpuledger.warehouse.sample_fingerprints import ALL, BY_SOURCE, SAMPLES, TOKENS, Fingerprinted
from tests.foundation.test_sample_layout import LABELS, _v7_file, frame

T0 = datetime(2026, 11, 1, 22, tzinfo=UTC)


Key = tuple[Any, ...]


def stored_columns(wh: Warehouse, table: str) -> list[str]:
    return [str(c) for (c, *_) in wh.con.execute(f"DESCRIBE {table}").fetchall()]


def expected(wh: Warehouse, kind: Fingerprinted = SAMPLES) -> dict[Key, tuple[int, int]]:
    """(day, series) or (day,) → (rows, sum of row hashes), from the stored rows: every column
    of the table as the catalog lists it, summed in Python."""
    columns = stored_columns(wh, kind.source)
    keys = "".join(f", {key}" for key in kind.keys)
    sums: dict[Key, list[int]] = defaultdict(lambda: [0, 0])
    for ts, row_hash, *rest in wh.con.execute(
            f"SELECT ts, hash({', '.join(columns)}){keys} FROM {kind.source}").fetchall():
        entry = sums[(ts.astimezone(UTC).date(), *rest)]
        entry[0] += 1
        entry[1] += row_hash
    return {key: (rows, total) for key, (rows, total) in sums.items()}


def kept(wh: Warehouse, kind: Fingerprinted = SAMPLES) -> dict[Key, tuple[int, int]]:
    keys = "".join(f"{key}, " for key in kind.keys)
    rows = wh.con.execute(f"SELECT day, {keys}sample_rows, row_hashes FROM {kind.table}").fetchall()
    found = {tuple(key): (int(n), int(h)) for *key, n, h in rows}
    assert len(found) == len(rows), "one row per key"
    return found


def tokens(minutes: int, start: datetime, pods: tuple[str, ...] = ("a", "b"), add: float = 0.0) -> pl.DataFrame:
    """Token counters of `pods`, one row per pod per minute, rising by the minute."""
    rows = [(start + timedelta(minutes=m), "ml", pod, "llama", 100.0 * m + add, 10.0 * m, 1.0, float(i))
            for m in range(minutes) for i, pod in enumerate(pods)]
    return pl.DataFrame(rows, schema=list(TOKEN_SAMPLES.column_names), orient="row")


def load(wh: Warehouse, rows: pl.DataFrame, start: datetime, end: datetime, table: str = "gpu_samples") -> None:
    wh.load(LoadBatch({table: rows}, window=Window(start, end)))


def test_every_load_keeps_the_fingerprints_of_the_stored_rows(tmp_path: Path) -> None:
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        first = frame(180, LABELS, start=T0)  # 22:00 to 01:00: two days
        load(wh, first, T0, T0 + timedelta(hours=3))
        assert {day for day, _ in kept(wh)} == {date(2026, 11, 1), date(2026, 11, 2)}
        assert kept(wh) == expected(wh)
        before = kept(wh)

        load(wh, first, T0, T0 + timedelta(hours=3))  # the same samples again
        assert kept(wh) == before

        changed = frame(60, LABELS, start=T0 + timedelta(hours=2)).with_columns(fb_used_mib=pl.lit(7.0))
        load(wh, changed, T0 + timedelta(hours=2), T0 + timedelta(hours=3))
        assert kept(wh) == expected(wh)
        moved = {key for key in before if kept(wh)[key] != before[key]}
        assert moved and {day for day, _ in moved} == {date(2026, 11, 2)}

        late = frame(5, LABELS[:1], start=T0 - timedelta(hours=5))  # into the first day's morning
        load(wh, late, T0 - timedelta(hours=5), T0 - timedelta(hours=4))
        assert kept(wh) == expected(wh)

        # the second day's hour reloaded without one series: its only day row goes
        gone = wh.scalar("SELECT series_id FROM gpu_series WHERE uuid = ?", [LABELS[3][1]])
        fewer = frame(60, LABELS[:3], start=T0 + timedelta(hours=2))
        load(wh, fewer, T0 + timedelta(hours=2), T0 + timedelta(hours=3))
        assert (date(2026, 11, 2), gone) not in kept(wh)
        assert (date(2026, 11, 1), gone) in kept(wh)
        assert kept(wh) == expected(wh)


def test_every_token_load_keeps_the_day_fingerprints_of_the_stored_rows(tmp_path: Path) -> None:
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        load(wh, tokens(180, T0), T0, T0 + timedelta(hours=3), "token_samples")
        assert set(kept(wh, TOKENS)) == {(date(2026, 11, 1),), (date(2026, 11, 2),)}
        assert kept(wh, TOKENS) == expected(wh, TOKENS)
        before = kept(wh, TOKENS)
        load(wh, tokens(180, T0), T0, T0 + timedelta(hours=3), "token_samples")
        assert kept(wh, TOKENS) == before
        later = T0 + timedelta(hours=2, minutes=30)
        load(wh, tokens(30, later, ("a",), add=5.0), later, later + timedelta(minutes=30), "token_samples")
        assert kept(wh, TOKENS) == expected(wh, TOKENS)
        assert kept(wh, TOKENS)[date(2026, 11, 1),] == before[date(2026, 11, 1),]
        assert kept(wh, TOKENS)[date(2026, 11, 2),] != before[date(2026, 11, 2),]


def queue_rows(minutes: int, start: datetime, usage: float = 1.0) -> pl.DataFrame:
    """Kueue's samples of two ClusterQueues, one row each per minute."""
    rows = [(start + timedelta(minutes=m), cq, "default", "nvidia.com/gpu", 8.0, usage, 0.0, None)
            for m in range(minutes) for cq in ("cq-a", "cq-b")]
    return pl.DataFrame(rows, schema=polars_schema(QUEUE_SAMPLES), orient="row")


def test_every_queue_load_keeps_the_day_fingerprints_of_the_stored_rows(tmp_path: Path) -> None:
    """The queue samples, one of the tables the serving store keeps per day (v19, 0289); the
    roll-ups' are held to theirs through the roll-up's own loads in tests/analytics/test_daily_rollup.py."""
    kind = BY_SOURCE[QUEUE_SAMPLES.name]
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        load(wh, queue_rows(180, T0), T0, T0 + timedelta(hours=3), QUEUE_SAMPLES.name)
        assert set(kept(wh, kind)) == {(date(2026, 11, 1),), (date(2026, 11, 2),)}
        assert kept(wh, kind) == expected(wh, kind)
        before = kept(wh, kind)
        load(wh, queue_rows(180, T0), T0, T0 + timedelta(hours=3), QUEUE_SAMPLES.name)
        assert kept(wh, kind) == before
        later = T0 + timedelta(hours=2)
        load(wh, queue_rows(30, later, usage=3.0), later, later + timedelta(hours=1), QUEUE_SAMPLES.name)
        assert kept(wh, kind) == expected(wh, kind)
        assert kept(wh, kind)[date(2026, 11, 1),] == before[date(2026, 11, 1),]
        assert kept(wh, kind)[date(2026, 11, 2),] != before[date(2026, 11, 2),]
        load(wh, queue_rows(0, T0), T0, T0 + timedelta(hours=2), QUEUE_SAMPLES.name)  # the first day's gone
        assert set(kept(wh, kind)) == {(date(2026, 11, 2),)} and kept(wh, kind) == expected(wh, kind)


def test_every_stored_column_is_hashed(tmp_path: Path) -> None:
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        for kind in ALL:
            assert list(kind.columns) == stored_columns(wh, kind.source), kind.source


def test_a_failed_load_leaves_them_as_they_were(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        load(wh, frame(60, LABELS, start=T0), T0, T0 + timedelta(hours=1))
        before = kept(wh)
        real = store.write_samples

        def written_then_failing(*args: Any) -> int:
            real(*args)
            raise duckdb.ConversionException("failed after the samples were written")

        monkeypatch.setattr(store, "write_samples", written_then_failing)
        with pytest.raises(Exception, match="failed after the samples were written"):
            load(wh, frame(60, LABELS, start=T0).with_columns(fb_used_mib=pl.lit(1.0)), T0, T0 + timedelta(hours=1))
        assert kept(wh) == before == expected(wh)


def test_compaction_removes_old_days_fingerprints(tmp_path: Path) -> None:
    from gpuledger.warehouse.retention import compact

    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        load(wh, frame(180, LABELS, start=T0), T0, T0 + timedelta(hours=3))
        wh.execute("INSERT INTO card_hours_hourly (ts, uuid, gpu_i_id, node, model, sharing_mode, "
                   "share, held_hours, card_hours, idle_card_hours, held_idle_card_hours) "
                   "VALUES (?, 'GPU-1', -1, 'n1', 'H100', 'exclusive', 1, 1, 1, 0, 0)", [T0])
        wh.load(LoadBatch({}, watermarks={"rollup": T0 + timedelta(hours=3)}))
        compact(wh, T0 + timedelta(hours=2, minutes=30), margin=timedelta(0), rollup_source="rollup")
        assert {day for day, _ in kept(wh)} == {date(2026, 11, 2)}
        assert kept(wh) == expected(wh)


def test_a_v7_file_migrates_to_the_fingerprints_of_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "v7.duckdb"
    _v7_file(path, frame(180, LABELS, start=T0))
    con = duckdb.connect(str(path))
    con.register("t", tokens(180, T0).to_arrow())
    con.execute("INSERT INTO token_samples SELECT * FROM t")
    con.close()
    with Warehouse.open(path) as wh:
        assert len(kept(wh)) == 2 * len(LABELS) and len(kept(wh, TOKENS)) == 2
        assert kept(wh) == expected(wh)
        assert kept(wh, TOKENS) == expected(wh, TOKENS)


def test_day_stamps_read_from_them_equal_the_rows_and_move_with_a_load(tmp_path: Path) -> None:
    days = [(T0.replace(hour=0), T0.replace(hour=0) + timedelta(days=1)),
            (T0.replace(hour=0) + timedelta(days=1), T0.replace(hour=0) + timedelta(days=2))]
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        load(wh, frame(180, LABELS, start=T0), T0, T0 + timedelta(hours=3))
        load(wh, tokens(180, T0), T0, T0 + timedelta(hours=3), "token_samples")
        kept_stamps = per_minute_inputs_stamps(wh, days)
        for kind in (SAMPLES, TOKENS):  # a catalog without them: computed from the rows
            wh.execute(f"ALTER TABLE {kind.table} RENAME TO aside_{kind.table}")
        assert per_minute_inputs_stamps(wh, days) == kept_stamps
        for kind in (SAMPLES, TOKENS):
            wh.execute(f"ALTER TABLE aside_{kind.table} RENAME TO {kind.table}")

        load(wh, frame(30, LABELS, start=T0 + timedelta(hours=2)).with_columns(gpu_util=pl.lit(3.0)),
             T0 + timedelta(hours=2), T0 + timedelta(hours=2, minutes=30))
        after = per_minute_inputs_stamps(wh, days)
        assert after[0] == kept_stamps[0] and after[1] != kept_stamps[1]
        last = T0 + timedelta(hours=1, minutes=55)  # in the first day's last 10 minutes
        load(wh, tokens(1, last, add=9.0), last, last + timedelta(minutes=1), "token_samples")
        moved = per_minute_inputs_stamps(wh, days)
        assert moved[0] != after[0] and moved[1] != after[1]
        early = T0 + timedelta(minutes=30)  # not in them
        load(wh, tokens(1, early, add=9.0), early, early + timedelta(minutes=1), "token_samples")
        assert per_minute_inputs_stamps(wh, days)[1] == moved[1]
        with pytest.raises(ValueError, match="not a whole UTC day"):
            per_minute_inputs_stamps(wh, [(T0, T0 + timedelta(days=1))])
