"""kube-state-metrics history → `namespaces` (teams) and `pods` (GPU requests, lifetimes).

Used when the Kubernetes API is not reachable, so a Prometheus-only setup still bills teams:
- namespaces: `kube_namespace_labels` (the latest label set seen in the chunk);
- pods: `kube_pod_container_resource_requests` for `nvidia_com_*` resources, summed per pod
  and resource; the pod's span is the first to the last instant it was seen (+ one step);
  node from `kube_pod_info`, queue from the `kueue.x-k8s.io/queue-name` pod label.
Resource names come back from KSM's sanitized form: `nvidia_com_mig_3g_40gb` →
`nvidia.com/mig-3g.40gb`, `nvidia_com_gpu` → `nvidia.com/gpu`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import polars as pl

from gpuledger.collectors.queues import queue_collector
from gpuledger.core.config import TeamSettings
from gpuledger.core.frames import NAMESPACES, PODS, polars_schema
from gpuledger.core.teams import ksm_label, resolve_team

QUEUE_LABEL = ksm_label(queue_collector().pod_queue_label)
"""The KSM series label of the default queue system's pod queue label."""
_MIG = re.compile(r"^mig_(\d+g)_(\d+gb)(_me)?$")


def resource_name(ksm_resource: str) -> str:
    """Undo KSM's sanitizing of an `nvidia.com/...` extended resource name."""
    if not ksm_resource.startswith("nvidia_com_"):
        return ksm_resource
    rest = ksm_resource[len("nvidia_com_"):]
    mig = _MIG.match(rest)
    if mig:
        rest = f"mig-{mig.group(1)}.{mig.group(2)}{'+me' if mig.group(3) else ''}"
    return f"nvidia.com/{rest}"


def namespaces_from_vector(
    result: Iterable[dict[str, Any]], teams: TeamSettings, observed_at: datetime,
) -> pl.DataFrame:
    """Rows of `namespaces` from an instant vector of `kube_namespace_labels`."""
    rows: dict[str, dict[str, Any]] = {}
    for item in result:
        metric = item.get("metric", {})
        namespace = metric.get("namespace")
        if not namespace:
            continue
        labels = {k[len("label_"):]: v for k, v in metric.items() if k.startswith("label_") and v}
        rows[namespace] = {
            "namespace": namespace,
            "team": resolve_team(namespace, labels, teams),
            "labels": json.dumps(labels, sort_keys=True),
            "observed_at": observed_at,
        }
    schema = polars_schema(NAMESPACES)
    return pl.DataFrame(list(rows.values()), schema=schema) if rows else pl.DataFrame(schema=schema)


def pods_from_frames(
    requests: pl.DataFrame, info: dict[tuple[str, str], dict[str, str | None]],
) -> pl.DataFrame:
    """Rows of `pods` from requests (namespace, pod, resource, ts, value) and pod facts."""
    schema = polars_schema(PODS)
    if requests.height == 0:
        return pl.DataFrame(schema=schema)
    spans = requests.group_by("namespace", "pod").agg(
        pl.col("ts").min().alias("start_ts"), pl.col("end").max().alias("end_ts"),
    )
    amounts = requests.group_by("namespace", "pod", "resource").agg(pl.col("value").max())
    gpu: dict[tuple[str, str], dict[str, float]] = {}
    for ns, pod, res, value in amounts.iter_rows():
        gpu.setdefault((ns, pod), {})[resource_name(res)] = value
    rows = []
    for ns, pod, start, end in spans.iter_rows():
        facts = info.get((ns, pod), {})
        rows.append({
            "namespace": ns, "pod": pod, "node": facts.get("node"), "queue": facts.get("queue"),
            "owner_kind": facts.get("owner_kind"), "owner_name": facts.get("owner_name"),
            "gpu_requests": json.dumps(gpu.get((ns, pod), {}), sort_keys=True),
            "labels": None, "start_ts": start, "end_ts": end,
        })
    return pl.DataFrame(rows, schema=schema)
