"""End to end on the simulator's fleet: its OpenMetrics history through real engines into the
warehouse, compared with the simulator's own frames (its truth), and a live scrape.

The simulated fleet (24 GPUs: exclusive H100s, MIG A100s, time-sliced A100s; 6 hours) is
written twice: with `Hostname` and plain workload labels (backfilled into Prometheus), and with
`hostname` and `exported_*` labels behind a honorLabels-false ServiceMonitor (imported into
VictoriaMetrics). Cases, for each:
- gpu_samples: the same (instant, device) keys as the simulator's frames, with the same node,
  MIG profile, vgpu, namespace/pod/container, and metric values (to 1e-9 relative);
- token_samples and queue_samples: the same rows and values (Kueue's admission wait computed
  in PromQL equals the simulator's per-step mean);
- inventory: GPUs with model and sharing mode, MIG instances, namespace teams, GPU pods with
  their requests (from kube-state-metrics) as in the simulator's inventory;
- no bad samples are reported on clean data;
and live: Prometheus scrapes the simulator's `/metrics` (clock mapped into the simulated
window); the collected rows carry exactly the simulator's devices and attributions.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from gpuledger.collect_pipeline import collect_window
from gpuledger.core.config import Settings
from gpuledger.core.window import Window, floor_time
from gpuledger.warehouse import Warehouse
from tools.metrics_servers import ServerPool

START = datetime(2026, 3, 1, tzinfo=UTC)
WINDOW = Window(START, START + timedelta(hours=6))
SETTINGS = Settings(prometheus={"chunk": "2h", "retries": 1}, queues={"systems": ["kueue", "volcano"]})
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sim() -> Any:
    from gpuledger.simulator.engine import Simulation
    from gpuledger.simulator.fleet import FleetSpec

    return Simulation(FleetSpec.default(gpus=24), WINDOW, seed=11)


@pytest.fixture(scope="module")
def truth(sim: Any) -> dict[str, pl.DataFrame]:
    parts: dict[str, list[pl.DataFrame]] = {}
    for _, frames in sim.batches(chunk=timedelta(hours=2)):
        for name, frame in frames.items():
            parts.setdefault(name, []).append(frame)
    return {name: pl.concat(frames) for name, frames in parts.items()}


@pytest.fixture(scope="module", params=["prometheus", "victoriametrics"])
def collected(request: pytest.FixtureRequest, sim: Any, metrics_servers: ServerPool,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Warehouse, Any]]:
    root = tmp_path_factory.mktemp(f"sim-{request.param}")
    if request.param == "prometheus":
        path = root / "fleet.om"
        sim.write_openmetrics(path, hostname_label="Hostname", exported=False)
        server = metrics_servers.prometheus(path)
    else:
        path = root / "fleet-exported.om"
        sim.write_openmetrics(path, hostname_label="hostname", exported=True)
        server = metrics_servers.victoriametrics(path)
    with Warehouse.open(root / "w.duckdb") as wh:
        report = collect_window(wh, SETTINGS, server.url, WINDOW, now=lambda: WINDOW.end)
        yield request.param, wh, report


KEY = ["ts", "uuid", "gpu_i_id", "vgpu"]
STORED_STEP = {"sm_active": 0.01, "tensor_active": 0.01, "dram_active": 0.01, "power_w": 0.1}
"""The unread values the warehouse stores at a coarser step (decision 0143): within half of it."""


def _compare(stored: pl.DataFrame, expected: pl.DataFrame, key: list[str], exact: list[str],
             close: list[str]) -> None:
    assert stored.height == expected.height
    joined = expected.join(stored.with_columns(pl.lit(True).alias("_found")), on=key, how="left",
                           nulls_equal=True, suffix="_got")
    missing = joined.filter(pl.col("_found").is_null())
    assert missing.height == 0, missing.head()
    for col in exact:
        differ = joined.filter(pl.col(col).ne_missing(pl.col(f"{col}_got")))
        assert differ.height == 0, (col, differ.select(*key, col, f"{col}_got").head())
    for col in close:
        a, b = pl.col(col), pl.col(f"{col}_got")
        tol = 1e-9 * a.abs().clip(1.0) + STORED_STEP.get(col, 0.0) / 2
        bad = joined.filter(a.is_null().ne(b.is_null()) | ((a - b).abs() > tol))
        assert bad.height == 0, (col, bad.select(*key, col, f"{col}_got").head())


def test_gpu_samples_equal_the_simulator(collected: tuple[str, Warehouse, Any],
                                         truth: dict[str, pl.DataFrame]) -> None:
    _, wh, report = collected
    from gpuledger.core.frames import METRIC_COLUMNS

    stored = wh.query("SELECT * FROM gpu_samples")
    _compare(stored, truth["gpu_samples"], KEY, ["node", "mig_profile", "namespace", "pod", "container"],
             list(METRIC_COLUMNS))
    assert report.quality.total == 0, report.quality.rows()


def test_tokens_and_queues_equal_the_simulator(collected: tuple[str, Warehouse, Any],
                                               truth: dict[str, pl.DataFrame]) -> None:
    _, wh, _ = collected
    _compare(wh.query("SELECT * FROM token_samples"), truth["token_samples"],
             ["ts", "namespace", "pod", "model_name"], [],
             ["prompt_tokens_total", "generation_tokens_total"])
    _compare(wh.query("SELECT * FROM queue_samples"), truth["queue_samples"],
             ["ts", "cluster_queue", "flavor", "resource"], [],
             ["nominal_quota", "usage", "pending_workloads", "admission_wait_s"])


def test_inventory_equals_the_simulator(collected: tuple[str, Warehouse, Any], sim: Any) -> None:
    _, wh, _ = collected
    inv = sim.inventory()
    gpus = wh.query("SELECT uuid, node, model, sharing_mode FROM gpus ORDER BY uuid")
    assert gpus.rows() == inv["gpus"].select("uuid", "node", "model", "sharing_mode").sort("uuid").rows()
    mig = wh.query("SELECT uuid, gpu_i_id, profile FROM mig_instances ORDER BY ALL")
    assert mig.rows() == inv["mig_instances"].select("uuid", "gpu_i_id", "profile").unique().sort(
        "uuid", "gpu_i_id", "profile").rows()
    teams = dict(wh.query("SELECT namespace, team FROM namespaces").rows())
    for ns, team in inv["namespaces"].select("namespace", "team").rows():
        assert teams[ns] == team, ns
    pods = {(r[0], r[1]): json.loads(r[2]) for r in wh.query(
        "SELECT namespace, pod, gpu_requests FROM pods").rows()}
    expected = {(r[0], r[1]): json.loads(r[2]) for r in inv["pods"].filter(
        pl.col("start_ts") < WINDOW.end).select("namespace", "pod", "gpu_requests").rows()}
    assert pods.keys() == expected.keys()
    for key, wanted in expected.items():
        assert pods[key] == {k: float(v) for k, v in wanted.items()}, key


@pytest.mark.prometheus
def test_prometheus_scrapes_the_live_simulator(sim: Any, truth: dict[str, pl.DataFrame],
                                               metrics_servers: ServerPool, tmp_path: Path) -> None:
    from gpuledger.simulator.serve import make_server

    real_start = datetime.now(UTC)

    def clock() -> datetime:  # one real second = one simulated minute, from the window start
        elapsed = (datetime.now(UTC) - real_start).total_seconds()
        return WINDOW.start + timedelta(minutes=int(elapsed))

    server = make_server(sim, "127.0.0.1", 0, clock=clock)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        target = server.url.removeprefix("http://").removesuffix("/metrics")
        prom = metrics_servers.scraping_prometheus([target], interval="2s")
        step = timedelta(seconds=4)
        deadline = time.monotonic() + 90
        first = prom.first_scrape()
        assert first is not None, "Prometheus never scraped the simulator"
        start = floor_time(datetime.fromtimestamp(first, UTC), step) + step
        window = Window(start, start + 3 * step, step)
        while datetime.now(UTC) < window.end + step and time.monotonic() < deadline:
            time.sleep(0.5)
        with Warehouse.open(tmp_path / "live.duckdb") as wh:
            collect_window(wh, Settings(prometheus={"step": "4s", "retries": 0}), prom.url, window)
            stored = wh.query("SELECT ts, uuid, gpu_i_id, vgpu, node, namespace, pod FROM gpu_samples")
    finally:
        server.shutdown()
        server.server_close()
    # Each collected instant shows exactly the devices (and holders) of one simulated minute.
    by_minute = {
        ts: set(group.select("uuid", "gpu_i_id", "vgpu", "namespace", "pod").rows())
        for (ts,), group in truth["gpu_samples"].group_by("ts")
    }
    assert stored["ts"].n_unique() == 3
    for (_ts,), group in stored.group_by("ts"):
        got = set(group.select("uuid", "gpu_i_id", "vgpu", "namespace", "pod").rows())
        assert any(got == expected for expected in by_minute.values()), sorted(got)[:5]
