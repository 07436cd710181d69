"""Backfill: `gpuledger collect` rolls up as chunks arrive, resumes after `kill -9` to the very
warehouse an uninterrupted run stores, and keeps chunks within a memory budget.

A small field fleet (simulator, every field effect) over 30 hours across two UTC midnights,
through promtool and a real Prometheus. The oracle for the roll-up is the old order of work:
load everything first (`--no-rollup`), then `pipeline.rollup` day by day.
"""

from __future__ import annotations

import io
import itertools
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from gpuledger.cli import main
from gpuledger.collect_pipeline import CollectReport, collect_window, follow, resume_point
from gpuledger.collect_rollup import SETTLED_SOURCE, RollupPlan
from gpuledger.collect_sizing import CHUNK_ROWS, chunk_size
from gpuledger.core.config import Settings
from gpuledger.core.rules import SamplingRules
from gpuledger.core.window import HOUR, Window, floor_time
from gpuledger.pipeline import rollup
from gpuledger.simulator.engine import Simulation
from gpuledger.simulator.fleet import FleetSpec
from gpuledger.terminal_progress import RateProgress
from gpuledger.warehouse import Warehouse
from tests.field.harness import FAMILIES, effects
from tools.metrics_servers import ServerPool

pytestmark = pytest.mark.prometheus
W = Window(datetime(2026, 11, 1, 20, tzinfo=UTC), datetime(2026, 11, 3, 2, tzinfo=UTC))
SETTINGS = Settings(prometheus={"chunk": "2h"})
MARGIN = SamplingRules.of(SETTINGS).margin
TABLES = ("gpu_samples", "card_hours_hourly", "allocations", "gpus", "nodes", "mig_instances")


@pytest.fixture(scope="module")
def url(metrics_servers: ServerPool, tmp_path_factory: pytest.TempPathFactory) -> str:
    sim = Simulation(FleetSpec.default(gpus=16, field=effects("all")), W, seed=11)
    path = tmp_path_factory.mktemp("backfill") / "fleet.om"
    sim.write_openmetrics(path, families=FAMILIES)
    return metrics_servers.prometheus(path).url


def _cli(tmp: Path, warehouse: Path, url: str, *extra: str, window: Window = W) -> int:
    config = tmp / "gpuledger.yaml"
    config.write_text("prometheus:\n  chunk: 2h\n")
    return main(["--config", str(config), "--warehouse", str(warehouse), "collect", "--prometheus", url,
                 "--start", window.start.isoformat(), "--end", window.end.isoformat(), *extra])


def _state(path: Path) -> dict[str, pl.DataFrame]:
    """Every table a backfill writes, sorted on all columns, and the watermarks."""
    with Warehouse.open(path, read_only=True) as wh:
        out = {t: wh.query(f"SELECT * FROM {t} ORDER BY ALL") for t in TABLES}
        out["watermarks"] = wh.query("SELECT source, watermark FROM watermarks ORDER BY source")
    return out


def _assert_same(got: dict[str, pl.DataFrame], want: dict[str, pl.DataFrame], tables: tuple[str, ...]) -> None:
    """Equal row for row; floats to 1e-12 (DuckDB's parallel sums may round the last bit
    differently from one evaluation of the same roll-up to the next)."""
    for table in tables:
        assert got[table].height > 0, table
        assert_frame_equal(got[table], want[table], check_exact=False, rel_tol=1e-12, abs_tol=1e-12)


@pytest.fixture(scope="module")
def reference(url: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, pl.DataFrame]:
    """One uninterrupted `gpuledger collect` of the window, rolling up as it goes."""
    tmp = tmp_path_factory.mktemp("reference")
    assert _cli(tmp, tmp / "w.duckdb", url, "-q") == 0
    return _state(tmp / "w.duckdb")


def test_rollup_during_collect_equals_rollup_after_load(url: str, reference: dict[str, pl.DataFrame],
                                                        tmp_path: Path) -> None:
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        report = collect_window(wh, SETTINGS, url, W, now=lambda: W.end)
        assert report.rolled_to is None and wh.watermark("card_hours_hourly") is None
        rollup(wh, W, SETTINGS)
    _assert_same(_state(tmp_path / "w.duckdb"), reference, ("gpu_samples", "card_hours_hourly", "allocations"))
    marks = dict(reference["watermarks"].iter_rows())
    assert marks["card_hours_hourly"] == W.end  # the window's end: the user said the data ends there
    assert marks[SETTLED_SOURCE] == floor_time(W.end - MARGIN, HOUR)  # the hours with their margin


def test_rollup_never_passes_the_loaded_samples(url: str, tmp_path: Path) -> None:
    history: list[tuple[datetime | None, datetime | None, int]] = []

    def record(r: CollectReport) -> None:
        history.append((r.loaded_to, r.rolled_to, r.chunks))

    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        report = collect_window(wh, SETTINGS, url, W, now=lambda: W.end, rollup=RollupPlan(),
                                on_progress=record)
    chunks = [(loaded, rolled) for loaded, rolled, n in history if n > 0]
    assert len(chunks) == report.chunks >= 14
    for loaded, rolled in chunks[:-1]:
        assert loaded is not None
        assert rolled is None or rolled <= floor_time(loaded - MARGIN, HOUR)
    # incremental: the first day was rolled up as soon as its margin was in, not at the end
    first_day = datetime(2026, 11, 2, tzinfo=UTC)
    early = [loaded for loaded, rolled in chunks if rolled == first_day]
    assert early and min(early) == datetime(2026, 11, 2, 2, tzinfo=UTC)
    assert chunks[-1] == (W.end, W.end)


KILLED = textwrap.dedent("""
    import sys, time
    from gpuledger.cli import main
    from gpuledger.warehouse import Warehouse

    table, nth = sys.argv[1], int(sys.argv[2])
    seen = [0]
    write = Warehouse._write
    def paused(self, spec, frame, window):
        removed = write(self, spec, frame, window)
        if spec.name == table:
            seen[0] += 1
            if seen[0] == nth:
                print("inside-load", flush=True)
                time.sleep(120)
        return removed
    Warehouse._write = paused
    sys.exit(main(sys.argv[3:]))
""")


@pytest.mark.parametrize(("table", "nth"), [("gpu_samples", 8), ("card_hours_hourly", 1)])
def test_kill_9_mid_backfill_then_rerun_stores_what_one_run_does(
    url: str, reference: dict[str, pl.DataFrame], tmp_path: Path, table: str, nth: int,
) -> None:
    path = tmp_path / "w.duckdb"
    config = tmp_path / "gpuledger.yaml"
    config.write_text("prometheus:\n  chunk: 2h\n")
    argv = ["--config", str(config), "--warehouse", str(path), "collect", "--prometheus", url,
            "--start", W.start.isoformat(), "--end", W.end.isoformat()]
    proc = subprocess.Popen([sys.executable, "-c", KILLED, table, str(nth), *argv],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == "inside-load", proc.stderr.read() if proc.stderr else ""
    finally:
        proc.kill()
        proc.wait(timeout=30)
    with Warehouse.open(path) as wh:  # killed inside a transaction: the last commit stands
        loaded = resume_point(wh)
        rolled = wh.watermark("card_hours_hourly")
        assert loaded is not None and W.start < loaded < W.end
        assert rolled is None or rolled <= floor_time(loaded - MARGIN, HOUR)
        if table == "card_hours_hourly":  # the first roll-up died: nothing of it is stored
            assert rolled is None and wh.count("card_hours_hourly") == 0
    assert main(argv) == 0
    _assert_same(_state(path), reference, (*TABLES, "watermarks"))


def test_provisional_hours_rolled_up_again_then_rerun_and_reload(
    url: str, reference: dict[str, pl.DataFrame], tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "w.duckdb"
    middle = datetime(2026, 11, 2, 12, tzinfo=UTC)
    assert _cli(tmp_path, path, url, "-q", window=Window(W.start, middle)) == 0
    with Warehouse.open(path, read_only=True) as wh:
        assert wh.watermark("card_hours_hourly") == middle
        assert wh.watermark(SETTLED_SOURCE) == floor_time(middle - MARGIN, HOUR) < middle
    assert _cli(tmp_path, path, url, "-q") == 0
    _assert_same(_state(path), reference, (*TABLES, "watermarks"))
    capsys.readouterr()
    assert _cli(tmp_path, path, url, "-q") == 0  # up to date: nothing to roll up again
    assert "rolled up 0 hour(s)" in capsys.readouterr().out
    assert _cli(tmp_path, path, url, "-q", "--reload") == 0  # the whole window again
    assert "rolled up 30 hour(s)" in capsys.readouterr().out
    _assert_same(_state(path), reference, (*TABLES, "watermarks"))


def test_small_chunk_budget_changes_nothing_stored(
    url: str, reference: dict[str, pl.DataFrame], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("gpuledger.collect_sizing.CHUNK_ROWS", 400)
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        report = collect_window(wh, SETTINGS, url, W, now=lambda: W.end, rollup=RollupPlan())
    assert report.chunks > 30  # 2h chunks would be 15
    _assert_same(_state(tmp_path / "w.duckdb"), reference, ("gpu_samples", "card_hours_hourly", "allocations"))


def test_chunk_size_fits_the_budget() -> None:
    day, step = timedelta(days=1), timedelta(minutes=1)
    assert chunk_size(100.0, day, step) == day  # a small fleet keeps the configured size
    assert chunk_size(116_000.0, day, step) == timedelta(hours=2)  # 1,000 GPUs with MIG
    assert chunk_size(1_160_000.0, day, step) == timedelta(minutes=10)  # 10,000 GPUs
    assert chunk_size(10.0, timedelta(minutes=25), step) == timedelta(minutes=25)
    for rate in (5_000.0, 50_000.0, 500_000.0):
        size = chunk_size(rate, day, step)
        assert rate * (size / HOUR) <= CHUNK_ROWS and (24 * HOUR) % size == timedelta(0)


def test_follow_rolls_up_hour_by_hour(url: str, reference: dict[str, pl.DataFrame], tmp_path: Path) -> None:
    clock = iter([W.start + timedelta(hours=h) for h in range(2, 33)])
    now = [W.start]
    marks: list[tuple[datetime | None, datetime | None]] = []

    def keep_going() -> bool:
        now[0] = next(clock, None) or now[0]
        return now[0] < W.end + timedelta(hours=1) or len(marks) < 30

    def seen(r: CollectReport) -> None:
        marks.append((r.loaded_to, r.rolled_to))

    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        follow(wh, SETTINGS, url, W.start, timedelta(minutes=1), now=lambda: now[0],
               keep_going=keep_going, sleep=lambda s: None, on_report=seen)
        stored = wh.query("SELECT * FROM card_hours_hourly ORDER BY ALL")
        rolled = wh.watermark("card_hours_hourly")
    for loaded, mark in marks:
        assert loaded is not None
        assert mark is None or mark <= floor_time(loaded - MARGIN, HOUR)
    hours = sorted({m for _, m in marks if m is not None})
    assert len(hours) >= 25 and all(b - a == HOUR for a, b in itertools.pairwise(hours))
    assert rolled is not None
    want = reference["card_hours_hourly"].filter(pl.col("ts") < rolled)
    assert stored.height > 0
    assert_frame_equal(stored, want, check_exact=False, rel_tol=1e-12, abs_tol=1e-12)


def test_cli_progress_lines_and_quiet(url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "w.duckdb"
    short = Window(W.start, W.start + timedelta(hours=6))
    assert _cli(tmp_path, path, url, "--no-rollup", window=short) == 0
    err = capsys.readouterr().err
    with Warehouse.open(path, read_only=True) as wh:
        rows = wh.count("gpu_samples")
        assert wh.watermark("card_hours_hourly") is None and wh.count("card_hours_hourly") == 0
    last = err.strip().splitlines()[-1]
    assert last.startswith("  collect: 4/4 chunks, ") and f" {rows:,} rows " in last
    assert "at 2026-11-02T02:00Z" in last
    assert _cli(tmp_path, tmp_path / "q.duckdb", url, "-q", window=short) == 0
    assert capsys.readouterr().err == ""


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_rate_progress_on_a_terminal_shows_rows_rate_and_eta() -> None:
    out = _Tty()
    with RateProgress("collect", total=4, unit="chunks", out=out) as bar:
        bar.advance(rows=1000, note="watermark x")
        bar.set_total(5)
    text = out.getvalue()
    assert "collect" in text and "1/5" in text and "1,000 rows" in text and "ETA" in text
