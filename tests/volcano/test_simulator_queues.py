"""The simulator's Volcano queue metrics, and one queue system per pod.

A 40-card default fleet (its H100 training pool queued by Volcano):
- every pod that names a queue is counted by exactly one system: the Volcano pool's pods by
  the Volcano Queues, the others by Kueue; Kueue's usage of the Volcano pool's flavor is zero;
- each Volcano Queue's allocated GPUs and waiting PodGroups per step equal a plain loop over
  the schedule's pods (start <= step < end; start - wait <= step < start);
- the `volcano_queue_*` series, written to an OpenMetrics file, backfilled into a real
  Prometheus and collected with `queues.systems: [kueue, volcano]`, give back those rows;
- on a warehouse loaded as the demo loads it, `optimize quota --queue-system volcano` (a real
  subprocess) plans the Volcano Queues from that demand.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl
import pytest

from gpuledger.core.window import Window
from gpuledger.simulator.engine import Simulation
from gpuledger.simulator.fleet import FleetSpec
from gpuledger.simulator.volcano_queues import counted_gpus
from gpuledger.warehouse import LoadBatch, Warehouse
from tests.volcano.conftest import ROOT

SHORT = Window(datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 1, 12, tzinfo=UTC))
FAMILIES = ("volcano_queue_allocated_scalar_resources", "volcano_queue_deserved_scalar_resources",
            "volcano_queue_pod_group_pending_count", "volcano_queue_pod_group_inqueue_count",
            "kueue_cluster_queue_resource_usage", "kueue_cluster_queue_nominal_quota",
            "kueue_pending_workloads")


@pytest.fixture(scope="module")
def sim() -> Simulation:
    return Simulation(FleetSpec.default(gpus=40), SHORT, seed=7)


def _volcano(sim: Simulation, p: int) -> bool:
    return sim.spec.pools[sim.schedule.pods.pool[p]].queue_system == "volcano"


def _loop_truth(sim: Simulation, steps: list[int]) -> dict[tuple[str, int], tuple[float, float]]:
    """(queue, step) → (allocated GPUs, waiting PodGroups), by plain loops over the pods."""
    pods, waits = sim.schedule.pods, sim.schedule.pods.wait_s
    out: dict[tuple[str, int], tuple[float, float]] = {}
    for k in steps:
        used: dict[str, float] = {}
        waiting: dict[str, set[tuple[int, str]]] = {}
        for p in range(len(pods)):
            if not (_volcano(sim, p) and pods.queue[p]):
                continue
            q = str(pods.queue[p])
            used.setdefault(q, 0.0)
            waiting.setdefault(q, set())
            if pods.start[p] <= k < pods.end[p]:
                used[q] += counted_gpus(pods.requests[p])
            wait_steps = int(np.ceil(waits[p] / sim.tb.step_s))
            if pods.start[p] - wait_steps <= k < pods.start[p]:
                waiting[q].add((pods.namespace[p], pods.owner_name[p]))
        out.update({(q, k): (used[q], float(len(waiting[q]))) for q in used})
    return out


def test_each_pod_counts_for_exactly_one_queue_system(sim):
    pods, kueue, volcano = sim.schedule.pods, sim.queues, sim.volcano_queues
    queued = [p for p in range(len(pods)) if pods.queue[p]]
    assert any(_volcano(sim, p) for p in queued) and not all(_volcano(sim, p) for p in queued)
    for p in queued:
        by_volcano, by_kueue = volcano.pod_queue[p] >= 0, kueue.pod_cq[p] >= 0
        assert by_volcano != by_kueue, pods.name[p]
        assert by_volcano == _volcano(sim, p), pods.name[p]
    frame = sim.step_frames(0, sim.tb.steps)["queue_samples"]
    pool = next(p.name for p in sim.spec.pools if p.queue_system == "volcano")
    assert frame.filter(pl.col("flavor") == pool)["usage"].sum() == 0
    assert frame.filter(pl.col("flavor") == "default")["usage"].sum() > 0


def test_volcano_queue_samples_match_a_loop_over_pods(sim):
    frame = sim.step_frames(0, sim.tb.steps)["queue_samples"].filter(pl.col("flavor") == "default")
    steps = list(range(0, sim.tb.steps, 17))
    want = _loop_truth(sim, steps)
    got = {(q, sim.tb.index(ts)): (u, w) for ts, q, u, w in
           frame.select("ts", "cluster_queue", "usage", "pending_workloads").iter_rows()}
    assert {q for q, _ in want} == set(sim.volcano_queues.names) and len(want) >= 2 * len(steps)
    assert any(w > 0 for _, w in want.values()) and any(u > 0 for u, _ in want.values())
    for key, value in want.items():
        assert got[key] == value, key
    deserved = dict(zip(sim.volcano_queues.names, sim.volcano_queues.deserved, strict=True))
    stored = sim.inventory()["queues"].filter(pl.col("kind") == "Queue")
    objects = {name: json.loads(spec)["deserved"]["nvidia.com/gpu"]
               for name, spec in stored.select("name", "spec").iter_rows()}
    assert deserved == pytest.approx(objects)


@pytest.mark.prometheus
def test_volcano_series_collected_through_prometheus(sim, metrics_servers, tmp_path):
    from gpuledger.collect_pipeline import collect_window
    from gpuledger.core.config import Settings

    counts = sim.write_openmetrics(tmp_path / "queues.om", families=FAMILIES)
    assert all(counts[f] > 0 for f in FAMILIES[:4])
    server = metrics_servers.prometheus(tmp_path / "queues.om")
    settings = Settings(queues={"systems": ["kueue", "volcano"]},
                        prometheus={"chunk": "6h", "retries": 1, "timeout_s": 20})
    window = Window(SHORT.start + timedelta(hours=1), SHORT.end - timedelta(hours=1))
    with Warehouse.open(tmp_path / "wh.duckdb") as wh:
        collect_window(wh, settings, server.url, window, require_series=False,
                       now=lambda: SHORT.end + timedelta(hours=1))
        rows = wh.query("SELECT ts, cluster_queue, usage, nominal_quota, pending_workloads FROM queue_samples "
                        "WHERE flavor = 'default' ORDER BY ALL").rows()
        kueue = wh.query("SELECT count(*) FROM queue_samples WHERE flavor <> 'default'").rows()
    assert kueue[0][0] > 0
    steps = sorted({sim.tb.index(ts) for ts, *_ in rows})
    want = _loop_truth(sim, steps)
    deserved = dict(zip(sim.volcano_queues.names, sim.volcano_queues.deserved, strict=True))
    assert len(rows) == len(want) >= 2 * 60
    for ts, queue, usage, quota, pending in rows:
        assert (usage, pending) == want[(queue, sim.tb.index(ts))], (ts, queue)
        assert quota == deserved[queue]


def test_volcano_quota_plan_from_the_demo_load_sees_demand(tmp_path):
    window = Window(datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 4, tzinfo=UTC))
    fleet = Simulation(FleetSpec.default(gpus=40), window, seed=7)
    path = tmp_path / "wh.duckdb"
    with Warehouse.open(path) as wh:
        wh.load(LoadBatch(frames=fleet.inventory()))
        for chunk, frames in fleet.batches():
            wh.load(LoadBatch(frames=frames, window=chunk))
    result = subprocess.run(
        [sys.executable, "-m", "gpuledger", "optimize", "quota", "--queue-system", "volcano", "--lookback",
         "3d", "--no-save", "--time-limit", "30", "-o", "json", "--warehouse", str(path)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr[-2000:]
    plan = json.loads(result.stdout)
    assert {(o["kind"], o["name"]) for o in plan["observed"]} == {("Queue", q) for q in fleet.volcano_queues.names}
    quotas = plan["changes"]["quotas"]
    assert {q["flavor"] for q in quotas} == {"default"}
    assert sum(q["new_nominal"] for q in quotas) == sum(q["old_nominal"] for q in quotas)
    in_sample = plan["baselines"][0]["figures"]
    assert in_sample["pending_gpu_minutes_before"] > 0  # demand beyond the quotas was seen
