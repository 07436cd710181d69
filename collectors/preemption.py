"""Priorities and preemptions from the Kubernetes API (read-only): the rows of `pod_priorities`
and `preemptions` (`core.frames_preemption`).

Why four sources: each scheduler leaves a different trace when it throws a GPU pod off.
- kube-scheduler sets the victim pod's `DisruptionTarget` condition (reason
  `PreemptionByScheduler`) before deleting it, and records a `Preempted` event on the pod;
- Kueue marks the victim Workload `Evicted` (reason `Preempted`) or `Preempted`, then stops its
  job, so the pods go without a condition of their own;
- Volcano's preempt and reclaim actions record an `Evict` event on the victim PodGroup.
A pod condition carries the pod's own facts (node, start, requests). An event or a Workload
may outlive its pods: the row then names the victim's controller (`owner_kind`/`owner_name`),
and billing finds the victim pods in the stored `pods` table (`analytics.billing.preemption`).

A checkpoint annotation (`CHECKPOINT_ANNOTATION`, RFC 3339 time) on a victim pod says when it
last saved its state: only the GPU time after it is lost.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import polars as pl

from gpuledger.collectors.statuses import Statuses
from gpuledger.core.frames_preemption import POD_PRIORITIES, PREEMPTIONS
from gpuledger.core.table_spec import polars_schema

PREEMPTION_REASONS = frozenset({"PreemptionByScheduler", "PreemptionByKubeScheduler"})
"""`DisruptionTarget` reasons meaning a scheduler preempted the pod (the second is the name
before Kubernetes 1.27)."""
EVENT_REASONS = {"Preempted": "scheduler_event", "Evict": "volcano_podgroup"}
"""Event reason → source: kube-scheduler's on a pod, Volcano's on a PodGroup."""
CHECKPOINT_ANNOTATION = "gpuledger.io/last-checkpoint"
GPU_KEYS = ("nvidia.com/gpu", "nvidia.com/mig-")


def parse_time(text: str | None) -> datetime | None:
    """An RFC 3339 timestamp as the API writes it, or None."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None


def gpu_count(requests: Mapping[str, float]) -> float:
    """Whole GPUs and MIG instances among a pod's GPU requests (memory and cores are not counts)."""
    return sum(v for k, v in requests.items() if k == GPU_KEYS[0] or k.startswith(GPU_KEYS[1]))


def priority_row(item: Mapping[str, Any], at: datetime) -> dict[str, Any]:
    meta, spec = item.get("metadata") or {}, item.get("spec") or {}
    return {"namespace": meta.get("namespace"), "pod": meta.get("name"),
            "priority_class": spec.get("priorityClassName") or "", "priority": spec.get("priority"),
            "observed_at": at}


def condition_row(item: Mapping[str, Any], pod: Mapping[str, Any], at: datetime) -> dict[str, Any] | None:
    """A `preemptions` row when the pod's `DisruptionTarget` says a scheduler preempted it.

    `pod` is the pod's `pods` row (its node, queue, start and requests)."""
    meta, spec = item.get("metadata") or {}, item.get("spec") or {}
    for cond in (item.get("status") or {}).get("conditions") or []:
        if (cond.get("type") == "DisruptionTarget" and cond.get("status") == "True"
                and cond.get("reason") in PREEMPTION_REASONS):
            return {
                "namespace": pod["namespace"], "pod": pod["pod"],
                "preempted_at": parse_time(cond.get("lastTransitionTime")) or at,
                "source": "pod_condition", "reason": cond.get("reason"),
                "owner_kind": pod["owner_kind"], "owner_name": pod["owner_name"],
                "node": pod["node"], "queue": pod["queue"],
                "priority_class": spec.get("priorityClassName") or "",
                "gpus": gpu_count(json.loads(pod["gpu_requests"])), "run_start": pod["start_ts"],
                "checkpoint_at": parse_time((meta.get("annotations") or {}).get(CHECKPOINT_ANNOTATION)),
                "observed_at": at,
            }
    return None


def _owner_row(namespace: str, name: str, at: datetime, when: datetime | None, *, source: str,
               reason: str | None, owner: Mapping[str, Any]) -> dict[str, Any]:
    """A row whose victims are the pods of `owner` (joined at billing time)."""
    return {
        "namespace": namespace, "pod": name, "preempted_at": when or at, "source": source,
        "reason": reason, "owner_kind": owner.get("kind"), "owner_name": owner.get("name"),
        "node": None, "queue": None, "priority_class": None, "gpus": None, "run_start": None,
        "checkpoint_at": None, "observed_at": at,
    }


def controller(meta: Mapping[str, Any]) -> Mapping[str, Any]:
    owners = meta.get("ownerReferences") or []
    return next((o for o in owners if o.get("controller")), owners[0] if owners else {})


def workload_rows(items: Iterable[Mapping[str, Any]], at: datetime) -> list[dict[str, Any]]:
    """Kueue Workloads that were preempted (`Evicted` with reason `Preempted`, or `Preempted`)."""
    rows = []
    for item in items:
        meta = item.get("metadata") or {}
        for cond in (item.get("status") or {}).get("conditions") or []:
            evicted = cond.get("type") == "Evicted" and cond.get("reason") == "Preempted"
            if cond.get("status") == "True" and (evicted or cond.get("type") == "Preempted"):
                rows.append(_owner_row(meta.get("namespace") or "", meta["name"], at,
                                       parse_time(cond.get("lastTransitionTime")), source="kueue_workload",
                                       reason=cond.get("reason"), owner=controller(meta)))
                break
    return rows


Owners = Mapping[tuple[str, str], Mapping[str, Any]]


def event_rows(events: Iterable[Mapping[str, Any]], podgroup_owners: Owners, at: datetime
               ) -> list[dict[str, Any]]:
    """`Preempted` events on pods (kube-scheduler) and `Evict` events on PodGroups (Volcano).

    A pod event names the pod itself (owner unknown here: the stored pod row has it); a PodGroup
    event names the PodGroup, whose controller (`podgroup_owners`) owns the victim pods."""
    rows = []
    for event in events:
        source = EVENT_REASONS.get(event.get("reason") or "")
        obj = event.get("involvedObject") or {}
        kind = obj.get("kind")
        if source is None or kind not in ("Pod", "PodGroup"):
            continue
        when = parse_time(event.get("lastTimestamp") or event.get("eventTime")
                          or (event.get("metadata") or {}).get("creationTimestamp"))
        ns, name = obj.get("namespace") or "", obj.get("name") or ""
        if kind == "Pod":
            owner: Mapping[str, Any] = {}
        else:
            owner = podgroup_owners.get((ns, name)) or {}
        rows.append(_owner_row(ns, name, at, when, source=source, reason=event.get("reason"), owner=owner))
    return rows


SOURCE_RANK = {"pod_condition": 0, "scheduler_event": 1, "volcano_podgroup": 2, "kueue_workload": 3}
"""When two sources report the same victim, the one with the pod's own facts wins."""


def merge_rows(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (namespace, pod): the best-ranked source's."""
    best: dict[tuple[str, str], dict[str, Any]] = {}
    for row in rows:
        key = (row["namespace"], row["pod"])
        if key not in best or SOURCE_RANK[row["source"]] < SOURCE_RANK[best[key]["source"]]:
            best[key] = row
    return [best[k] for k in sorted(best)]


def frames(items: list[dict[str, Any]], pods: pl.DataFrame, at: datetime,
           listed: Statuses) -> dict[str, pl.DataFrame]:
    """`pod_priorities` and `preemptions` of one snapshot (`items`: the listed pods, `pods`: their
    GPU rows, `listed`: the snapshot's Events, Workloads and PodGroups, `collectors.statuses`);
    an absent Kueue or Volcano gives no rows."""
    by_key = {(r["namespace"], r["pod"]): r for r in pods.iter_rows(named=True)}
    listed_pods = {((i.get("metadata") or {}).get("namespace"), (i.get("metadata") or {}).get("name")): i
                   for i in items}
    gpu_items = [listed_pods[k] for k in by_key if k in listed_pods]
    priorities = [priority_row(i, at) for i in gpu_items]
    rows = [r for i in gpu_items
            if (r := condition_row(i, by_key[(i["metadata"].get("namespace"), i["metadata"]["name"])], at))]
    events = [e for e in listed.events if e.get("reason") in EVENT_REASONS]
    owners: dict[tuple[str, str], Mapping[str, Any]] = {}
    for pg in listed.podgroups:
        meta = pg.get("metadata") or {}
        owners[(meta.get("namespace") or "", meta.get("name") or "")] = controller(meta)
    rows += event_rows(events, owners, at)
    rows += workload_rows(listed.workloads, at)
    return {
        "pod_priorities": pl.DataFrame(priorities, schema=polars_schema(POD_PRIORITIES)),
        "preemptions": pl.DataFrame(merge_rows(rows), schema=polars_schema(PREEMPTIONS)),
    }
