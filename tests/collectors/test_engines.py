"""The Prometheus collector against real engines, on the hand-built tiny fleet.

Truth comes from `tinyfleet` (who holds which device each minute, the injected bad samples),
not from re-running collector code. Each case runs on both engines: Prometheus backfilled with
promtool, and VictoriaMetrics fed through `/api/v1/import/prometheus`.

Cases:
- every device appears once per minute (4 devices x 180 minutes), attributed exactly as the
  fleet says: `Hostname` and `hostname` nodes, MIG instances keyed by parent UUID + GPU_I_ID
  with their profile, `exported_*` workload labels (the exporter's own `pod` is ignored),
  idle devices kept with NULL pod (unattributed, not dropped), no phantom holder for 5
  minutes after a pod leaves;
- bad samples are counted exactly (NaN 1, out-of-range 1, negative 1, duplicate series 10,
  unattributable 2) and stored as NULL, never as values (VictoriaMetrics drops NaN samples
  itself, so there the NaN is absent rather than counted; the stored row is the same);
- inventory: GPUs with sharing mode, MIG instances with spans, nodes;
- teams from `kube_namespace_labels` (label and fallback rule);
- token counters stored raw across a reset; Kueue usage/quota rows carrying the queue's
  pending workloads;
- chunk size does not change the result (1 h chunks vs 25 min chunks, whose edges fall off the
  hour: every boundary instant stored exactly once);
- resume: a second run starts at the watermark and the result equals one full run;
- `--reload` twice changes nothing (idempotent loads);
- `--follow` rounds collect up to now minus two steps and resume where the last round stopped.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest

from gpuledger.collect_pipeline import collect_window, resume_point
from gpuledger.collectors.chunks import plan_chunks
from gpuledger.collectors.vllm import counter_increase
from gpuledger.core.window import Window, parse_duration
from gpuledger.warehouse import Warehouse
from tests.collectors import tinyfleet
from tests.collectors.conftest import tiny_settings
from tools.metrics_servers import ServerPool

WINDOW = Window(tinyfleet.T0, tinyfleet.window_end())
NOW = tinyfleet.window_end() + timedelta(minutes=5)


@pytest.fixture(params=["prometheus", "victoriametrics"])
def engine(request: pytest.FixtureRequest, metrics_servers: ServerPool, tiny_openmetrics: Path) -> str:
    request.applymarker(getattr(pytest.mark, request.param))
    if request.param == "prometheus":
        return metrics_servers.prometheus(tiny_openmetrics).url
    return metrics_servers.victoriametrics(tiny_openmetrics).url + "#vm"


@pytest.fixture
def wh(tmp_path: Path) -> Iterator[Warehouse]:
    with Warehouse.open(tmp_path / "w.duckdb") as warehouse:
        yield warehouse


def _collect(wh: Warehouse, url: str, window: Window = WINDOW, **kw: object):
    settings = tiny_settings(**kw.pop("prometheus", {}))  # type: ignore[arg-type]
    return collect_window(wh, settings, url.split("#", maxsplit=1)[0], window, now=lambda: NOW, **kw)  # type: ignore[arg-type]


def _truth() -> pl.DataFrame:
    rows = []
    for dev in tinyfleet.devices():
        key = tinyfleet.key(dev)
        for minute in range(tinyfleet.MINUTES):
            held = tinyfleet.holder(key, minute)
            rows.append({
                "ts": tinyfleet.T0 + timedelta(minutes=minute),
                "node": dev.get("Hostname") or dev.get("hostname"),
                "uuid": dev["UUID"], "gpu_i_id": int(dev.get("GPU_I_ID", -1)),
                "mig_profile": dev.get("GPU_I_PROFILE"),
                "namespace": held[0] if held else None, "pod": held[1] if held else None,
            })
    return pl.DataFrame(rows, schema={
        "ts": pl.Datetime("us", "UTC"), "node": pl.String, "uuid": pl.String, "gpu_i_id": pl.Int32,
        "mig_profile": pl.String, "namespace": pl.String, "pod": pl.String})


def _stored(wh: Warehouse) -> pl.DataFrame:
    return wh.query(
        "SELECT ts, node, uuid, gpu_i_id, mig_profile, namespace, pod FROM gpu_samples "
        "ORDER BY uuid, gpu_i_id, ts")


def test_collects_the_fleet_exactly(engine: str, wh: Warehouse) -> None:
    report = _collect(wh, engine)
    truth = _truth().sort("uuid", "gpu_i_id", "ts")
    stored = _stored(wh)
    assert stored.height == 4 * tinyfleet.MINUTES
    assert stored.equals(truth), stored.join(truth, on=["ts", "uuid", "gpu_i_id"], how="anti")
    # bad samples, counted exactly and stored as NULL
    assert report.quality is not None
    expected = {"nan": 1, "out_of_range": 1, "negative": 1, "duplicate_series": 10, "unattributable": 2}
    if engine.endswith("#vm"):
        del expected["nan"]  # VictoriaMetrics drops NaN samples (staleness markers) on import
    assert report.quality.by_reason() == expected
    nulls = wh.query(
        "SELECT uuid, epoch(ts - ?)::INT // 60 AS minute, gr_engine_active, power_w FROM gpu_samples "
        "WHERE gr_engine_active IS NULL OR power_w IS NULL ORDER BY minute", [tinyfleet.T0])
    assert nulls.rows() == [("GPU-a0", 5, None, 300.0), ("GPU-a0", 6, None, 300.0), ("GPU-a1", 7, 0.87, None)]
    active = wh.query("SELECT gr_engine_active FROM gpu_samples WHERE uuid='GPU-a1' ORDER BY ts")
    assert active["gr_engine_active"].to_list()[:20] == [tinyfleet.active("GPU-a1", m) for m in range(20)]


def test_inventory_teams_tokens_queues(engine: str, wh: Warehouse) -> None:
    _collect(wh, engine)
    gpus = wh.query("SELECT uuid, node, gpu_index, model, sharing_mode, first_seen, last_seen "
                    "FROM gpus ORDER BY uuid")
    assert gpus.rows() == [
        ("GPU-a0", "node-a.example", 0, "H100-80GB", "exclusive", tinyfleet.T0, WINDOW.end),
        ("GPU-a1", "node-a.example", 1, "H100-80GB", "exclusive", tinyfleet.T0, WINDOW.end),
        ("GPU-b0", "node-b", 0, "H100-80GB", "mig", tinyfleet.T0, WINDOW.end),
    ]
    mig = wh.query("SELECT uuid, gpu_i_id, profile, start_ts, end_ts FROM mig_instances ORDER BY gpu_i_id")
    assert mig.rows() == [("GPU-b0", 1, "3g.40gb", tinyfleet.T0, WINDOW.end),
                          ("GPU-b0", 2, "3g.40gb", tinyfleet.T0, WINDOW.end)]
    assert wh.query("SELECT node, gpu_count FROM nodes ORDER BY node").rows() == [
        ("node-a.example", 2), ("node-b", 1)]
    assert wh.query("SELECT namespace, team FROM namespaces ORDER BY namespace").rows() == [
        ("team-a", "alpha"), ("team-b", "b")]
    tokens = wh.query("SELECT prompt_tokens_total FROM token_samples WHERE pod='serve-1' ORDER BY ts")
    expected = [tinyfleet.prompt_tokens(m) for m in range(tinyfleet.MINUTES)]
    assert tokens["prompt_tokens_total"].to_list() == expected
    assert counter_increase(tokens["prompt_tokens_total"].to_list()) == 99 * 10 + 79 * 10
    queues = wh.query("SELECT flavor, resource, count(*), min(usage), max(nominal_quota), max(pending_workloads) "
                      "FROM queue_samples GROUP BY ALL ORDER BY flavor")
    assert queues.rows() == [("h100", "nvidia.com/gpu", 180, 2.0, 4.0, 3.0)]


def test_chunk_size_does_not_change_the_result(engine: str, tmp_path: Path) -> None:
    results = []
    for chunk in ("1h", "25m"):
        with Warehouse.open(tmp_path / f"{chunk}.duckdb") as wh:
            report = _collect(wh, engine, prometheus={"chunk": chunk})
            results.append(_stored(wh))
            planned = list(plan_chunks(WINDOW, parse_duration(chunk)))
            assert report.chunks == len(planned) == (3 if chunk == "1h" else 8)
            for edge in planned[1:]:  # every boundary instant: fetched once, stored once
                assert wh.scalar("SELECT count(*) FROM gpu_samples WHERE ts = ?", [edge.start]) == 4
    assert results[0].equals(results[1])
    assert results[0].height == 720


def test_resume_from_watermark_equals_one_run(engine: str, wh: Warehouse) -> None:
    first = _collect(wh, engine, Window(tinyfleet.T0, tinyfleet.T0 + timedelta(hours=1)))
    assert first.chunks == 1
    assert resume_point(wh) == tinyfleet.T0 + timedelta(hours=1)
    second = _collect(wh, engine)
    assert second.start == tinyfleet.T0 + timedelta(hours=1)
    assert second.chunks == 2
    assert _stored(wh).equals(_truth().sort("uuid", "gpu_i_id", "ts"))
    third = _collect(wh, engine)
    assert third.up_to_date and third.chunks == 0


def test_reload_is_idempotent(engine: str, wh: Warehouse) -> None:
    _collect(wh, engine)
    before = _stored(wh)
    again = _collect(wh, engine, reload=True)
    assert again.chunks == 3
    assert _stored(wh).equals(before)
    assert wh.count("token_samples") == 180 and wh.count("queue_samples") == 180


@pytest.mark.prometheus
def test_follow_collects_up_to_now_minus_settle(metrics_servers: ServerPool, tiny_openmetrics: Path,
                                                wh: Warehouse) -> None:
    from gpuledger.collect_pipeline import follow

    url = metrics_servers.prometheus(tiny_openmetrics).url
    clock = [tinyfleet.T0 + timedelta(hours=1, seconds=30), tinyfleet.T0 + timedelta(hours=2, seconds=10)]
    current = [tinyfleet.T0]
    reports = []

    def keep_going() -> bool:
        if not clock:
            return False
        current[0] = clock.pop(0)
        return True

    follow(wh, tiny_settings(), url, tinyfleet.T0, timedelta(minutes=1), keep_going=keep_going,
           now=lambda: current[0], sleep=lambda _s: None, on_report=reports.append)
    # each round collects up to now - 2 steps (late scrapes land first), resuming where it stopped
    assert [r.start for r in reports] == [tinyfleet.T0, tinyfleet.T0 + timedelta(minutes=58)]
    assert resume_point(wh) == tinyfleet.T0 + timedelta(minutes=118)
    assert wh.count("gpu_samples") == 4 * 118
