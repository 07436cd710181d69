"""The serving store (`warehouse.serving_store`, `dashboards.serving_results`): what the writer
publishes and the dashboard reads instead of copying the warehouse.

Cases, on the demo warehouse (32 cards, 2026-10-31 18:00 to 2026-11-01 12:00) with every hour
but the last two rolled up:
- the published file holds only the raw samples the roll-up does not (plus the sample margin
  and the MIG samples of October's last hour), is much smaller than the warehouse, and bills
  on it equal the warehouse's (both months, team and team x model) line for line;
- the recommendations, token costs and advice kinds stored by the writer equal the ones
  computed on the warehouse (what `gpuledger recommend` prints);
- the dashboard serves the published file in place: no private copy is made, the warehouse is
  not needed by a refresh while the serving store is current, and its bill equals the
  warehouse's; an approval on the page is published by the refresh it requests;
- a second publish without a change rewrites no day partition and copies no table kept whole
  (a changed pod copies `pods` alone); a new hour rolled up on
  November 1 rewrites that day's partitions only; a day whose two equal rows became two other
  equal rows is rewritten (its fingerprint sums row hashes: an XOR would cancel the pairs);
- a publisher killed (SIGKILL) in the middle leaves the previous file intact and readable; the
  next publish succeeds;
- a damaged store: the dashboard serves the copy, and the next publish rebuilds the file;
- a page that reads again after its snapshot was replaced and closed gets "busy, retrying";
- no serving store and a collector holding the warehouse: the dashboard falls back to the copy,
  asks for a store, and the command writer publishes one when it closes; a writer of a
  warehouse no dashboard serves publishes nothing.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import duckdb
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from gpuledger.analytics.billing.bill import compute_bill
from gpuledger.command_context import Context
from gpuledger.core.frames import CARD_HOURS_HOURLY, QUEUE_SAMPLES, polars_schema
from gpuledger.core.period import Period
from gpuledger.core.rules import SamplingRules
from gpuledger.core.window import Window, floor_time
from gpuledger.dashboards import serving_results
from gpuledger.dashboards.app import create_app
from gpuledger.warehouse import LoadBatch, Warehouse
from gpuledger.warehouse.sample_fingerprints import BY_SOURCE, rebuild
from gpuledger.warehouse.serving_day_parts import PARTITIONED, PARTS_TABLE, WHOLE, _runs
from gpuledger.warehouse.serving_store import FINGERPRINTS, is_served, open_serving, publish, serving_path
from tests.dashboards.conftest import MIG_PLAN, PERIOD, PREVIOUS, admin_headers, settings_with_roles
from tests.dashboards.test_store import collector

ROOT = Path(__file__).parents[2]
ROLLED_END = datetime(2026, 11, 1, 10, tzinfo=UTC)
SETTINGS = settings_with_roles()


@pytest.fixture(scope="module")
def rolled(tmp_path_factory: pytest.TempPathFactory, demo_source: Path) -> Path:
    """The demo warehouse with [18:00, 10:00) rolled up, as collection does hour by hour."""
    from gpuledger.analytics.usage.rollup import rollup_batch

    path = tmp_path_factory.mktemp("serving") / "rolled.duckdb"
    shutil.copyfile(demo_source, path)
    with Warehouse.open(path) as wh:
        wh.load(rollup_batch(wh, Window(datetime(2026, 10, 31, 18, tzinfo=UTC), ROLLED_END), SETTINGS))
    return path


@pytest.fixture
def published(rolled: Path, tmp_path: Path) -> Path:
    path = tmp_path / "warehouse.duckdb"
    shutil.copyfile(rolled, path)
    with Warehouse.open(path, read_only=True) as wh:  # the results step reads only (0140)
        serving_results.refresh_serving(wh, SETTINGS)
    return path


def _same_lines(got: pl.DataFrame, want: pl.DataFrame) -> None:
    """Costs to the cent; hours equal up to the last bit of a different summation order."""
    assert got["cost"].equals(want["cost"])
    assert_frame_equal(got, want, check_exact=False, rel_tol=1e-12, abs_tol=1e-12)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_serving_file_holds_the_raw_tail_only_and_bills_the_same(published: Path) -> None:
    margin = SamplingRules.of(SETTINGS).margin
    october_end = datetime(2026, 11, 1, tzinfo=UTC)
    with Warehouse.open(published, read_only=True) as wh:
        total = wh.count("gpu_samples")
        # counted here from first principles: from the hour of the roll-up's end less the margin
        # (compaction's rule), or a MIG sample of October's last hour
        expected = wh.scalar(
            "SELECT count(*) FROM gpu_samples WHERE ts >= ? OR (gpu_i_id >= 0 AND ts >= ? AND ts < ?)",
            [floor_time(ROLLED_END - margin, timedelta(hours=1)), october_end - timedelta(hours=1), october_end])
        reference = {(p, by): compute_bill(wh, Period.exact(p).window, SETTINGS, by=by).lines
                     for p in (PERIOD, PREVIOUS) for by in (("team",), ("team", "model"))}
    with open_serving(published) as serving:
        kept = serving.count("gpu_samples")
        assert 0 < kept == expected < total / 2
        assert serving.count("card_hours_hourly") > 0 and serving.count("plans") == 2
        for (period, by), lines in reference.items():
            _same_lines(compute_bill(serving, Period.exact(period).window, SETTINGS, by=by).lines, lines)
    assert serving_path(published).stat().st_size < published.stat().st_size  # (ratio: bench)


def test_stored_results_equal_the_warehouse_computation(published: Path) -> None:
    from gpuledger.analytics.advice import KINDS
    from gpuledger.analytics.workloads.recommend import recommend
    from gpuledger.analytics.workloads.tokens import team_token_costs

    with Warehouse.open(published, read_only=True) as wh:
        window = Period.exact(PERIOD).window
        bill = compute_bill(wh, window, SETTINGS)
        recs = recommend(wh, window, SETTINGS, bill=bill).recommendations
        tokens = team_token_costs(wh, window, SETTINGS, bill=bill)
        advice = {k: KINDS.get(k)(wh, window, SETTINGS) for k in serving_results.ADVICE_KINDS}
    with open_serving(published) as serving:
        stored = serving_results.stored_frame(serving, serving_results.RECOMMENDATIONS, PERIOD)
        assert stored is not None and stored.equals(recs)
        stored = serving_results.stored_frame(serving, serving_results.TOKEN_COSTS, PERIOD)
        assert stored is not None and stored.equals(tokens) and tokens.height > 0
        # the "not computed yet" frames have the computed frames' columns and types
        assert serving_results.not_computed_frame(serving_results.TOKEN_COSTS).schema == tokens.schema
        assert serving_results.not_computed_frame(serving_results.RECOMMENDATIONS).schema == recs.schema
        # the serving store keeps only the newest hour of token samples
        assert serving.scalar("SELECT max(ts) - min(ts) FROM token_samples") <= timedelta(hours=1)
        for kind, found in advice.items():
            got = serving_results.stored_advice(serving, kind, PERIOD)
            assert got is not None and got.rows == found.rows, kind
        assert any(a.rows for a in advice.values())  # the comparison compared something


def test_dashboard_serves_the_published_file_without_a_copy(published: Path, tmp_path: Path) -> None:
    with Warehouse.open(published, read_only=True) as wh:
        reference = compute_bill(wh, Period.exact(PERIOD).window, SETTINGS).lines
    app = create_app(SETTINGS, published, background=False, cache_dir=tmp_path / "cache")
    try:
        with collector(published, "commit-and-hold"):  # held (and written): a refresh cannot open it
            assert app.store.refresh(force=True)
            snap = app.store.current()
            assert not snap.owned  # a link to the published file, not a copy of the warehouse
            assert snap.path.stat().st_ino == serving_path(published).stat().st_ino
            _same_lines(app.data.bill(PERIOD).lines, reference)
        before = _digest(serving_path(published))
        admin = app.policy.principal_for("127.0.0.1", admin_headers())
        assert admin is not None
        message = app.actions.approve(admin, MIG_PLAN)  # its refresh publishes (inline: no thread)
        assert message.endswith("status approved")
        assert _digest(serving_path(published)) != before
        assert not app.store.refresh()  # the write published and refreshed: nothing left to take
        assert app.store.current().generation > snap.generation and not app.store.current().owned
        with app.store.reader() as wh:
            status = wh.scalar("SELECT status FROM plans WHERE plan_id = ?", [MIG_PLAN])
        assert status == "approved"
    finally:
        app.close()


def test_a_republish_rewrites_only_changed_days(published: Path) -> None:
    from gpuledger.analytics.usage.rollup import rollup_batch

    with Warehouse.open(published) as wh:
        again = publish(wh, margin=SamplingRules.of(SETTINGS).margin)
        assert again.rewritten_parts == 0 and again.kept_parts > 0
        wh.load(rollup_batch(wh, Window(ROLLED_END, ROLLED_END + timedelta(hours=1)), SETTINGS))
        after = publish(wh, margin=SamplingRules.of(SETTINGS).margin)
    # November 1's card_hours_hourly, its day row (card_hours_daily) and allocations changed;
    # October's days and the queue samples did not
    assert after.rewritten_parts == 3
    assert after.kept_parts == again.kept_parts - 3
    with open_serving(published) as serving:
        assert serving.scalar("SELECT max(ts) FROM card_hours_hourly") == ROLLED_END


def rolled_up_to_nothing(wh: Warehouse, start: datetime, end: datetime) -> None:
    """`[start, end)`'s hourly roll-up replaced by no rows, as a load writes it (the days' rows
    of the daily roll-up and every day fingerprint follow: rule 2 of
    `warehouse.sample_fingerprints`)."""
    empty = pl.DataFrame(schema=polars_schema(CARD_HOURS_HOURLY))
    wh.load(LoadBatch({CARD_HOURS_HOURLY.name: empty}, window=Window(start, end)))


def test_consecutive_changed_days_are_one_run(published: Path) -> None:
    """Two changed days next to each other are rewritten together (one delete, one insert)
    and counted as two; the store's rows are the warehouse's after."""
    margin = SamplingRules.of(SETTINGS).margin
    assert _runs([date(2026, 10, 30), date(2026, 10, 31), date(2026, 11, 2)]) == [
        (date(2026, 10, 30), date(2026, 11, 1)), (date(2026, 11, 2), date(2026, 11, 3))]
    with Warehouse.open(published) as wh:
        publish(wh, margin=margin)
        rolled_up_to_nothing(wh, datetime(2026, 10, 31, 23, tzinfo=UTC), datetime(2026, 11, 1, 1, tzinfo=UTC))
        stats = publish(wh, margin=margin)
        left = {t: wh.query(f"SELECT * FROM {t} ORDER BY ALL") for t in ("card_hours_hourly", "card_hours_daily")}
    assert stats.rewritten_parts == 4  # October 31 and November 1 of both roll-ups
    with open_serving(published) as serving:
        for table, rows in left.items():
            assert_frame_equal(serving.query(f"SELECT * FROM {table} ORDER BY ALL"), rows)


def test_a_pair_of_equal_rows_replaced_by_another_pair_is_rewritten(published: Path) -> None:
    margin = SamplingRules.of(SETTINGS).margin
    row = "('2026-10-31 20:00+00', 'cq-pair', 'default', 'nvidia.com/gpu', {usage}, {usage}, 0, 0)"
    # a load keeps one row per key; by hand, then the day fingerprints rebuilt as a writer
    # outside the loads must (rule 2 of `warehouse.sample_fingerprints`)
    with Warehouse.open(published) as wh:
        wh.execute(f"INSERT INTO queue_samples VALUES {row.format(usage=1)}, {row.format(usage=1)}")
        rebuild(wh.con, BY_SOURCE[QUEUE_SAMPLES.name])
        publish(wh, margin=margin)
        wh.execute("DELETE FROM queue_samples WHERE cluster_queue = 'cq-pair'")
        wh.execute(f"INSERT INTO queue_samples VALUES {row.format(usage=2)}, {row.format(usage=2)}")
        rebuild(wh.con, BY_SOURCE[QUEUE_SAMPLES.name])
        stats = publish(wh, margin=margin)
    assert stats.rewritten_parts == 1  # October 31 of queue_samples
    with open_serving(published) as serving:
        assert serving.query("SELECT usage FROM queue_samples WHERE cluster_queue = 'cq-pair'")["usage"].to_list() \
            == [2.0, 2.0]


def test_a_table_kept_whole_is_copied_only_when_it_changed(published: Path) -> None:
    """Pods, series, preemptions: one fingerprint each (decision 0271). A publish without a
    change copies none; a pod whose end moved copies `pods` alone, and the store's pods are
    the warehouse's after; a store whose fingerprints are gone copies every one once."""
    margin = SamplingRules.of(SETTINGS).margin
    with Warehouse.open(published) as wh:
        whole = [t for t in wh.query("SELECT table_name FROM duckdb_tables()")["table_name"]
                 if t not in PARTITIONED and t not in ("gpu_sample_values", "token_samples", *FINGERPRINTS)]
        assert publish(wh, margin=margin).tables_copied == 0
        wh.execute("UPDATE pods SET end_ts = end_ts + INTERVAL 1 MINUTE WHERE pod = (SELECT min(pod) FROM pods)")
        moved = publish(wh, margin=margin)
        want = wh.query("SELECT * FROM pods ORDER BY ALL")
    assert moved.tables_copied == 1 and moved.rewritten_parts == 0
    with open_serving(published) as serving:
        assert serving.query("SELECT * FROM pods ORDER BY ALL").equals(want)
    con = duckdb.connect(str(serving_path(published)))
    con.execute(f"DELETE FROM {PARTS_TABLE} WHERE day = ?", [WHOLE])
    con.close()
    with Warehouse.open(published) as wh:
        assert publish(wh, margin=margin).tables_copied == len(whole) > 5
        assert all(wh.scalar(f"SELECT count(*) FROM {t}") for t in FINGERPRINTS), "the warehouse keeps them"
    with open_serving(published) as serving:  # they describe the warehouse's samples, not the store's tail
        held = set(serving.query("SELECT table_name FROM duckdb_tables()")["table_name"])
    assert not held & FINGERPRINTS and {"gpu_sample_values", "token_samples"} <= held


def test_a_store_of_month_parts_is_copied_whole_once(published: Path) -> None:
    """A store published before decision 0266 (month fingerprints in `serving_parts`), here
    with November's roll-up missing from it: the next publish drops that table and copies each
    partitioned table whole, its days' fingerprints recorded; the one after rewrites nothing."""
    con = duckdb.connect(str(serving_path(published)))
    con.execute(f"DROP TABLE {PARTS_TABLE}")
    con.execute("CREATE TABLE serving_parts (tbl VARCHAR, month VARCHAR, fingerprint VARCHAR)")
    con.execute("INSERT INTO serving_parts VALUES ('card_hours_hourly', '2026-11', '1:2')")
    con.execute("DELETE FROM card_hours_hourly WHERE ts >= '2026-11-01'")
    con.close()
    margin = SamplingRules.of(SETTINGS).margin
    with Warehouse.open(published) as wh:
        stats = publish(wh, margin=margin)
        want = {t: wh.scalar(f"SELECT count(*) FROM {t}") for t in PARTITIONED}
        days = sum(wh.scalar(f"SELECT count(DISTINCT {c}::DATE) FROM {t}") for t, c in PARTITIONED.items())
        again = publish(wh, margin=margin)
    assert (stats.rewritten_parts, stats.kept_parts) == (days, 0) and days > 0
    assert (again.rewritten_parts, again.kept_parts) == (0, days)
    with open_serving(published) as serving:
        assert serving.scalar("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'serving_parts'") == 0
        assert {t: serving.scalar(f"SELECT count(*) FROM {t}") for t in PARTITIONED} == want


KILLED = """
import os, sys
from datetime import UTC, datetime
import polars as pl
from gpuledger.core.config import Settings
from gpuledger.core.frames import CARD_HOURS_HOURLY, polars_schema
from gpuledger.core.window import Window
from gpuledger.warehouse import LoadBatch
from gpuledger.dashboards import serving_results
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse import serving_store

real = serving_store.update_partitioned
def stall(*args, **kwargs):
    out = real(*args, **kwargs)
    print('inside', flush=True)
    sys.stdin.readline()  # killed here, with the temporary file half written
    return out
serving_store.update_partitioned = stall
with Warehouse.open(sys.argv[1]) as wh:  # November 1 rolled up to nothing, by a load
    empty = pl.DataFrame(schema=polars_schema(CARD_HOURS_HOURLY))
    day = Window(datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 2, tzinfo=UTC))
    wh.load(LoadBatch({CARD_HOURS_HOURLY.name: empty}, window=day))
    serving_results.publish_serving(wh, Settings())
"""


def kill_inside(script: str, warehouse: Path) -> None:
    """Run `script` on `warehouse` in a child and SIGKILL it once it prints "inside" (the point
    it stalls at, in the middle of a publish)."""
    proc = subprocess.Popen([sys.executable, "-c", script, str(warehouse)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "inside"
    proc.kill()
    proc.wait(timeout=30)


def test_a_kill_mid_publish_leaves_the_previous_store(published: Path) -> None:
    before = _digest(serving_path(published))
    kill_inside(KILLED, published)
    assert _digest(serving_path(published)) == before
    with open_serving(published) as serving:
        assert serving.scalar("SELECT count(*) FROM card_hours_hourly WHERE ts >= '2026-11-01'") > 0
    with Warehouse.open(published) as wh:  # the next publish replaces the leftover
        stats = serving_results.publish_serving(wh, SETTINGS)
    assert stats.rewritten_parts == 2  # November 1 of both roll-ups, emptied by the killed writer
    with open_serving(published) as serving:
        assert serving.scalar("SELECT count(*) FROM card_hours_hourly WHERE ts >= '2026-11-01'") == 0
    assert not list(published.parent.glob(".*.tmp"))


def test_missing_store_falls_back_then_the_next_writer_publishes(rolled: Path, tmp_path: Path) -> None:
    path = tmp_path / "warehouse.duckdb"
    shutil.copyfile(rolled, path)
    ctx = Context(settings=SETTINGS, warehouse_path=path)
    with ctx.open_warehouse():  # nobody serves it yet: a writer publishes nothing
        pass
    assert not is_served(path)
    app = create_app(SETTINGS, path, background=False, cache_dir=tmp_path / "cache")
    try:
        with collector(path, "commit-and-hold"):
            assert app.store.refresh()
            assert app.store.current().owned  # the copy: nothing published yet
            assert app.data.bill(PERIOD).lines.height > 0
        assert is_served(path) and not serving_path(path).exists()  # asked for one
        with ctx.open_warehouse() as wh:
            wh.execute("INSERT INTO namespaces (namespace, team) VALUES ('late', 'nlp')")
        assert serving_path(path).exists()
        assert app.store.refresh()
        snap = app.store.current()
        assert not snap.owned
        with app.store.reader(snap) as wh:
            assert wh.scalar("SELECT team FROM namespaces WHERE namespace = 'late'") == "nlp"
            assert isinstance(wh.query(f"SELECT * FROM {PARTS_TABLE}"), pl.DataFrame)
    finally:
        app.close()


def test_a_damaged_store_falls_back_to_the_copy_and_is_rebuilt(published: Path, tmp_path: Path) -> None:
    serving_path(published).write_bytes(b"not a duckdb file" * 100)
    app = create_app(SETTINGS, published, background=False, cache_dir=tmp_path / "cache")
    try:
        with collector(published, "commit-and-hold"):  # nobody can publish meanwhile
            assert app.store.refresh()
            assert app.store.current().owned  # the copy of the warehouse
            assert app.data.bill(PERIOD).lines.height > 0
        with Warehouse.open(published) as wh:  # the next publish starts the file over
            stats = serving_results.publish_serving(wh, SETTINGS)
        assert stats.rewritten_parts > 0
        serving = open_serving(published)
        serving.close()
    finally:
        app.close()


def test_a_page_that_reads_a_replaced_snapshot_retries(published: Path, tmp_path: Path) -> None:
    from gpuledger.warehouse.snapshot_store import SnapshotStore, WarehouseBusyError

    store = SnapshotStore(published, cache_dir=tmp_path / "c",
                          publisher=lambda wh: serving_results.publish_serving(wh, SETTINGS))
    try:
        first = store.current()
        assert store.refresh(force=True)  # a new snapshot; nobody held the first one: closed
        with pytest.raises(WarehouseBusyError, match="retrying"), store.reader(first):
            pass
        with store.reader() as wh:  # the page's retry reads the new one
            assert wh.count("plans") == 2
    finally:
        store.close()
