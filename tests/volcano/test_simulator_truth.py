"""The bill by priority class and the preemption losses against the simulator's ground truth.

A 40-card default fleet (its H100 training pool queued by Volcano) over two days, loaded from
`sim.inventory()` and `sim.batches()` into a real warehouse file:
- card-hours per PriorityClass on the bill (`--by priority_class`) within 0.5 % of the truth
  (`Simulation.ground_truth()` per pod, joined to each pod's class as the simulator drew it),
  the lines still conserved to the cent;
- every victim's lost GPU-hours equal the schedule's own figure (GPUs x (end - max(start,
  checkpoint))), and the bill's preemption lines per (team, queue, priority class) sum them,
  priced at the model's list price;
- the Volcano pool's Queues and PodGroups are in table `queues`;
- the admit-before-run recommendation flags exactly the queues whose losses pass the share.
"""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl
import pytest

from gpuledger.analytics.advice.preemption import admit_before_run
from gpuledger.analytics.billing.bill import compute_bill
from gpuledger.analytics.billing.preemption import preemption_losses
from gpuledger.core.config import Settings
from gpuledger.core.pricing import PriceBook
from gpuledger.core.window import Window
from gpuledger.simulator.engine import Simulation
from gpuledger.simulator.fleet import FleetSpec
from gpuledger.simulator.volcano import preemption_truth, priorities, victims
from gpuledger.warehouse import LoadBatch, Warehouse
from tests.analytics.conftest import assert_conserved
from tests.volcano.conftest import ROOT

WINDOW = Window(datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 3, tzinfo=UTC))


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    sim = Simulation(FleetSpec.default(gpus=40), WINDOW, seed=7)
    path = tmp_path_factory.mktemp("volcano") / "wh.duckdb"
    with Warehouse.open(path) as wh:
        wh.load(LoadBatch(frames=sim.inventory()))
        for chunk, frames in sim.batches():
            wh.load(LoadBatch(frames=frames, window=chunk))
    return sim, path


def test_bill_by_priority_class_matches_truth(world):
    sim, path = world
    with Warehouse.open(path, read_only=True) as wh:
        bill = compute_bill(wh, WINDOW, Settings(), ("team", "priority_class"))
    assert_conserved(bill)
    pods = sim.schedule.pods
    classes = pl.DataFrame({
        "namespace": [sim.tenants.namespaces[i].name for i in pods.namespace], "pod": pods.name,
        "cls": [c or "(none)" for c, _ in priorities(sim)]})
    truth = (sim.ground_truth().filter(pl.col("allocation_state") == "allocated")
             .join(classes, on=["namespace", "pod"], how="left")
             .group_by("cls").agg(pl.col("card_hours").sum()))
    billed = (bill.lines.filter(pl.col("priority_class").is_not_null())
              .group_by("priority_class").agg(pl.col("card_hours").sum()))
    want = dict(truth.iter_rows())
    got = dict(billed.iter_rows())
    assert set(got) == set(want) and len(want) >= 4
    for cls, hours in want.items():
        assert got[cls] == pytest.approx(hours, rel=0.005), cls


def test_preemption_losses_match_truth(world):
    sim, path = world
    truth = preemption_truth(sim)
    assert truth.height >= 10 and truth["lost_gpu_hours"].sum() > 0
    with Warehouse.open(path, read_only=True) as wh:
        losses = preemption_losses(wh, WINDOW, Settings())
        bill = compute_bill(wh, WINDOW, Settings(), ("team",))
        kinds = set(wh.query("SELECT DISTINCT kind FROM queues")["kind"].to_list())
    assert {"Queue", "PodGroup", "ClusterQueue"} <= kinds
    joined = truth.join(losses, on=["namespace", "pod"], how="full", coalesce=True, suffix="_got")
    assert joined.height == truth.height == losses.height
    for row in joined.iter_rows(named=True):
        assert row["lost_gpu_hours_got"] == pytest.approx(row["lost_gpu_hours"], abs=1e-9), row["pod"]
        assert (row["queue_got"], row["priority_class_got"]) == (row["queue"], row["priority_class"])
    book = PriceBook(Settings())
    price = {m: next(iter(book.spans(m, WINDOW))).unit_price for m in truth["model"].unique()}
    share = _card_share_per_gpu(sim, "compute")
    assert min(share.values()) < 1  # MIG victims: priced at their share, not a whole card
    want_cost = sum(r["lost_gpu_hours"] * share[r["pod"]] * price[r["model"]] for r in truth.iter_rows(named=True))
    assert bill.preemption is not None
    assert float(bill.preemption["lost_cost"].sum()) == pytest.approx(want_cost, rel=1e-9)
    assert float(bill.preemption["lost_gpu_hours"].sum()) == pytest.approx(truth["lost_gpu_hours"].sum())
    assert int(bill.preemption["preemptions"].sum()) == truth.height
    assert bill.to_dict()["preemption"][0]["lost_cost"] == round(float(bill.preemption["lost_cost"][0]), 2)


MEMORY_SLICES = {"1g.5gb": 1, "2g.10gb": 2, "3g.20gb": 4, "4g.20gb": 4, "7g.40gb": 8,
                 "1g.10gb": 1, "2g.20gb": 2, "3g.40gb": 4, "4g.40gb": 4, "7g.80gb": 8}
"""Memory slices (of 8) per A100 MIG profile, from NVIDIA's MIG user guide."""


def _card_share_per_gpu(sim: Simulation, basis: str) -> dict[str, float]:
    """Per victim pod: cards' worth of its request per counted GPU, from the profile names
    (compute: the leading `Ng` of 7 slices; memory: the guide's table, of 8)."""
    pods, out = sim.schedule.pods, {}
    for p in victims(sim):
        cards = count = 0.0
        for key, n in pods.requests[p].items():
            if key == "nvidia.com/gpu":
                cards, count = cards + n, count + n
            elif key.startswith("nvidia.com/mig-"):
                profile = key.removeprefix("nvidia.com/mig-")
                slices = int(profile.split("g.")[0]) / 7 if basis == "compute" else MEMORY_SLICES[profile] / 8
                cards, count = cards + n * slices, count + n
        out[pods.name[p]] = cards / count
    return out


def test_lost_mig_time_is_priced_at_the_instance_share(world):
    sim, path = world
    truth = preemption_truth(sim)
    settings = Settings(sharing={"mig_share_basis": "memory"})
    with Warehouse.open(path, read_only=True) as wh:
        losses = preemption_losses(wh, WINDOW, settings)
    share = _card_share_per_gpu(sim, "memory")
    book = PriceBook(settings)
    price = {m: next(iter(book.spans(m, WINDOW))).unit_price for m in truth["model"].unique()}
    got = {r["pod"]: r for r in losses.iter_rows(named=True)}
    mig = 0
    for row in truth.iter_rows(named=True):
        mine = got[row["pod"]]
        assert mine["lost_gpu_hours"] == pytest.approx(row["lost_gpu_hours"], abs=1e-9)
        assert mine["lost_card_hours"] == pytest.approx(row["lost_gpu_hours"] * share[row["pod"]], abs=1e-9)
        assert mine["lost_cost"] == pytest.approx(mine["lost_card_hours"] * price[row["model"]], rel=1e-9)
        mig += share[row["pod"]] < 1
    assert mig >= 5


def test_admit_before_run_flags_queues_over_the_share(world):
    _sim, path = world
    with Warehouse.open(path, read_only=True) as wh:
        bill = compute_bill(wh, WINDOW, Settings(), ("team", "queue"))
        losses = preemption_losses(wh, WINDOW, Settings())
    spend = bill.detail.group_by("queue").agg(pl.col("cost").sum())
    lost = losses.group_by("queue").agg(pl.col("lost_cost").sum())
    both = lost.join(spend, on="queue").select("queue", "lost_cost", "cost")
    shares = {q: loss / paid for q, loss, paid in both.iter_rows()}
    threshold = sorted(shares.values())[len(shares) // 2]
    advice = admit_before_run(bill, losses, share=threshold)
    assert set(advice["queue"].to_list()) == {q for q, s in shares.items() if s > threshold}
    assert all("admit-before-run would have saved $" in m for m in advice["message"].to_list())


def test_monthly_statement_shows_the_preemption_line(world):
    from gpuledger.reports.compose import build_statements, gather
    from gpuledger.reports.html import render_statement

    sim, path = world
    truth = preemption_truth(sim).group_by("team").agg(pl.col("lost_gpu_hours").sum())
    with Warehouse.open(path, read_only=True) as wh:
        data = gather(wh, Settings(), "2026-11", with_adjustments=False)
    statements = {s.team: s for s in build_statements(data, Settings(), "DRAFT", WINDOW.end)}
    for team, hours in truth.iter_rows():
        if team is not None:
            assert statements[team].totals["lost_gpu_hours"] == pytest.approx(hours, abs=1e-9)
    assert statements[None].totals["lost_gpu_hours"] == pytest.approx(truth["lost_gpu_hours"].sum())
    team = next(t for t, h in truth.iter_rows() if t and h > 0)
    assert "GPU-hours lost to preemption" in render_statement(statements[team])


def test_idle_by_priority_class_matches_truth(world):
    from gpuledger.analytics.billing.priority_class import idle_by

    sim, path = world
    with Warehouse.open(path, read_only=True) as wh:
        bill = compute_bill(wh, WINDOW, Settings(), ("team",))
        idle = idle_by(wh, bill.detail, ("priority_class",))
    pods = sim.schedule.pods
    classes = pl.DataFrame({
        "namespace": [sim.tenants.namespaces[i].name for i in pods.namespace], "pod": pods.name,
        "cls": [c or "(none)" for c, _ in priorities(sim)]})
    truth = (sim.ground_truth().filter(pl.col("allocation_state") == "allocated")
             .join(classes, on=["namespace", "pod"], how="left")
             .group_by("cls").agg(pl.col("idle_card_hours").sum()))
    got = dict(idle.select("priority_class", "idle_card_hours").iter_rows())
    for cls, hours in truth.iter_rows():
        assert got[cls] == pytest.approx(hours, rel=0.02, abs=0.5), cls


def test_idle_command_by_priority_class_matches_workloads_and_truth(world):
    """`gpuledger idle --by priority_class` (a real subprocess): per class, the idle
    card-hours equal the per-workload rows (`--by owner`) summed by each pod's class, and the
    simulator's truth by class."""
    import json
    import os
    import subprocess
    import sys

    sim, path = world

    def idle(by: str) -> list[dict]:
        result = subprocess.run(
            [sys.executable, "-m", "gpuledger", "idle", "--by", by, "--top", "100000", "-o", "json",
             "--start", WINDOW.start.isoformat(), "--end", WINDOW.end.isoformat(), "--warehouse", str(path)],
            capture_output=True, text=True, timeout=300,
            env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=path.parent)
        assert result.returncode == 0, result.stderr[-2000:]
        return json.loads(result.stdout)["workloads"]

    by_class = idle("priority_class")
    assert {r["workload_kind"] for r in by_class} == {"PriorityClass"}
    got = pl.DataFrame(by_class).group_by("workload").agg(pl.col("idle_card_hours").sum())
    got_map = dict(got.iter_rows())
    pods = sim.schedule.pods
    classes = pl.DataFrame({
        "namespace": [sim.tenants.namespaces[i].name for i in pods.namespace], "pod": pods.name,
        "cls": [c or "(none)" for c, _ in priorities(sim)]})
    # Per workload (owner): every pod of one owner has one class (the simulator draws it by
    # workload class), so each owner row sums into exactly one class.
    owners = pl.DataFrame(idle("owner"))
    with Warehouse.open(path, read_only=True) as wh:
        from gpuledger.analytics.workloads.requested import pod_workloads

        owner_of = pod_workloads(wh, "owner")
    owner_class = (owner_of.join(classes, on=["namespace", "pod"], how="left")
                   .group_by("namespace", "workload_kind", "workload").agg(pl.col("cls").unique()))
    assert owner_class["cls"].list.len().max() == 1
    summed = (owners.join(owner_class.with_columns(pl.col("cls").list.first()),
                          on=["namespace", "workload_kind", "workload"], how="left")
              .group_by("cls").agg(pl.col("idle_card_hours").sum()))
    for cls, hours in summed.iter_rows():
        assert got_map[cls] == pytest.approx(hours, abs=1e-3), cls  # JSON rounds to 1e-6
    truth = (sim.ground_truth().filter(pl.col("allocation_state") == "allocated")
             .join(classes, on=["namespace", "pod"], how="left")
             .group_by("cls").agg(pl.col("idle_card_hours").sum()))
    assert len(got_map) >= 4
    for cls, hours in truth.iter_rows():
        assert got_map.get(cls, 0.0) == pytest.approx(hours, rel=0.02, abs=0.5), cls
