"""Inventory frames (tables gpus, nodes, namespaces, pods, mig_instances, queues,
vgpu_allocations) as a collector would observe them over the window: dimensions as of the window's last step,
intervals (pods, MIG instances, HAMi's allocations as the API collector reads them from the pod
annotations) clipped to the window, and each card's `first_seen`/`last_seen` the steps it was
really present (field mode's replaced cards and churning nodes included)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import polars as pl

from gpuledger.core.frames import (
    GPUS,
    MIG_INSTANCES,
    NAMESPACES,
    NODES,
    PODS,
    QUEUES,
    TableSpec,
    polars_schema,
)
from gpuledger.core.frames_hami import VGPU_ALLOCATIONS
from gpuledger.simulator.fleet import MODEL_FACTS, FleetSpec
from gpuledger.simulator.hami_series import vgpu_allocations
from gpuledger.simulator.hardware import Hardware, presence_steps
from gpuledger.simulator.kube import (
    kueue_manifests,
    mig_config_at,
    node_allocatable,
    node_capacity,
    node_labels,
)
from gpuledger.simulator.tenants import Tenants
from gpuledger.simulator.timebase import Timebase
from gpuledger.simulator.workloads import Schedule


def _frame(spec: TableSpec, rows: dict[str, list[Any]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=polars_schema(spec))


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def inventory(
    spec: FleetSpec, hw: Hardware, tenants: Tenants, sched: Schedule, tb: Timebase
) -> dict[str, pl.DataFrame]:
    """One frame per inventory table; dimensions as last observed, intervals clipped."""
    last = tb.at(tb.steps - 1)
    return {
        "gpus": _gpus(hw, tb), "nodes": _nodes(spec, hw, tb), "namespaces": _namespaces(tenants, last),
        "pods": _pods(hw, tenants, sched, tb), "mig_instances": _mig_instances(hw, tb),
        "queues": _queues(spec, tenants, last),
        "vgpu_allocations": _frame(VGPU_ALLOCATIONS, vgpu_allocations(hw, sched, tenants, tb)),
    }


def _gpus(hw: Hardware, tb: Timebase) -> pl.DataFrame:
    """Cards as last observed; `first_seen`/`last_seen` are the first and last step each was
    present (`presence_steps`), as a collector watching the card would have seen it."""
    spans = presence_steps(hw, tb)
    return _frame(GPUS, {
        "uuid": [g.uuid for g in hw.gpus],
        "node": [hw.nodes[g.node].name for g in hw.gpus],
        "gpu_index": [g.index for g in hw.gpus],
        "model": [g.model for g in hw.gpus],
        "model_name": [str(MODEL_FACTS[g.model]["model_name"]) for g in hw.gpus],
        "memory_mib": [g.memory_mib for g in hw.gpus],
        "pool": [hw.pools[g.pool].name for g in hw.gpus],
        "sharing_mode": [g.sharing for g in hw.gpus],
        "replicas": [g.replicas for g in hw.gpus],
        "first_seen": [tb.at(lo) for lo, _ in spans],
        "last_seen": [tb.at(hi - 1) for _, hi in spans],
    })


def _nodes(spec: FleetSpec, hw: Hardware, tb: Timebase) -> pl.DataFrame:
    """Nodes as of the last step: its MIG config (settled: `success`), labels and resources."""
    last, k_last = tb.at(tb.steps - 1), tb.steps - 1
    return _frame(NODES, {
        "node": [n.name for n in hw.nodes],
        "pool": [hw.pools[n.pool].name for n in hw.nodes],
        "model": [hw.pools[n.pool].model for n in hw.nodes],
        "gpu_count": [len(n.gpus) for n in hw.nodes],
        "sharing_mode": [hw.pools[n.pool].sharing for n in hw.nodes],
        "replicas": [hw.pools[n.pool].replicas if hw.pools[n.pool].sharing == "timeslice" else None
                     for n in hw.nodes],
        "mig_config": [mig_config_at(n, k_last) or "all-disabled" for n in hw.nodes],
        "mig_config_state": ["success"] * len(hw.nodes),
        "labels": [_json(node_labels(spec, hw, i, k_last)) for i in range(len(hw.nodes))],
        "capacity": [_json(node_capacity(hw, i, k_last)) for i in range(len(hw.nodes))],
        "allocatable": [_json(node_allocatable(hw, i, k_last)) for i in range(len(hw.nodes))],
        "resource_version": ["1"] * len(hw.nodes),
        "observed_at": [last] * len(hw.nodes),
        "valid_from": [None] * len(hw.nodes),  # only the last step is known: it stands for all (0207)
    })


def _namespaces(tenants: Tenants, last: datetime) -> pl.DataFrame:
    return _frame(NAMESPACES, {
        "namespace": [ns.name for ns in tenants.namespaces],
        "team": [ns.team for ns in tenants.namespaces],
        "labels": [_json(ns.labels) for ns in tenants.namespaces],
        "observed_at": [last] * len(tenants.namespaces),
    })


def _pods(hw: Hardware, tenants: Tenants, sched: Schedule, tb: Timebase) -> pl.DataFrame:
    """Pods that ran inside the window, their lifetimes clipped to it."""
    pods = sched.pods
    rows: dict[str, list[Any]] = {c: [] for c in PODS.column_names}
    for p in range(len(pods)):
        lo, hi = max(pods.start[p], 0), min(pods.end[p], tb.steps)
        if lo >= hi:
            continue
        rows["namespace"].append(tenants.namespaces[pods.namespace[p]].name)
        rows["pod"].append(pods.name[p])
        rows["node"].append(hw.nodes[pods.node[p]].name)
        rows["queue"].append(pods.queue[p])
        rows["owner_kind"].append(pods.owner_kind[p])
        rows["owner_name"].append(pods.owner_name[p])
        rows["gpu_requests"].append(_json(pods.requests[p]))
        rows["labels"].append(_json(pods.labels[p]))
        rows["start_ts"].append(tb.at(lo))
        rows["end_ts"].append(tb.at(hi))
    return _frame(PODS, rows)


def _mig_instances(hw: Hardware, tb: Timebase) -> pl.DataFrame:
    """MIG instances per slot; one still present at the end runs to the window's end."""
    end = tb.at(tb.steps)
    rows: dict[str, list[Any]] = {c: [] for c in MIG_INSTANCES.column_names}
    for slot in hw.slots:
        if slot.profile is None:
            continue
        rows["uuid"].append(hw.gpus[slot.gpu].uuid)
        rows["gpu_i_id"].append(slot.gi_id)
        rows["profile"].append(slot.profile)
        rows["start_ts"].append(tb.at(slot.start))
        rows["end_ts"].append(tb.at(slot.end) if slot.end < tb.steps else end)
    return _frame(MIG_INSTANCES, rows)


def _queues(spec: FleetSpec, tenants: Tenants, last: datetime) -> pl.DataFrame:
    rows: dict[str, list[Any]] = {c: [] for c in QUEUES.column_names}
    for obj in kueue_manifests(spec, tenants):
        spec_body = obj["spec"]
        rows["kind"].append(obj["kind"])
        rows["name"].append(obj["metadata"]["name"])
        rows["namespace"].append(obj["metadata"].get("namespace", ""))
        rows["cohort"].append(spec_body.get("cohortName"))
        rows["spec"].append(_json(spec_body))
        rows["resource_version"].append("1")
        rows["observed_at"].append(last)
    return _frame(QUEUES, rows)
