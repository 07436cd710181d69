"""kube-state-metrics history → `namespaces` (teams) and `pods` (GPU requests, lifetimes).

Used when the Kubernetes API is not reachable, so a Prometheus-only setup still bills teams:
- namespaces: `kube_namespace_labels` (the latest label set seen in the chunk);
- pods: `kube_pod_container_resource_requests` for `nvidia_com_*` resources, summed per pod
  and resource; the pod's span is the first to the last instant it was seen (+ one step);
  node from `kube_pod_info`, queue from the `kueue.x-k8s.io/queue-name` pod label;
- node labels: `kube_node_labels` (exported only for the keys KSM is allowed to list, e.g.
  `--metric-labels-allowlist=nodes=[nvidia.com/gpu.replicas,...]`): the GFD keys in
  `NODE_LABELS` are stored under their real names in `nodes.labels`, so the bill reads the
  time-slicing replica count (`nvidia.com/gpu.replicas`) the same way with or without the API.
- pod-claim references: `kube_pod_resourceclaim_info` (kube-state-metrics 2.20+, one series per
  `pod.spec.resourceClaims` entry, `resourceclaim_name` resolved for generated claims): which
  pod referenced which claim when (first to last instant seen + one step), the join the bill
  uses for claims whose API reservations were not collected (`dra_pod_claims`).
Resource names come back from KSM's sanitized form through a table of the names we know
(`KNOWN_RESOURCES`, plus the MIG pattern): sanitizing (`[^a-zA-Z0-9_]` → `_`) is not reversible,
so `nvidia_com_gpumem_percentage` is `nvidia.com/gpumem-percentage` (HAMi) while
`nvidia_com_gpu_shared` is `nvidia.com/gpu.shared` (the device plugin's renamed time-slicing
resource); a name outside the table is kept as KSM wrote it, never guessed.
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
from gpuledger.core.frames import NAMESPACES, NODES, PODS, polars_schema
from gpuledger.core.frames_dra import DRA_POD_CLAIMS
from gpuledger.core.labels import POOL_LABELS, pool_of
from gpuledger.core.teams import ksm_label, resolve_team

QUEUE_LABEL = ksm_label(queue_collector().pod_queue_label)
"""The KSM series label of the default queue system's pod queue label."""
_MIG = re.compile(r"^nvidia_com_mig_(\d+g)_(\d+gb)(_me)?(_shared)?$")
KNOWN_RESOURCES: tuple[str, ...] = (
    "nvidia.com/gpu",  # whole cards, time-slice replicas, HAMi's vGPU count (resourceCountName)
    "nvidia.com/gpu.shared",  # time-slicing / MPS with renameByDefault (k8s-device-plugin api/config/v1)
    "nvidia.com/gpumem",  # HAMi: device memory, MiB (resourceMemoryName)
    "nvidia.com/gpumem-percentage",  # HAMi: device memory, % of the card (resourceMemoryPercentageName)
    "nvidia.com/gpucores",  # HAMi: SM share, % of the card (resourceCoreName)
    "nvidia.com/vgpu",  # HAMi's count under a renamed resourceCountName (DaoCloud's default)
)
"""Extended resources restored from KSM's sanitized `resource` label; MIG profiles
(`nvidia.com/mig-<g>g.<gb>gb[+me][.shared]`) by `_MIG`."""
_KNOWN_KSM = {re.sub(r"[^a-zA-Z0-9_]", "_", name): name for name in KNOWN_RESOURCES}
NODE_LABELS: tuple[str, ...] = (
    "nvidia.com/gpu.replicas", "nvidia.com/gpu.product", "nvidia.com/gpu.count",
    "nvidia.com/gpu.sharing-strategy", "nvidia.com/mps.capable",
    "nvidia.com/mig.strategy", "nvidia.com/mig.config", "nvidia.com/mig.config.state",
    *POOL_LABELS,
)
"""Node label keys read back from KSM's sanitized names (`label_nvidia_com_gpu_replicas`);
sanitizing is not reversible in general, so only these known keys are restored."""
_NODE_KSM = {ksm_label(key): key for key in NODE_LABELS}


def resource_name(ksm_resource: str) -> str:
    """The resource name KSM sanitized into `ksm_resource`, for the names we know (the module
    docstring); any other name is returned as KSM wrote it."""
    known = _KNOWN_KSM.get(ksm_resource)
    if known is not None:
        return known
    mig = _MIG.match(ksm_resource)
    if mig:
        g, gb, me, shared = mig.groups()
        return f"nvidia.com/mig-{g}.{gb}{'+me' if me else ''}{'.shared' if shared else ''}"
    return ksm_resource


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


def pod_claims_from_frame(refs: pl.DataFrame) -> pl.DataFrame:
    """Rows of `dra_pod_claims` from the samples of `kube_pod_resourceclaim_info` (namespace,
    pod, claim, template, ts, end): one span per pod and claim in the chunk; the warehouse
    stitches the spans of one key across chunks (an `interval` table)."""
    schema = polars_schema(DRA_POD_CLAIMS)
    if refs.height == 0:
        return pl.DataFrame(schema=schema)
    spans = refs.group_by("namespace", "pod", "claim").agg(
        pl.col("template").drop_nulls().first(), pl.col("ts").min().alias("start_ts"),
        pl.col("end").max().alias("end_ts"),
    )
    return spans.select([pl.col(c).cast(schema[c]) for c in DRA_POD_CLAIMS.column_names])


def node_labels_from_vector(result: Iterable[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """Per node, the known GFD labels (real key names) of an instant vector of `kube_node_labels`."""
    out: dict[str, dict[str, str]] = {}
    for item in result:
        metric = item.get("metric", {})
        node = metric.get("node")
        if not node:
            continue
        labels = {_NODE_KSM[k]: str(v) for k, v in metric.items() if k in _NODE_KSM and v}
        out.setdefault(node, {}).update(labels)
    return out


def with_node_labels(nodes: pl.DataFrame, labels: dict[str, dict[str, str]]) -> pl.DataFrame:
    """`nodes` (NODES rows built from the GPU series) with KSM's node labels filled in: `labels`
    JSON, `pool`, `mig_config(_state)` and the configured `replicas`, which replaces the count
    of replicas seen. Nodes KSM reports without GPU series are not added (no card, no bill)."""
    if nodes.height == 0 or not labels:
        return nodes
    rows = [
        {"node": node, "_labels": json.dumps(found, sort_keys=True),
         "_pool": pool_of(found),
         "_replicas": _positive(found.get("nvidia.com/gpu.replicas")),
         "_mig_config": found.get("nvidia.com/mig.config"),
         "_mig_state": found.get("nvidia.com/mig.config.state")}
        for node, found in labels.items()
    ]
    extra = pl.DataFrame(rows, schema={
        "node": pl.String, "_labels": pl.String, "_pool": pl.String, "_replicas": pl.Int32,
        "_mig_config": pl.String, "_mig_state": pl.String,
    })
    merged = nodes.join(extra, on="node", how="left").with_columns(
        pl.coalesce("_labels", pl.col("labels").cast(pl.String)).alias("labels"),
        pl.coalesce("_pool", "pool").alias("pool"),
        pl.coalesce("_replicas", "replicas").alias("replicas"),
        pl.coalesce("_mig_config", "mig_config").alias("mig_config"),
        pl.coalesce("_mig_state", "mig_config_state").alias("mig_config_state"),
    )
    schema = polars_schema(NODES)
    return merged.select([pl.col(c).cast(schema[c]) for c in NODES.column_names])


def _positive(text: str | None) -> int | None:
    try:
        value = int(str(text))
    except (TypeError, ValueError):
        return None
    return value if value >= 1 else None
