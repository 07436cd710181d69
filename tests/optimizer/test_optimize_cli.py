"""`gpuledger optimize` and `gpuledger plans list|show` over a real warehouse and real files.

Cases:
- what-if run from the example files prints the diff, stores the plan as `proposed`, and
  `plans show --format json` returns it with mig-parted entries in NVIDIA's field names;
- `--no-save` stores nothing; `--format json` prints the plan JSON;
- bad input (impossible layout, unknown profile, --fleet without --demand) exits 2 with one
  line on stderr, no traceback;
- from a simulator warehouse: the fleet is the MIG pool, each GPU's layout is the one its node's
  `nvidia.com/mig.config` names in the simulator spec, busy pods come from the last samples;
  observed demand equals a direct count of the instances that held pods in the lookback;
  `--pool` plans exclusive cards as whole; the right-sized demand (analytics) is used when
  present and says so; `optimize mig` and `optimize quota` store proposed plans that
  `plans list` shows;
- quota what-if from files (queues YAML + history CSV); with three weeks of history the plan is
  backtested and proposed, a second run supersedes the first, `--backtest` stores nothing,
  and `plans export latest` prints the ClusterQueue manifests with the planned numbers.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
import yaml

from gpuledger.cli import main
from gpuledger.core.config import Settings
from gpuledger.core.window import Window
from gpuledger.optimizer.mig.observed import load_fleet_from_warehouse, observed_demand, recommended_demand
from gpuledger.optimizer.plan.store import list_plans
from gpuledger.warehouse import LoadBatch, Warehouse

REPO = Path(__file__).resolve().parents[2]
FLEET = str(REPO / "examples/whatif-fleet.yaml")
DEMAND = str(REPO / "examples/whatif-demand.yaml")


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_what_if_from_files_is_stored_and_shown(tmp_path, capsys):
    wh = str(tmp_path / "w.duckdb")
    code, out, _ = cli(capsys, "--warehouse", wh, "optimize", "mig", "--fleet", FLEET, "--demand", DEMAND,
                       "--time-limit", "10")
    assert code == 0
    assert "nvidia.com/mig.config" in out and "stored as proposed" in out
    plan_id = out.rsplit("gpuledger plans show ", 1)[1].strip()
    code, out, _ = cli(capsys, "--warehouse", wh, "plans", "list")
    assert code == 0 and plan_id in out and "proposed" in out
    code, out, _ = cli(capsys, "--warehouse", wh, "plans", "show", plan_id, "--format", "json")
    body = json.loads(out)
    assert body["status"] == "proposed" and body["kind"] == "mig"
    entry = body["changes"]["nodes"][0]["mig_parted"][0]
    assert set(entry) == {"devices", "mig-enabled", "mig-devices"}
    code, out, _ = cli(capsys, "--warehouse", wh, "plans", "show", plan_id)
    assert code == 0 and "before" in out and "after" in out


def test_no_save_and_json(tmp_path, capsys):
    wh = tmp_path / "w.duckdb"
    code, out, _ = cli(capsys, "--warehouse", str(wh), "optimize", "mig", "--fleet", FLEET, "--demand", DEMAND,
                       "--no-save", "--format", "json")
    assert code == 0 and json.loads(out)["kind"] == "mig"
    assert not wh.exists()


@pytest.mark.parametrize(("fleet", "message"), [
    ({"nodes": [{"name": "n", "model": "H100-80GB", "gpus": 1, "layout": {"7g.80gb": 1, "1g.10gb": 1}}]},
     "impossible on a H100-80GB GPU"),
    ({"nodes": [{"name": "n", "model": "H100-80GB", "gpus": 1, "layout": {"2g.10gb": 1}}]},
     "'2g.10gb' does not exist on H100-80GB"),
])
def test_bad_input_is_one_line(tmp_path, capsys, fleet, message):
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(fleet))
    code, out, err = cli(capsys, "--warehouse", str(tmp_path / "w.duckdb"), "optimize", "mig",
                         "--fleet", str(path), "--demand", DEMAND)
    assert code == 2 and not out
    assert err.count("\n") == 1 and message in err and "Traceback" not in err


def test_fleet_needs_demand(tmp_path, capsys):
    code, _, err = cli(capsys, "--warehouse", str(tmp_path / "w.duckdb"), "optimize", "mig", "--fleet", FLEET)
    assert code == 2 and "--fleet needs --demand" in err


# The simulator's warehouse ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def sim_warehouse(tmp_path_factory) -> Path:
    from gpuledger.simulator.engine import Simulation
    from gpuledger.simulator.fleet import FleetSpec

    path = tmp_path_factory.mktemp("sim") / "w.duckdb"
    window = Window(datetime(2026, 10, 5, tzinfo=UTC), datetime(2026, 10, 6, tzinfo=UTC))
    sim = Simulation(FleetSpec.default(gpus=64), window, seed=7)
    with Warehouse.open(path) as wh:
        wh.load(LoadBatch(frames=sim.inventory()))
        for chunk, frames in sim.batches(chunk=timedelta(days=1)):
            wh.load(LoadBatch(frames=frames, window=chunk))
    return path


def test_fleet_from_warehouse_matches_the_simulator(sim_warehouse):
    from gpuledger.simulator.fleet import FleetSpec

    pools = {p.name: p for p in FleetSpec.default(gpus=64).pools}
    with Warehouse.open(sim_warehouse, read_only=True) as wh:
        fleet = load_fleet_from_warehouse(wh)
        nodes = {r["node"]: r for r in wh.query("SELECT node, pool, mig_config FROM nodes").iter_rows(named=True)}
        last = wh.scalar("SELECT max(ts) FROM gpu_samples")
        busy = wh.query("SELECT uuid, count(*) AS n FROM gpu_samples WHERE ts = ? AND pod IS NOT NULL GROUP BY uuid",
                        [last])
    assert fleet.gpus and all(nodes[g.node]["pool"] == "a100-mig" for g in fleet.gpus)
    for g in fleet.gpus:
        named = pools["a100-mig"].mig_configs[nodes[g.node]["mig_config"]]
        assert dict(g.config or ()) == named
    counts = {r["uuid"]: r["n"] for r in busy.iter_rows(named=True)}
    assert {g.uuid: len(g.busy) for g in fleet.gpus if g.busy} == {
        u: n for u, n in counts.items() if u in {g.uuid for g in fleet.gpus}}


def test_observed_demand_and_pools(sim_warehouse):
    with Warehouse.open(sim_warehouse, read_only=True) as wh:
        fleet = load_fleet_from_warehouse(wh)
        demand = observed_demand(wh, fleet, timedelta(hours=6))
        last = wh.scalar("SELECT max(ts) FROM gpu_samples")
        direct = wh.query(
            "SELECT mig_profile, count(DISTINCT (uuid, gpu_i_id)) AS n FROM gpu_samples WHERE ts > ? AND ts <= ? "
            "AND pod IS NOT NULL AND gpu_i_id >= 0 GROUP BY mig_profile", [last - timedelta(hours=6), last])
        whole = load_fleet_from_warehouse(wh, pools=["h100-train"])
    assert dict(demand.for_model("A100-80GB").profiles) == {
        r["mig_profile"]: r["n"] for r in direct.iter_rows(named=True)}
    assert whole.gpus and all(g.config is None and g.model == "H100-80GB" for g in whole.gpus)


def test_right_sized_demand_is_used_and_named(sim_warehouse):
    with Warehouse.open(sim_warehouse, read_only=True) as wh:
        fleet = load_fleet_from_warehouse(wh)
        demand = recommended_demand(wh, fleet, Settings(), timedelta(days=1))
    assert demand is not None and "rightsized_demand" in demand.source
    assert all(d.model == "A100-80GB" for d in demand.models)


def test_optimize_from_warehouse_stores_proposed_plans(sim_warehouse, tmp_path, capsys):
    copy = tmp_path / "w.duckdb"
    copy.write_bytes(sim_warehouse.read_bytes())
    code, out, err = cli(capsys, "--warehouse", str(copy), "optimize", "mig", "--lookback", "1d",
                         "--time-limit", "10")
    assert code == 0, err
    assert "rightsized_demand" in out
    code, out, err = cli(capsys, "--warehouse", str(copy), "optimize", "quota", "--lookback", "1d",
                         "--horizon", "1d", "--time-limit", "10")
    assert code == 0, err
    # one day of history leaves nothing to hold out: the plan is shown, nothing is proposed
    assert "not tested out of sample" in out and "nothing proposed:" in out
    with Warehouse.open(copy, read_only=True) as wh:
        records = list_plans(wh, "proposed")
    assert sorted(r.plan.kind for r in records) == ["mig"]


def test_quota_what_if_from_files(tmp_path, capsys):
    spec = lambda n: {"cohortName": "all", "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [  # noqa: E731
        {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": n}]}]}]}
    queues = {"clusterQueues": [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "a"}, "spec": spec(4)},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "b"}, "spec": spec(4)},
    ]}
    (tmp_path / "queues.yaml").write_text(yaml.safe_dump(queues))
    start = datetime(2026, 10, 5, tzinfo=UTC)
    ts = [start + timedelta(hours=i) for i in range(24 * 7)]
    frame = pl.concat([
        pl.DataFrame({"ts": ts, "cluster_queue": "a", "flavor": "h100", "resource": "nvidia.com/gpu",
                      "demand": [7.0 if 8 <= t.hour < 20 else 1.0 for t in ts]}),
        pl.DataFrame({"ts": ts, "cluster_queue": "b", "flavor": "h100", "resource": "nvidia.com/gpu",
                      "demand": [1.0 for _ in ts]}),
    ])
    frame.write_csv(tmp_path / "history.csv")
    code, out, err = cli(capsys, "--warehouse", str(tmp_path / "w.duckdb"), "optimize", "quota",
                         "--queues", str(tmp_path / "queues.yaml"), "--history", str(tmp_path / "history.csv"),
                         "--format", "json", "--no-save")
    assert code == 0, err
    body = json.loads(out)
    new = {q["cluster_queue"]: q["new_nominal"] for q in body["changes"]["quotas"]}
    assert new["a"] > new["b"] and new["a"] + new["b"] <= 8


def test_quota_backtest_supersede_and_export(tmp_path, capsys):
    spec = lambda n: {"cohortName": "all", "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [  # noqa: E731
        {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": n}]}]}]}
    queues = {"clusterQueues": [{"metadata": {"name": q, "resourceVersion": "1"}, "spec": spec(4)} for q in "ab"]}
    (tmp_path / "queues.yaml").write_text(yaml.safe_dump(queues))
    ts = [datetime(2026, 10, 5, tzinfo=UTC) + timedelta(hours=i) for i in range(24 * 21)]
    pl.concat([pl.DataFrame({"ts": ts, "cluster_queue": q, "flavor": "h100", "resource": "nvidia.com/gpu",
                             "demand": d}) for q, d in (("a", 7.0), ("b", 1.0))]).write_csv(tmp_path / "h.csv")
    base = ("--warehouse", str(tmp_path / "w.duckdb"))
    args = (*base, "optimize", "quota", "--queues", str(tmp_path / "queues.yaml"), "--history",
            str(tmp_path / "h.csv"), "--time-limit", "20")
    code, out, err = cli(capsys, *args, "--backtest")
    assert code == 0, err
    assert "under contention (no borrowing) pending GPU-hours 1,008.0 → 0.0" in out and "stored" not in out
    code, first, err = cli(capsys, *args)
    assert code == 0 and "stored as proposed" in first, err
    code, second, err = cli(capsys, *args)
    assert code == 0 and "supersedes quota-" in second, err
    with Warehouse.open(tmp_path / "w.duckdb", read_only=True) as wh:
        assert [r.status for r in list_plans(wh)] == ["proposed", "superseded"]
    code, out, err = cli(capsys, *base, "plans", "export", "latest", "-o", "yaml")
    assert code == 0, err
    docs = list(yaml.safe_load_all(out))
    assert [(d["kind"], d["metadata"]["name"]) for d in docs] == [("ClusterQueue", "a"), ("ClusterQueue", "b")]
    assert [d["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] for d in docs] == [7, 1]
    code, out, err = cli(capsys, *args, "--origins", "0")
    assert code == 2 and "--origins/--held-out" in err and "Traceback" not in err


def test_serving_pods_are_marked_from_their_owner(sim_warehouse):
    """A pod is serving when its owner is a ReplicaSet (a Deployment's) or a StatefulSet and
    it is no notebook server, counted here straight from the pods table."""
    with Warehouse.open(sim_warehouse, read_only=True) as wh:
        fleet = load_fleet_from_warehouse(wh)
        rows = wh.query("SELECT namespace, pod, owner_kind, coalesce(labels, '') AS labels FROM pods")
    owners = {(r["namespace"], r["pod"]): (r["owner_kind"], r["labels"]) for r in rows.iter_rows(named=True)}
    busy = [b for g in fleet.gpus for b in g.busy]
    assert any(b.serving for b in busy) and not all(b.serving for b in busy)
    for b in busy:
        kind, labels = owners.get((b.namespace, b.pod), (None, ""))
        if "notebook" in labels:
            assert not b.serving, b
        elif "serving" not in labels and "inference" not in labels:
            assert b.serving == (kind in ("ReplicaSet", "StatefulSet")), b
