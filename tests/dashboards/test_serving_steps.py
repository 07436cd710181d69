"""The two publishing steps (docs/decisions/0140, 0141): a writer's close publishes the serving
store's tables only; `gpuledger refresh-serving` computes the month results on a read-only
warehouse and publishes them; the dashboard never computes them from a serving store.

Cases, on the demo warehouse with every hour but the last two rolled up (`rolled`):
- a bill by team x model is cached with its lines and an empty detail;
- a store published without results: the dashboard shows "not computed yet" for every advice
  kind and no recommendation or token-cost rows, though the warehouse's own computation has
  rows; after the real CLI's `refresh-serving` the same pages show the stored results, equal to
  the warehouse's computation;
- a command writer's close after that republishes the tables and keeps every stored result
  byte for byte (its basis unchanged);
- `refresh-serving` while a collector holds the warehouse: one line, a non-zero exit, the store
  byte-identical; with no dashboard serving the warehouse: one line, nothing published;
- two publishers at once: the second is refused by the publish lock, which the first releases;
- a `refresh-serving` killed (SIGKILL) while computing leaves the previous store byte-identical.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpuledger.command_context import Context
from gpuledger.core.errors import WarehouseLockedError
from gpuledger.core.period import Period
from gpuledger.core.rules import SamplingRules
from gpuledger.dashboards import serving_results
from gpuledger.dashboards.app import create_app
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.serving_store import Publication, open_serving, serving_path
from tests.dashboards.conftest import PERIOD, settings_with_roles
from tests.dashboards.test_serving_store import ROOT, _digest, _same_lines, kill_inside, rolled  # noqa: F401  (rolled: the fixture)
from tests.dashboards.test_store import collector

SETTINGS = settings_with_roles()


def _cli(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuledger", "--warehouse", str(path), *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)


@pytest.fixture
def tables_only(rolled: Path, tmp_path: Path) -> Path:  # noqa: F811
    path = tmp_path / "warehouse.duckdb"
    shutil.copyfile(rolled, path)
    with Warehouse.open(path) as wh:
        serving_results.publish_serving(wh, SETTINGS)
    return path


def _results(path: Path) -> dict[tuple[str, str], bytes]:
    serving = open_serving(path)
    try:
        rows = serving.con.execute("SELECT name, period, payload FROM serving_results").fetchall()
    finally:
        serving.close()
    return {(str(n), str(p)): bytes(b) for n, p, b in rows}


def test_pages_show_not_computed_until_refresh_serving(tables_only: Path, tmp_path: Path) -> None:
    from gpuledger.analytics.billing.bill import compute_bill
    from gpuledger.analytics.workloads.recommend import recommend

    by = ("team", "model")
    with Warehouse.open(tables_only, read_only=True) as wh:
        want = recommend(wh, Period.exact(PERIOD).window, SETTINGS).recommendations
        by_model = compute_bill(wh, Period.exact(PERIOD).window, SETTINGS, by=by)
    assert want.height > 0 and _results(tables_only) == {}
    app = create_app(SETTINGS, tables_only, background=False, cache_dir=tmp_path / "cache")
    try:
        assert not app.store.current().owned
        # a bill by more than the team is kept for its lines: the same lines, no detail (0141)
        kept = app.data.bill(PERIOD, by)
        _same_lines(kept.lines, by_model.lines)  # costs to the cent, hours to the last bits
        assert by_model.detail.height > 0
        assert kept.detail.height == 0 and kept.detail.schema == by_model.detail.schema
        for kind in serving_results.ADVICE_KINDS:
            (row,) = app.data.advice(PERIOD, kind).rows
            assert row["reason"] == serving_results.NOT_COMPUTED
        assert app.data.recommendations(PERIOD).height == 0
        assert app.data.token_costs(PERIOD).height == 0
        done = _cli(tables_only, "refresh-serving", "-o", "json")
        assert done.returncode == 0, done.stderr
        assert '"results_computed"' in done.stdout
        assert app.store.refresh(force=True)
        app.data.wait_warm()  # the new snapshot serves once warmed
        assert app.data.serving().generation == app.store.current().generation
        assert app.data.recommendations(PERIOD).equals(want)
        assert all(r["reason"] != serving_results.NOT_COMPUTED
                   for k in serving_results.ADVICE_KINDS for r in app.data.advice(PERIOD, k).rows)
    finally:
        app.close()
    stored = _results(tables_only)
    # a command writer's close republishes the tables, the results byte for byte
    with Context(settings=SETTINGS, warehouse_path=tables_only).open_warehouse() as wh:
        wh.execute("INSERT INTO namespaces (namespace, team) VALUES ('late', 'nlp')")
    assert _results(tables_only) == stored
    serving = open_serving(tables_only)
    try:
        assert serving.scalar("SELECT team FROM namespaces WHERE namespace = 'late'") == "nlp"
    finally:
        serving.close()


def test_refresh_serving_refused_while_a_writer_holds_the_warehouse(tables_only: Path, tmp_path: Path) -> None:
    before = _digest(serving_path(tables_only))
    with collector(tables_only, "commit-and-hold"):
        done = _cli(tables_only, "refresh-serving")
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "writing this warehouse" in done.stderr
    assert _digest(serving_path(tables_only)) == before
    lonely = tmp_path / "alone.duckdb"
    shutil.copyfile(tables_only, lonely)  # no serving store beside it: nobody serves it
    done = _cli(lonely, "refresh-serving")
    assert done.returncode == 0 and "nothing published" in done.stdout
    assert not serving_path(lonely).exists()


def test_the_publish_lock_keeps_publishers_apart(tables_only: Path) -> None:
    margin = SamplingRules.of(SETTINGS).margin
    with Warehouse.open(tables_only, read_only=True) as a, Warehouse.open(tables_only, read_only=True) as b:
        with Publication(a, margin=margin), pytest.raises(WarehouseLockedError, match="publishing the"):
            Publication(b, margin=margin).__enter__()
        with Publication(b, margin=margin) as second:  # released by the first one's exit
            pass
    assert second.stats.kept_parts > 0


KILLED = """
import sys
from gpuledger.core.config import Settings
from gpuledger.dashboards import serving_results
from gpuledger.warehouse import Warehouse

real = serving_results.compute
def stall(*args, **kwargs):
    out = real(*args, **kwargs)
    print('inside', flush=True)
    sys.stdin.readline()  # killed here, with a result put in the half-written copy
    return out
serving_results.compute = stall
with Warehouse.open(sys.argv[1], read_only=True) as wh:
    serving_results.refresh_serving(wh, Settings())
"""


def test_a_kill_mid_results_leaves_the_previous_store(tables_only: Path) -> None:
    before = _digest(serving_path(tables_only))
    kill_inside(KILLED, tables_only)
    assert _digest(serving_path(tables_only)) == before
    assert _results(tables_only) == {}
    with Warehouse.open(tables_only, read_only=True) as wh:  # the lock died with it; the next one runs
        stats = serving_results.refresh_serving(wh, SETTINGS)
    assert stats.path == serving_path(tables_only) and _results(tables_only)


def test_refresh_serving_stores_a_handed_month_as_it_is(tables_only: Path) -> None:
    """The demo hands in the month's analyses it has just computed (0256): their advice and
    recommendations stored byte for byte (not run again), their bill the one the token costs
    price with (its rules recorded), while every other result is computed; a month handed in
    for another period is ignored."""
    import io
    from dataclasses import replace

    import polars as pl

    from gpuledger.analytics.advice.month import MonthAnalyses
    from gpuledger.analytics.advice.run import Advice
    from gpuledger.analytics.billing.bill import compute_bill
    from gpuledger.analytics.workloads.recommend import recommend
    from gpuledger.analytics.workloads.requested import workload_usage

    doctored = Advice(kind="overcommit", rows=[{"kind": "overcommit", "scope": "handed-in"}],
                      document={"handed": True})
    other = Advice(kind="autoscaling", rows=[], document={"handed": "elsewhere"})
    window = Period.exact(PERIOD).window
    with Warehouse.open(tables_only, read_only=True) as wh:
        bill = compute_bill(wh, window, SETTINGS)
        usage = workload_usage(wh, window, SETTINGS, bill)
        found = recommend(wh, window, SETTINGS, bill=bill, usage=usage)
        one = found.recommendations.head(1).with_columns(pl.lit("handed-in").alias("reason"))
        month = MonthAnalyses(bill, usage, replace(found, recommendations=one), (doctored,))
        elsewhere = replace(month, bill=replace(bill, window=Period.exact("1999-01").window), advice=(other,))
        serving_results.refresh_serving(wh, SETTINGS, month=month)
        serving_results.refresh_serving(wh, SETTINGS, month=elsewhere)
        computed = serving_results.compute(wh, SETTINGS, "advice:autoscaling", PERIOD)
        tokens = serving_results.compute(wh, SETTINGS, serving_results.TOKEN_COSTS, PERIOD)
    stored = _results(tables_only)
    assert stored[("advice:overcommit", PERIOD)] == serving_results.advice_payload(doctored)
    assert pl.read_ipc(io.BytesIO(stored[(serving_results.RECOMMENDATIONS, PERIOD)])).equals(one)
    assert stored[("advice:autoscaling", PERIOD)] == computed
    assert stored[(serving_results.TOKEN_COSTS, PERIOD)] == tokens
    assert {name for name, _ in stored} == set(serving_results.NAMES)
