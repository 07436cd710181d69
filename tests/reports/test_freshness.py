"""Every statement states its data's "as of": the newest sample before the period's end.

Cases:
- a complete month (November 2024 of the report fleet): the gathered data's newest sample is
  the newest `gpu_samples.ts` before 1 December, read from the file with DuckDB directly, and
  every statement (fleet and each team) carries it; the HTML says "data as of <it> UTC";
- a month whose collection stopped on 20 November: the report's HTML statements written to disk
  (fleet and teams) say "data as of 2024-11-19 23:55 UTC" (the last 5-minute sample of the
  19th), although they were generated later;
- the same month after its raw samples were compacted away (rolled up, then deleted): the data
  is as of the roll-up's newest hour end, 2024-11-20 00:00;
- a statement without any sample says so.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from gpuledger.analytics.usage.rollup import rollup_batch
from gpuledger.core.config import Settings
from gpuledger.core.window import Window
from gpuledger.reports.compose import build_statements, gather
from gpuledger.reports.html import render_statement
from gpuledger.reports.writer import write_report
from gpuledger.warehouse import Warehouse
from tests.reports.fleet import STEP, load

PERIOD = "2024-11"
DECEMBER = datetime(2024, 12, 1, tzinfo=UTC)
STOPPED = datetime(2024, 11, 20, tzinfo=UTC)
NOW = datetime(2024, 12, 10, tzinfo=UTC)


def newest_before(path: Path, end: datetime) -> datetime:
    """The newest raw sample before `end`, read with DuckDB itself (not the code under test)."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        con.execute("SET TimeZone = 'UTC'")
        row = con.execute("SELECT max(ts) FROM gpu_samples WHERE ts < ?", [end]).fetchone()
    finally:
        con.close()
    assert row is not None and row[0] is not None
    return row[0].astimezone(UTC)


def test_complete_month_states_newest_sample(base_warehouse: Path) -> None:
    expected = newest_before(base_warehouse, DECEMBER)
    assert expected == DECEMBER - STEP  # the simulator's grid: the last step of the month
    with Warehouse.open(base_warehouse, read_only=True) as wh:
        data = gather(wh, Settings(), PERIOD)
    assert data.newest_sample == expected
    statements = build_statements(data, Settings(), "DRAFT", NOW)
    assert len(statements) > 1 and {s.newest_sample for s in statements} == {expected}
    assert f"data as of {expected:%Y-%m-%d %H:%M} UTC" in render_statement(statements[0])


def test_stopped_collection_is_visible_in_the_statements(tmp_path: Path) -> None:
    path = tmp_path / "stopped.duckdb"
    load(path, until=STOPPED)
    with Warehouse.open(path, read_only=True) as wh:
        data = gather(wh, Settings(), PERIOD)
    folder = tmp_path / "out"
    write_report(folder, data, Settings(), status="DRAFT", generated_at=NOW)
    pages = sorted((folder / "statements").glob("*.html"))
    assert len(pages) > 1
    for page in pages:
        assert "data as of 2024-11-19 23:55 UTC" in page.read_text(), page.name


def test_compacted_month_is_as_of_the_rollup(tmp_path: Path) -> None:
    path = tmp_path / "compacted.duckdb"
    load(path, until=STOPPED)
    settings = Settings()
    with Warehouse.open(path) as wh:
        wh.load(rollup_batch(wh, Window(datetime(2024, 11, 1, tzinfo=UTC), STOPPED), settings))
        wh.execute("DELETE FROM gpu_sample_values")  # under the gpu_samples view
        data = gather(wh, settings, PERIOD)
    assert data.newest_sample == STOPPED  # the hour 2024-11-19 23:00 ends at midnight
    html = render_statement(build_statements(data, settings, "DRAFT", NOW)[0])
    assert "data as of 2024-11-20 00:00 UTC" in html


def test_statement_without_samples_says_so(base_warehouse: Path) -> None:
    with Warehouse.open(base_warehouse, read_only=True) as wh:
        data = gather(wh, Settings(), PERIOD)
    statement = replace(build_statements(data, Settings(), "DRAFT", NOW)[0], newest_sample=None)
    assert "data as of: no samples" in render_statement(statement)
