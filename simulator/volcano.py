"""A Volcano-queued pool, PriorityClasses and preemptions in the simulated fleet, with truth.

Derived, like everything simulated, from (spec, schedule, seed) and added to the inventory
(`Simulation.inventory`), so nothing the rest of the simulator emits changes:
- pools with `queue_system: volcano` get one Volcano Queue per queue their pods name (the
  same names Kueue's LocalQueues carry, so `pods.queue` and the bill's queue lines stay as
  they are) and a PodGroup per (namespace, owner) of their pods;
- every pod gets a PriorityClass by workload class (`PRIORITY`; namespaces without a team set
  none), in table `pod_priorities`;
- some pods that ended inside the window were preempted at their end (`victims`: a fixed
  share, chosen by a hash of the seed and pod name, never inference): the cards were held and
  billed up to then, and the work since the start, or since the checkpoint every third victim
  took halfway through its run, is lost. Victims in a Volcano pool carry Volcano's source.

`preemption_truth` states the lost GPU-hours per victim straight from the schedule, for tests
to hold the warehouse path (`analytics.billing.preemption`) against.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from datetime import datetime
from typing import TYPE_CHECKING, Any

import polars as pl

from gpuledger.core.frames import QUEUES, polars_schema
from gpuledger.core.frames_preemption import POD_PRIORITIES, PREEMPTIONS
from gpuledger.simulator.truth import CLASS_NAMES
from gpuledger.simulator.volcano_queues import RESOURCE, counted_gpus

if TYPE_CHECKING:
    from gpuledger.simulator.simulated_fleet import SimulatedFleet as Simulation

PRIORITY: dict[str, tuple[str, int]] = {
    "inference": ("production", 100_000), "training": ("training", 10_000),
    "batch_eval": ("batch", 1_000), "small_job": ("batch", 1_000), "notebook": ("experiment", 100),
}
"""Workload class → (PriorityClass, value)."""
VICTIM_ONE_IN = 6
"""About one in this many eligible pods is a victim."""


def priorities(sim: Simulation) -> list[tuple[str, int | None]]:
    """(PriorityClass, value) per pod id; ('', None) in namespaces without a team."""
    pods = sim.schedule.pods
    out: list[tuple[str, int | None]] = []
    for p in range(len(pods)):
        team = sim.tenants.namespaces[pods.namespace[p]].team
        out.append(PRIORITY[CLASS_NAMES[pods.cls[p]]] if team else ("", None))
    return out


def victims(sim: Simulation) -> list[int]:
    """Pod ids preempted at their end (module docstring), in id order."""
    pods, steps = sim.schedule.pods, sim.tb.steps
    chosen = []
    for p in range(len(pods)):
        if CLASS_NAMES[pods.cls[p]] == "inference" or pods.start[p] < 0 or pods.end[p] >= steps:
            continue
        if pods.end[p] <= pods.start[p] or not counted_gpus(pods.requests[p]):
            continue
        digest = hashlib.sha256(f"{sim.seed}:{pods.name[p]}".encode()).digest()
        if digest[0] % VICTIM_ONE_IN == 0:
            chosen.append(p)
    return chosen


def _checkpoint(sim: Simulation, p: int, n: int) -> datetime | None:
    pods = sim.schedule.pods
    return sim.tb.at(pods.start[p] + (pods.end[p] - pods.start[p]) // 2) if n % 3 == 2 else None


def _volcano_pool(sim: Simulation, p: int) -> bool:
    return sim.spec.pools[sim.schedule.pods.pool[p]].queue_system == "volcano"


def preemption_frame(sim: Simulation) -> pl.DataFrame:
    pods, classes, at = sim.schedule.pods, priorities(sim), sim.tb.at(sim.tb.steps)
    rows = []
    for n, p in enumerate(victims(sim)):
        rows.append({
            "namespace": sim.tenants.namespaces[pods.namespace[p]].name, "pod": pods.name[p],
            "preempted_at": sim.tb.at(pods.end[p]),
            "source": "volcano_podgroup" if _volcano_pool(sim, p) else "pod_condition",
            "reason": "Evict" if _volcano_pool(sim, p) else "PreemptionByScheduler",
            "owner_kind": pods.owner_kind[p], "owner_name": pods.owner_name[p],
            "node": sim.hw.nodes[pods.node[p]].name, "queue": pods.queue[p],
            "priority_class": classes[p][0], "gpus": counted_gpus(pods.requests[p]),
            "run_start": sim.tb.at(pods.start[p]), "checkpoint_at": _checkpoint(sim, p, n),
            "observed_at": at,
        })
    return pl.DataFrame(rows, schema=polars_schema(PREEMPTIONS))


def preemption_truth(sim: Simulation) -> pl.DataFrame:
    """Per victim: namespace, pod, team, queue, priority_class, model, lost_gpu_hours."""
    pods, classes, step_h = sim.schedule.pods, priorities(sim), sim.tb.step_s / 3600
    rows = []
    for n, p in enumerate(victims(sim)):
        start = pods.start[p] + ((pods.end[p] - pods.start[p]) // 2 if n % 3 == 2 else 0)
        ns = sim.tenants.namespaces[pods.namespace[p]]
        rows.append({"namespace": ns.name, "pod": pods.name[p], "team": ns.team, "queue": pods.queue[p],
                     "priority_class": classes[p][0] or "(none)",
                     "model": sim.spec.pools[pods.pool[p]].model,
                     "lost_gpu_hours": counted_gpus(pods.requests[p]) * (pods.end[p] - start) * step_h})
    return pl.DataFrame(rows)


def priority_frame(sim: Simulation) -> pl.DataFrame:
    pods, at = sim.schedule.pods, sim.tb.at(sim.tb.steps)
    rows = [{"namespace": sim.tenants.namespaces[pods.namespace[p]].name, "pod": pods.name[p],
             "priority_class": c, "priority": v, "observed_at": at}
            for p, (c, v) in enumerate(priorities(sim)) if pods.end[p] > 0 and pods.start[p] < sim.tb.steps]
    return pl.DataFrame(rows, schema=polars_schema(POD_PRIORITIES)).unique(
        ["namespace", "pod"], keep="first", maintain_order=True)


def volcano_objects(sim: Simulation) -> list[dict[str, Any]]:
    """Queue and PodGroup manifests of the Volcano pools (`scheduling.volcano.sh/v1beta1`)."""
    pods, weights = sim.schedule.pods, sim.tenants.team_weights
    capacity: dict[str, int] = {}
    for pool in sim.spec.pools:
        if pool.queue_system == "volcano":
            capacity[pool.name] = pool.nodes * sim.spec.pool_gpus_per_node(pool)
    queues: dict[str, float] = {}
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for p in range(len(pods)):
        if _volcano_pool(sim, p) and pods.queue[p]:
            queues[str(pods.queue[p])] = weights.get(str(pods.queue[p]), 0.5)
            groups[(sim.tenants.namespaces[pods.namespace[p]].name, pods.owner_name[p])].append(p)
    total, gpus = sum(queues.values()) or 1.0, sum(capacity.values())
    api = "scheduling.volcano.sh/v1beta1"
    objs: list[dict[str, Any]] = [
        {"apiVersion": api, "kind": "Queue", "metadata": {"name": q},
         "spec": {"weight": max(1, round(w * 2)), "reclaimable": True, "capability": {"nvidia.com/gpu": gpus},
                  "deserved": {"nvidia.com/gpu": round(gpus * w / total)}}}
        for q, w in sorted(queues.items())]
    classes = priorities(sim)
    for (ns, owner), members in sorted(groups.items()):
        objs.append({"apiVersion": api, "kind": "PodGroup", "metadata": {"name": owner, "namespace": ns},
                     "spec": {"queue": pods.queue[members[0]], "minMember": len(members),
                              "priorityClassName": classes[members[0]][0]}})
    return objs


def queue_deserved(sim: Simulation) -> dict[str, float]:
    """Each Volcano Queue's deserved GPUs, as its object (`volcano_objects`) states them."""
    return {o["metadata"]["name"]: float(o["spec"]["deserved"][RESOURCE])
            for o in volcano_objects(sim) if o["kind"] == "Queue"}


def with_volcano(sim: Simulation, frames: dict[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
    """The inventory frames plus Volcano's objects, `pod_priorities` and `preemptions`."""
    last = sim.tb.at(sim.tb.steps)
    running = {"_status": {"phase": "Running", "conditions": []}}
    rows = [{"kind": o["kind"], "name": o["metadata"]["name"],
             "namespace": o["metadata"].get("namespace", ""), "cohort": None,
             "spec": json.dumps({**o["spec"], **(running if o["kind"] == "PodGroup" else {})},
                                sort_keys=True),
             "resource_version": "1", "observed_at": last} for o in volcano_objects(sim)]
    extra = pl.DataFrame(rows, schema=polars_schema(QUEUES))
    queues = pl.concat([frames["queues"], extra], how="vertical") if "queues" in frames else extra
    return {**frames, "queues": queues, "pod_priorities": priority_frame(sim),
            "preemptions": preemption_frame(sim)}
