"""The dashboard's "data as of" banner states the newest sample, and warns when it is stale.

Cases (over real HTTP posts of the banner callback to the Flask app):
- a stale warehouse (the demo fixture: samples end 2026-11-01 12:00 UTC, a month ago): the
  banner names the newest sample time, read from the file with DuckDB directly, and shows the
  stale warning, although the snapshot it shows was copied seconds ago;
- a fresh warehouse (a small fleet simulated up to the current minute): the banner names its
  newest sample and shows no warning;
- an empty warehouse: the banner says there are no samples yet (as a warning);
- simulated data (issue 32: the demo showed "Stale… is collection running?" on every page): a
  month-old warehouse whose samples carry only the simulator's watermark (what `demo` and
  `simulate --load` record) says "Simulated data to <newest>" and shows no stale warning; the
  same file once a collector's watermark (`prometheus.gpu_samples`) is there warns again;
- the threshold, with explicit clocks: exactly two collection intervals (30 min) after the
  newest sample is not stale, one second more is.
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from gpuledger.core.config import utcnow
from gpuledger.core.window import Window, floor_time
from gpuledger.dashboards.app import create_app
from gpuledger.warehouse import LoadBatch, Warehouse
from gpuledger.warehouse.queries.freshness import is_stale
from tests.dashboards.conftest import admin_headers, settings_with_roles

BANNER = "banner.children"


def newest_in_file(path: Path) -> datetime:
    """The newest `gpu_samples.ts`, read with DuckDB itself (not the code under test)."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        con.execute("SET TimeZone = 'UTC'")
        row = con.execute("SELECT max(ts) FROM gpu_samples").fetchone()
    finally:
        con.close()
    assert row is not None and row[0] is not None
    return row[0].astimezone(UTC)


def banner_of(path: Path, cache: Path) -> str:
    """The banner as the server renders it for an admin, flattened to its JSON text."""
    app = create_app(settings_with_roles(), path, background=False, cache_dir=cache)
    try:
        app.store.refresh()  # what the first page view does: take a snapshot (copied just now)
        key = next(k for k in app.dash.callback_map if BANNER in k)
        spec = app.dash.callback_map[key]
        body = {
            "output": key, "outputs": {"id": "banner", "property": "children"},
            "inputs": [{**i, "value": 1 if i["id"] == "tick" else None} for i in spec["inputs"]],
            "state": [], "changedPropIds": ["tick.n_intervals"],
        }
        client = app.server.test_client()
        client.environ_base["REMOTE_ADDR"] = "127.0.0.1"
        response = client.post("/_dash-update-component", data=json.dumps(body),
                               headers=admin_headers(), content_type="application/json")
        assert response.status_code == 200, response.get_data(as_text=True)
        return json.dumps(response.get_json()["response"]["banner"]["children"])
    finally:
        app.close()


def fresh_warehouse(path: Path) -> Path:
    """Two hours of a 4-card fleet ending at the current minute."""
    from gpuledger.simulator.engine import Simulation
    from gpuledger.simulator.fleet import FleetSpec

    end = floor_time(utcnow(), timedelta(minutes=1))
    sim = Simulation(FleetSpec.default(gpus=8), Window(end - timedelta(hours=2), end), seed=3)
    with Warehouse.open(path) as wh:
        wh.load(LoadBatch(frames=sim.inventory()))
        for sub, frames in sim.batches():
            wh.load(LoadBatch(frames=frames, window=sub))
    return path


def test_stale_warehouse_warns(demo_source: Path, tmp_path: Path) -> None:
    path = tmp_path / "stale.duckdb"
    shutil.copyfile(demo_source, path)
    newest = newest_in_file(path)
    assert utcnow() - newest > timedelta(days=1)  # the fixture's data is old by construction
    text = banner_of(path, tmp_path / "cache")
    assert f"Data as of {newest:%Y-%m-%d %H:%M:%S} UTC (newest sample)" in text
    assert "stale-warning" in text and "Stale: no new samples for" in text


def test_fresh_warehouse_does_not_warn(tmp_path: Path) -> None:
    path = fresh_warehouse(tmp_path / "fresh.duckdb")
    newest = newest_in_file(path)
    text = banner_of(path, tmp_path / "cache")
    assert f"Data as of {newest:%Y-%m-%d %H:%M:%S} UTC (newest sample)" in text
    assert "stale-warning" not in text and "Stale" not in text


def test_empty_warehouse_says_no_samples(tmp_path: Path) -> None:
    path = tmp_path / "empty.duckdb"
    Warehouse.open(path).close()
    text = banner_of(path, tmp_path / "cache")
    assert "No samples in the warehouse yet." in text and "stale-warning" in text


@pytest.mark.parametrize(("after", "stale"), [
    (timedelta(minutes=30), False),
    (timedelta(minutes=30, seconds=1), True),
    (timedelta(0), False),
])
def test_two_collection_intervals(after: timedelta, stale: bool) -> None:
    newest = datetime(2026, 11, 30, 12, tzinfo=UTC)
    assert is_stale(newest, newest + after) is stale


def test_no_sample_is_stale() -> None:
    assert is_stale(None, datetime(2026, 11, 30, tzinfo=UTC)) is True


def _mark(path: Path, source: str, moment: datetime) -> None:
    """Record a watermark the way a loader does (an empty batch that moves one source)."""
    with Warehouse.open(path) as wh:
        wh.load(LoadBatch(frames={}, watermarks={source: moment}))


def test_simulated_data_is_not_stale(demo_source: Path, tmp_path: Path) -> None:
    from gpuledger.pipeline import SIMULATOR_SOURCE

    path = tmp_path / "simulated.duckdb"
    shutil.copyfile(demo_source, path)
    newest = newest_in_file(path)
    assert utcnow() - newest > timedelta(days=1)  # a month old, as the demo's is
    _mark(path, SIMULATOR_SOURCE, newest)
    text = banner_of(path, tmp_path / "cache")
    assert f"Simulated data to {newest:%Y-%m-%d %H:%M:%S} UTC" in text, text
    assert "stale-warning" not in text and "Stale" not in text
    _mark(path, "prometheus.gpu_samples", newest)  # a collector writes here too: its age matters
    text = banner_of(path, tmp_path / "cache2")
    assert "stale-warning" in text and "Stale: no new samples for" in text
