"""`why` on the real kube-apiserver (Kueue and Volcano CRDs installed).

The simulator's pending scenario (`simulator.pending`) is created as upstream writes it: pods
with `PodScheduled=False` and `FailedScheduling` events, a preemptor with `nominatedNodeName`,
an unallocated ResourceClaim, Kueue Workloads with `QuotaReserved=False`/`Evicted` conditions
and ClusterQueues with `status.flavorsReservation`, Volcano PodGroups with `Unschedulable`
conditions. The Kubernetes collector reads them, the warehouse stores them (v016), and:
- every pending object gets the class the scenario's ground truth (`EXPECTED`) names;
- the quota verdict names the ClusterQueue and the queue borrowing its cohort's quota, and
  suggests the namespace's other LocalQueue whose ClusterQueue has room;
- the fragmentation verdict names the card where the 3g fits (a layout change), which the
  capacity table lists as placeable there;
- objects that run (the holders) are not pending.
"""

from __future__ import annotations

from pathlib import Path

from gpuledger.dashboards.capacity_data import fleet_now
from gpuledger.simulator import pending as scenario
from tests.actuator.conftest import make_settings
from tests.capacity.scenario import collect_into
from tools.kube_loader import load_manifests

PREFIX, NS = "why", "why-team"


def test_why_classifies_each_pending_workload(volcano_cluster, tmp_path: Path) -> None:
    api = volcano_cluster.api_client()
    settings = make_settings()
    try:
        load_manifests(api, scenario.manifests(PREFIX, NS))
        wh = collect_into(api, settings, tmp_path / "wh.duckdb", PREFIX, NS)
    finally:
        api.close()
    with wh:
        fleet = fleet_now(wh, settings)
    verdicts = {f"{v.kind}/{v.name}": v for v in fleet.verdicts() if v.namespace == NS}
    assert {k: v.reason for k, v in verdicts.items()} == scenario.EXPECTED

    quota = verdicts["Workload/wl-quota"].detail
    assert f"ClusterQueue {PREFIX}-research" in quota and f"borrowed by {PREFIX}-vision" in quota
    assert "2 more needed" in quota
    rows_by_name = {r["name"]: r for r in fleet.why_rows(fleet.at) if r["namespace"] == NS}
    assert rows_by_name["wl-quota"]["suggestion"] == "kueue.x-k8s.io/queue-name: research → spare"
    assert rows_by_name["wl-quota"]["gpus"] == 2 and rows_by_name["h200-only"]["suggestion"] is None
    frag = verdicts["Pod/frag-3g"]
    assert frag.cards == (f"GPU-{PREFIX}-1",) and "3g.40gb" in frag.detail

    rows = {r.shape: r for r in fleet.capacity if r.pool == "train"}
    # 3g: mig-0's one instance is held (1 - 1 = 0 ready); it fits beside mig-1's four 1g only
    assert rows["mig 3g.40gb"].ready == 0 and rows["mig 3g.40gb"].placeable == 1
    assert rows["mig 3g.40gb"].nodes == (f"{PREFIX}-mig-1",)
    # 1g: ready (1 - 1) + (4 - 2); a fifth 1g fits beside both cards' instances
    assert rows["mig 1g.10gb"].ready == 2 and rows["mig 1g.10gb"].placeable == 2
    # whole GPUs: the full node's 8 are all requested
    assert "whole GPU" not in rows
