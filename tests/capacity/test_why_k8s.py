"""`why` and `capacity` on the real kube-apiserver (Kueue and Volcano CRDs installed).

The simulator's pending scenario (`simulator.pending`) is created as upstream writes it: pods
with `PodScheduled=False` and `FailedScheduling` events, a preemptor with `nominatedNodeName`,
an unallocated ResourceClaim, Kueue Workloads with `QuotaReserved=False`/`Evicted` conditions
and ClusterQueues with `status.flavorsReservation`, Volcano PodGroups with `Unschedulable`
conditions. The Kubernetes collector reads them, the warehouse stores them (v013), and:
- every pending object gets the class the scenario's ground truth (`EXPECTED`) names;
- the quota verdict names the ClusterQueue and the queue borrowing its cohort's quota, and
  suggests the namespace's other LocalQueue whose ClusterQueue has room;
- the fragmentation verdict names the card where the 3g fits (a layout change), which the
  capacity table lists as placeable there;
- objects that run (the holders) are not pending;
- the CLI: `gpuledger why` (all, one by name, an unknown name in one line), `gpuledger capacity`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuledger.cli import main
from gpuledger.dashboards.capacity_data import fleet_now
from gpuledger.simulator import pending as scenario
from tests.actuator.conftest import make_settings
from tests.capacity.scenario import collect_into
from tools.kube_loader import load_manifests

PREFIX, NS = "why", "why-team"


@pytest.fixture(scope="module")
def warehouse(volcano_cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    api = volcano_cluster.api_client()
    path = tmp_path_factory.mktemp("why") / "wh.duckdb"
    try:
        load_manifests(api, scenario.manifests(PREFIX, NS))
        collect_into(api, make_settings(), path, PREFIX, NS).close()
    finally:
        api.close()
    yield path


def test_why_classifies_each_pending_workload(warehouse: Path) -> None:
    from gpuledger.warehouse import Warehouse

    with Warehouse.open(warehouse, read_only=True) as wh:
        fleet = fleet_now(wh, make_settings())
    verdicts = {f"{v.kind}/{v.name}": v for v in fleet.verdicts() if v.namespace == NS}
    assert {k: v.reason for k, v in verdicts.items()} == scenario.EXPECTED

    quota = verdicts["Workload/wl-quota"].detail
    assert f"ClusterQueue {PREFIX}-research" in quota and f"borrowed by {PREFIX}-vision" in quota
    assert "2 more needed" in quota
    assert fleet.at is not None
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


def run(capsys: pytest.CaptureFixture[str], warehouse: Path, *args: str) -> str:
    code = main(["--warehouse", str(warehouse), *args])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_why_cli_lists_names_and_refuses_in_one_line(capsys: pytest.CaptureFixture[str], warehouse: Path) -> None:
    doc = json.loads(run(capsys, warehouse, "why", "-o", "json"))
    assert doc["schema"] == "gpuledger.why/v1"
    assert {f"{r['kind']}/{r['name']}": r["reason"] for r in doc["waiting"]} == scenario.EXPECTED
    [research] = [q for q in doc["by_queue"] if q["queue"] == "research"]
    assert research["waiting"] == sum(1 for r in doc["waiting"] if r["queue"] == "research")
    one = json.loads(run(capsys, warehouse, "why", f"{NS}/frag-3g", "-o", "json"))
    assert [r["reason"] for r in one["waiting"]] == ["stranded by fragmentation"]
    table = run(capsys, warehouse, "why", "wl-quota")
    assert "quota exhausted" in table and "spare" in table

    assert main(["--warehouse", str(warehouse), "why", "no-such-pod"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no-such-pod" in err[0]


def test_capacity_cli(capsys: pytest.CaptureFixture[str], warehouse: Path) -> None:
    doc = json.loads(run(capsys, warehouse, "capacity", "-o", "json"))
    assert doc["schema"] == "gpuledger.capacity/v1"
    # the scenario's nodes only: the session's apiserver may hold other tests' fleets too
    [three] = [r for r in doc["capacity"] if r["shape"] == "mig 3g.40gb"
               and all(n.startswith(PREFIX) for n in r["nodes"])]
    assert three["placeable"] == 1 and three["nodes"] == [f"{PREFIX}-mig-1"]
    research = next(q for q in doc["queues"] if q["cluster_queue"] == f"{PREFIX}-research")
    assert (research["nominal"], research["used"], research["free"]) == (4, 4, 0)
    assert research["borrowers"] == [f"{PREFIX}-vision"]
    table = run(capsys, warehouse, "capacity", "--shape", "3g")
    assert "mig 3g.40gb" in table and "mig 1g.10gb" not in table


def test_api_capacity_and_why_with_lead_scope(warehouse: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """`/api/v1/capacity` is the CLI's document; `/api/v1/why` gives a lead their team's waits
    only (the scenario's namespace is team nlp, the lead's; `?team=vision` is refused)."""
    import shutil

    from gpuledger.dashboards.app import create_app, start_server
    from tests.dashboards.conftest import admin_headers, lead_headers, settings_with_roles, store_results
    from tests.dashboards.test_api import get

    path = tmp_path / "api.duckdb"
    shutil.copyfile(warehouse, path)
    cli = json.loads(run(capsys, path, "capacity", "-o", "json"))
    server = start_server(create_app(settings_with_roles(), store_results(path), cache_dir=tmp_path / "cache",
                                     background=False), "127.0.0.1", 0)
    try:
        status, doc = get(server, "/api/v1/capacity", admin_headers())
        assert status == 200 and {k: v for k, v in doc.items() if k != "scope"} == cli
        status, lead = get(server, "/api/v1/why", lead_headers())
        assert status == 200 and lead["scope"] != "fleet"
        assert {r["name"] for r in lead["waiting"]} == {k.split("/")[1] for k in scenario.EXPECTED}
        assert lead["by_shape"] == []  # fleet data: withheld from a lead
        status, _ = get(server, "/api/v1/why?team=vision", lead_headers())
        assert status == 403
        status, one = get(server, "/api/v1/why?name=wl-quota", admin_headers())
        assert status == 200 and [r["reason"] for r in one["waiting"]] == ["quota exhausted"]
        status, bad = get(server, "/api/v1/why?name=nope", admin_headers())
        assert status == 400 and "nope" in bad["error"]
    finally:
        server.stop()


def test_notebook_facade(warehouse: Path) -> None:
    import polars as pl

    import gpuledger

    gl = gpuledger.open(warehouse)
    frame = gl.capacity()
    three = frame.filter((frame["shape"] == "mig 3g.40gb")
                         & frame["nodes"].list.eval(pl.element().str.starts_with(PREFIX)).list.all())
    assert three["placeable"].to_list() == [1] and three["nodes"].to_list() == [[f"{PREFIX}-mig-1"]]
    assert gl.why("wl-quota")["reason"].to_list() == ["quota exhausted"]
    assert sorted(gl.why()["name"].to_list()) == sorted(k.split("/")[1] for k in scenario.EXPECTED)
