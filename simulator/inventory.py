"""Inventory frames (tables gpus, nodes, namespaces, pods, mig_instances, queues) as a
collector would observe them over the window: dimensions as of the window's last step,
intervals (pods, MIG instances) clipped to the window."""

from __future__ import annotations

import json
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
from gpuledger.simulator.fleet import MODEL_FACTS, FleetSpec
from gpuledger.simulator.hardware import Hardware
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
    first, last, end = tb.at(0), tb.at(tb.steps - 1), tb.at(tb.steps)
    k_last = tb.steps - 1
    gpus = _frame(GPUS, {
        "uuid": [g.uuid for g in hw.gpus],
        "node": [hw.nodes[g.node].name for g in hw.gpus],
        "gpu_index": [g.index for g in hw.gpus],
        "model": [g.model for g in hw.gpus],
        "model_name": [str(MODEL_FACTS[g.model]["model_name"]) for g in hw.gpus],
        "memory_mib": [g.memory_mib for g in hw.gpus],
        "pool": [hw.pools[g.pool].name for g in hw.gpus],
        "sharing_mode": [g.sharing for g in hw.gpus],
        "replicas": [g.replicas for g in hw.gpus],
        "first_seen": [first] * len(hw.gpus),
        "last_seen": [last] * len(hw.gpus),
    })
    nodes = _frame(NODES, {
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
    })
    namespaces = _frame(NAMESPACES, {
        "namespace": [ns.name for ns in tenants.namespaces],
        "team": [ns.team for ns in tenants.namespaces],
        "labels": [_json(ns.labels) for ns in tenants.namespaces],
        "observed_at": [last] * len(tenants.namespaces),
    })
    pods = sched.pods
    pod_rows: dict[str, list[Any]] = {c: [] for c in PODS.column_names}
    for p in range(len(pods)):
        lo, hi = max(pods.start[p], 0), min(pods.end[p], tb.steps)
        if lo >= hi:
            continue
        pod_rows["namespace"].append(tenants.namespaces[pods.namespace[p]].name)
        pod_rows["pod"].append(pods.name[p])
        pod_rows["node"].append(hw.nodes[pods.node[p]].name)
        pod_rows["queue"].append(pods.queue[p])
        pod_rows["owner_kind"].append(pods.owner_kind[p])
        pod_rows["owner_name"].append(pods.owner_name[p])
        pod_rows["gpu_requests"].append(_json(pods.requests[p]))
        pod_rows["labels"].append(_json(pods.labels[p]))
        pod_rows["start_ts"].append(tb.at(lo))
        pod_rows["end_ts"].append(tb.at(hi))
    mig_rows: dict[str, list[Any]] = {c: [] for c in MIG_INSTANCES.column_names}
    for slot in hw.slots:
        if slot.profile is None:
            continue
        mig_rows["uuid"].append(hw.gpus[slot.gpu].uuid)
        mig_rows["gpu_i_id"].append(slot.gi_id)
        mig_rows["profile"].append(slot.profile)
        mig_rows["start_ts"].append(tb.at(slot.start))
        mig_rows["end_ts"].append(tb.at(slot.end) if slot.end < tb.steps else end)
    queue_rows: dict[str, list[Any]] = {c: [] for c in QUEUES.column_names}
    for obj in kueue_manifests(spec, tenants):
        spec_body = obj["spec"]
        queue_rows["kind"].append(obj["kind"])
        queue_rows["name"].append(obj["metadata"]["name"])
        queue_rows["namespace"].append(obj["metadata"].get("namespace", ""))
        queue_rows["cohort"].append(spec_body.get("cohortName"))
        queue_rows["spec"].append(_json(spec_body))
        queue_rows["resource_version"].append("1")
        queue_rows["observed_at"].append(last)
    return {
        "gpus": gpus, "nodes": nodes, "namespaces": namespaces,
        "pods": _frame(PODS, pod_rows), "mig_instances": _frame(MIG_INSTANCES, mig_rows),
        "queues": _frame(QUEUES, queue_rows),
    }
