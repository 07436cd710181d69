"""Freshness read queries and `gpuledger status`, on real DuckDB files.

Cases:
- `source_freshness`: one row per watermark source (sorted), then one per sample table no
  watermark loads; the gap is the watermark minus the newest sample (a collector that ran two
  hours past its data shows 2 h); `kubernetes` has no sample table, so no newest sample or gap;
  the roll-up's newest data is its newest hour start + 1 h;
- `newest_sample`: the newest raw GPU sample; with `before`, the newest strictly before it;
  with raw samples compacted away, the roll-up's newest hour end (clamped to `before`);
  an empty warehouse gives None;
- `data_range`: the first and last start of any sample, roll-up hour or allocation; a warehouse
  with none gives None;
- `gpuledger status` prints the table (every source, watermark, newest sample, gap) and a
  stale summary, exit 0; `--format json` carries the same values in seconds;
- a missing and an empty warehouse: one line, exit 0 (table and JSON);
- while another process holds the writer lock, status answers from the published serving
  store (no copy of the warehouse); with none published, one line, a non-zero exit, and a
  request for one that the writer's next publish answers.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gpuledger.cli import main
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.queries.freshness import SourceFreshness, data_range, newest_sample, source_freshness

T0 = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
NEWEST = T0 + timedelta(minutes=2)
"""The newest GPU sample the fixture stores (samples at T0, T0+1min, T0+2min)."""
GPU_MARK = NEWEST + timedelta(hours=2)
"""The collector ran two hours past its last data (a dead exporter)."""
KUBE_MARK = T0 + timedelta(hours=3)
ROLLUP_HOUR = datetime(2026, 11, 30, 9, tzinfo=UTC)
TOKEN_NEWEST = T0 + timedelta(minutes=1)


def _insert_sample(wh: Warehouse, ts: datetime) -> None:
    # gpu_samples is a view over a series dimension and its values (v8): one series, id 1.
    wh.execute("INSERT OR IGNORE INTO gpu_series (series_id, node, uuid, gpu_i_id) "
               "VALUES (1, 'n0', 'GPU-a', -1)")
    wh.execute("INSERT INTO gpu_sample_values (ts, series_id) VALUES (?, 1)", [ts])


def _insert_rollup(wh: Warehouse, hour: datetime) -> None:
    wh.execute(
        "INSERT INTO card_hours_hourly (ts, uuid, gpu_i_id, node, model, sharing_mode, share, "
        "held_hours, card_hours, idle_card_hours, held_idle_card_hours) "
        "VALUES (?, 'GPU-a', -1, 'n0', 'H100-80GB', 'exclusive', 1, 1, 1, 0, 0)", [hour]
    )


def _mark(wh: Warehouse, source: str, moment: datetime) -> None:
    wh.execute("INSERT OR REPLACE INTO watermarks VALUES (?, ?, now())", [source, moment])


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    path = tmp_path / "wh.duckdb"
    with Warehouse.open(path) as wh:
        for minute in range(3):
            _insert_sample(wh, T0 + timedelta(minutes=minute))
        _insert_rollup(wh, ROLLUP_HOUR)
        wh.execute("INSERT INTO token_samples (ts, namespace, pod, model_name) "
                   "VALUES (?, 'serving', 'p', 'm')", [TOKEN_NEWEST])
        _mark(wh, "prometheus.gpu_samples", GPU_MARK)
        _mark(wh, "kubernetes", KUBE_MARK)
        _mark(wh, "card_hours_hourly", ROLLUP_HOUR + timedelta(hours=1))
    return path


def test_source_freshness_rows(warehouse: Path) -> None:
    with Warehouse.open(warehouse, read_only=True) as wh:
        rows = source_freshness(wh)
    hour_end = ROLLUP_HOUR + timedelta(hours=1)
    assert rows == [
        SourceFreshness("card_hours_hourly", hour_end, hour_end, timedelta(0)),
        SourceFreshness("kubernetes", KUBE_MARK, None, None),
        SourceFreshness("prometheus.gpu_samples", GPU_MARK, NEWEST, timedelta(hours=2)),
        SourceFreshness("token_samples", None, TOKEN_NEWEST, None),
        SourceFreshness("queue_samples", None, None, None),
    ]


def test_newest_sample_raw_and_before(warehouse: Path) -> None:
    with Warehouse.open(warehouse, read_only=True) as wh:
        assert newest_sample(wh) == NEWEST
        assert newest_sample(wh, before=NEWEST) == NEWEST - timedelta(minutes=1)
        assert newest_sample(wh, before=T0 + timedelta(seconds=30)) == T0


def test_newest_sample_falls_back_to_rollup(tmp_path: Path) -> None:
    path = tmp_path / "compacted.duckdb"
    with Warehouse.open(path) as wh:
        assert newest_sample(wh) is None
        _insert_rollup(wh, ROLLUP_HOUR)
        _insert_rollup(wh, ROLLUP_HOUR - timedelta(hours=5))
        assert newest_sample(wh) == datetime(2026, 11, 30, 10, tzinfo=UTC)
        half_past = datetime(2026, 11, 30, 9, 30, tzinfo=UTC)
        assert newest_sample(wh, before=half_past) == half_past
        assert newest_sample(wh, before=ROLLUP_HOUR) == datetime(2026, 11, 30, 5, tzinfo=UTC)


def test_data_range_spans_samples_rollups_and_allocations(warehouse: Path, tmp_path: Path) -> None:
    with Warehouse.open(warehouse, read_only=True) as wh:
        assert data_range(wh) == (ROLLUP_HOUR, NEWEST)
    with Warehouse.open(warehouse) as wh:
        later = NEWEST + timedelta(hours=5)
        wh.execute("INSERT INTO allocations (ts, end_ts, uuid, gpu_i_id, node, namespace, pod, sharing_mode, "
                   "share) VALUES (?, ?, 'GPU-a', -1, 'n0', 'ml', 'p', 'exclusive', 1)",
                   [later, later + timedelta(hours=1)])
        _insert_sample(wh, ROLLUP_HOUR - timedelta(days=2))
        assert data_range(wh) == (ROLLUP_HOUR - timedelta(days=2), later)
    with Warehouse.open(tmp_path / "empty.duckdb") as wh:
        assert data_range(wh) is None


def _status(path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    rc = main(["status", "--warehouse", str(path), *extra])
    return rc, capsys.readouterr().out


def test_status_table(warehouse: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out = _status(warehouse, capsys)
    assert rc == 0
    lines = out.splitlines()
    assert lines[0].split() == ["source", "watermark", "newest", "sample", "gap", "age"]
    gpu = next(line for line in lines if line.startswith("prometheus.gpu_samples"))
    assert gpu.split()[1:4] == ["2026-11-30T12:02:00Z", "2026-11-30T10:02:00Z", "2"]
    assert "2 h 0 min" in gpu
    kube = next(line for line in lines if line.startswith("kubernetes"))
    assert kube.split()[1:4] == ["2026-11-30T13:00:00Z", "-", "-"]
    sources = lines[1:lines.index("")]  # then the roll-up by rules (its one hour: not recorded)
    assert {line.split()[0] for line in sources} == {
        "card_hours_hourly", "kubernetes", "prometheus.gpu_samples", "token_samples", "queue_samples"}
    assert lines[len(sources) + 2] == "hourly roll-up by rules" and "rules not recorded" in out
    assert lines[-1].startswith("STALE: newest GPU sample 2026-11-30T10:02:00Z")


def test_status_json(warehouse: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out = _status(warehouse, capsys, "--format", "json")
    assert rc == 0
    doc = json.loads(out)
    assert doc["schema"] == "gpuledger.status/v1"
    assert doc["newest_sample"] == "2026-11-30T10:02:00Z" and doc["stale"] is True
    assert doc["stale_after_s"] == 1800
    by = {s["source"]: s for s in doc["sources"]}
    assert by["prometheus.gpu_samples"]["gap_s"] == 7200
    assert by["prometheus.gpu_samples"]["watermark"] == "2026-11-30T12:02:00Z"
    assert by["kubernetes"]["newest_sample"] is None and by["kubernetes"]["gap_s"] is None
    now = datetime.fromisoformat(doc["now"].replace("Z", "+00:00"))
    assert by["token_samples"]["age_s"] == pytest.approx((now - TOKEN_NEWEST).total_seconds(), abs=1)


def test_status_simulated_warehouse_is_not_stale(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Samples the simulator alone loaded (its watermark source, no `prometheus.*`) are
    complete to their end: status says "simulated", never STALE (decision 0214, the rule the
    dashboard banner uses); once a collector writes, staleness applies again."""
    path = tmp_path / "sim.duckdb"
    with Warehouse.open(path) as wh:
        _insert_sample(wh, T0)
        _mark(wh, "simulator", T0 + timedelta(minutes=1))
    rc, out = _status(path, capsys)
    assert rc == 0
    last = out.splitlines()[-1]
    assert last.startswith("simulated: newest GPU sample 2026-11-30T10:00:00Z") and "STALE" not in out
    rc, out = _status(path, capsys, "--format", "json")
    doc = json.loads(out)
    assert doc["stale"] is False and doc["simulated"] is True
    with Warehouse.open(path) as wh:
        _mark(wh, "prometheus.gpu_samples", T0 + timedelta(minutes=1))
    rc, out = _status(path, capsys)
    assert out.splitlines()[-1].startswith("STALE: newest GPU sample 2026-11-30T10:00:00Z")


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_missing_and_empty_warehouse(tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str) -> None:
    missing = tmp_path / "missing.duckdb"
    rc, out = _status(missing, capsys, "--format", fmt)
    assert rc == 0 and len(out.splitlines()) == 1 and "no warehouse at" in out
    assert not missing.exists()
    empty = tmp_path / "empty.duckdb"
    Warehouse.open(empty).close()
    rc, out = _status(empty, capsys, "--format", fmt)
    assert rc == 0 and len(out.splitlines()) == 1 and "is empty" in out
    if fmt == "json":
        assert json.loads(out)["sources"] == []


HOLD_WRITER = """
import sys
from gpuledger.warehouse import Warehouse
wh = Warehouse.open(sys.argv[1])
print("holding", flush=True)
sys.stdin.read()
wh.close()
"""


def test_status_while_a_writer_holds_the_file(warehouse: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gpuledger.core.config import Settings
    from gpuledger.core.rules import SamplingRules
    from gpuledger.warehouse.serving_store import is_served, publish, serving_path

    holder = subprocess.Popen([sys.executable, "-c", HOLD_WRITER, str(warehouse)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        rc = main(["status", "--warehouse", str(warehouse)])
        said = capsys.readouterr()
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
    assert rc != 0 and "no serving store is published yet" in said.err
    assert len(said.err.strip().splitlines()) == 1 and "Traceback" not in said.err
    assert is_served(warehouse) and not serving_path(warehouse).exists()  # asked for one
    with Warehouse.open(warehouse) as wh:  # the writer's publish (as its close does when served)
        publish(wh, margin=SamplingRules.of(Settings()).margin)
    holder = subprocess.Popen([sys.executable, "-c", HOLD_WRITER, str(warehouse)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        rc, out = _status(warehouse, capsys, "--format", "json")
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
    assert rc == 0
    document = json.loads(out)
    assert document["newest_sample"] == "2026-11-30T10:02:00Z"
    marks = {r["source"]: r["watermark"] for r in document["sources"]}
    assert marks["prometheus.gpu_samples"] == "2026-11-30T12:02:00Z"
