"""Label strings of every simulated series, computed once per simulation and option set.

Why: a month of samples has hundreds of millions of lines but only thousands of distinct label
sets (one per device slot, pod, request, namespace and node epoch). They are rendered here once,
as string tables; the renderer gathers them per sample row by index, so formatting cost scales
with the fleet, not with the samples.

Label sets follow the real exporters (see `openmetrics` for the families):
1. dcgm-exporter: a device prefix per slot, a workload suffix per pod (empty labels on a free
   device), a `vgpu` label per time-sliced slot;
2. kube-state-metrics: per pod (`kube_pod_labels`, `kube_pod_info`), per GPU request, per
   namespace, and per node and MIG-config epoch (`kube_node_labels`).
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import polars as pl

from gpuledger.core.errors import InputError
from gpuledger.simulator.fleet import MODEL_FACTS
from gpuledger.simulator.kube import node_labels
from gpuledger.simulator.simulated_fleet import SimulatedFleet
from gpuledger.simulator.workloads import CLASSES


def _esc(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def labels(pairs: Iterable[tuple[str, object]]) -> str:
    """`k="v",...` with OpenMetrics escaping."""
    return ",".join(f'{k}="{_esc(v)}"' for k, v in pairs)


def label_name(key: str) -> str:
    """kube-state-metrics' name for a Kubernetes label key: `label_` + the key with non-alnum
    characters as `_`, then snake case (`teamName` → `team_name`; `internal/store/utils.go`
    `labelName` = `toSnakeCase(SanitizeLabelName(key))`)."""
    return "label_" + re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", re.sub(r"[^a-zA-Z0-9_]", "_", key)).lower()


def table(values: list[str]) -> pl.Series:
    return pl.Series(values, dtype=pl.String)


def gather(strings: pl.Series, idx: pl.Series | np.ndarray) -> pl.Series:
    """`strings[idx]`, where a negative index takes the table's last entry (the "none" entry)."""
    arr = idx.to_numpy() if isinstance(idx, pl.Series) else idx
    return strings.gather(np.where(arr < 0, len(strings) - 1, arr))


@dataclass(frozen=True)
class DcgmLabels:
    slot_prefix: pl.Series
    """Per slot: device labels, hostname, driver (and the exporter pod's labels when exported)."""
    pod_dcgm: pl.Series
    """Per pod: `,pod=...,namespace=...,container=...`; the last entry is the empty one."""
    slot_vgpu: pl.Series
    """Per slot: `,vgpu="n"` on time-sliced slots, else empty; the last entry is empty."""


@dataclass(frozen=True)
class KsmLabels:
    pod_labels: pl.Series
    pod_info: pl.Series
    req_pod: np.ndarray
    """Per GPU request entry: the pod it belongs to (entries of one pod are contiguous)."""
    req_labels: pl.Series
    req_value: np.ndarray
    ns_labels: list[str]
    node_epochs: list[tuple[int, int, str]]
    """(first step, end step, labels) per node and span with one MIG config."""


def dcgm_labels(sim: SimulatedFleet, hostname_label: str, exported: bool) -> DcgmLabels:
    if hostname_label not in ("Hostname", "hostname"):
        raise InputError(f"hostname label {hostname_label!r}: expected 'Hostname' or 'hostname'")
    hw, pods, tenants = sim.hw, sim.schedule.pods, sim.tenants
    driver = sim.spec.driver_version
    prefix: list[str] = []
    for slot in hw.slots:
        gpu = hw.gpus[slot.gpu]
        pairs: list[tuple[str, object]] = [
            ("gpu", gpu.index), ("UUID", gpu.uuid), ("pci_bus_id", gpu.pci_bus_id),
            ("device", f"nvidia{gpu.index}"), ("modelName", MODEL_FACTS[gpu.model]["model_name"]),
        ]
        if slot.profile is not None:
            pairs += [("GPU_I_PROFILE", slot.profile), ("GPU_I_ID", slot.gi_id)]
        pairs += [(hostname_label, hw.nodes[gpu.node].name), ("DCGM_FI_DRIVER_VERSION", driver)]
        if exported:
            pairs += _exporter_pod(hw.nodes[gpu.node].name, gpu.node)
        prefix.append(labels(pairs))
    pre = "exported_" if exported else ""
    workload = [
        "," + labels([(f"{pre}pod", pods.name[p]),
                      (f"{pre}namespace", tenants.namespaces[pods.namespace[p]].name),
                      (f"{pre}container", CLASSES[pods.cls[p]].container)])
        for p in range(len(pods))
    ]
    empty = "," + labels([(f"{pre}pod", ""), (f"{pre}namespace", ""), (f"{pre}container", "")])
    return DcgmLabels(
        slot_prefix=table(prefix),
        pod_dcgm=table([*workload, empty]),
        slot_vgpu=table([f',vgpu="{s.vgpu}"' if s.vgpu is not None else "" for s in hw.slots] + [""]),
    )


def _exporter_pod(node: str, node_idx: int) -> list[tuple[str, object]]:
    """What a ServiceMonitor with honorLabels false adds: the exporter pod's own labels."""
    suffix = hashlib.sha1(node.encode()).hexdigest()[:5]
    return [("pod", f"nvidia-dcgm-exporter-{suffix}"), ("namespace", "gpu-operator"),
            ("container", "nvidia-dcgm-exporter"),
            ("instance", f"10.0.{node_idx // 250}.{node_idx % 250 + 2}:9400"),
            ("job", "nvidia-dcgm-exporter")]


def ksm_labels(sim: SimulatedFleet) -> KsmLabels:
    hw, pods, tenants = sim.hw, sim.schedule.pods, sim.tenants
    ns_names = [tenants.namespaces[i].name for i in pods.namespace]
    pod_labels = table([
        labels([("namespace", ns_names[p]), ("pod", pods.name[p]), ("uid", pods.uid[p]),
                *sorted((label_name(k), v) for k, v in pods.labels[p].items())])
        for p in range(len(pods))
    ])
    pod_info = table([
        labels([("namespace", ns_names[p]), ("pod", pods.name[p]), ("uid", pods.uid[p]),
                ("node", hw.nodes[pods.node[p]].name),
                ("created_by_kind", pods.owner_kind[p]), ("created_by_name", pods.owner_name[p]),
                ("host_network", "false"), ("priority_class", "")])
        for p in range(len(pods))
    ])
    req_pod, req_labels, req_value = _requests(sim, ns_names)
    ns_labels = [
        labels([("namespace", ns.name), *sorted((label_name(k), v) for k, v in ns.labels.items())])
        for ns in tenants.namespaces
    ]
    return KsmLabels(pod_labels=pod_labels, pod_info=pod_info, req_pod=req_pod, req_labels=req_labels,
                     req_value=req_value, ns_labels=ns_labels, node_epochs=_node_epochs(sim))


def _requests(sim: SimulatedFleet, ns_names: list[str]) -> tuple[np.ndarray, pl.Series, np.ndarray]:
    """`kube_pod_container_resource_requests` entries: pod index, labels, amount."""
    hw, pods = sim.hw, sim.schedule.pods
    req_pod: list[int] = []
    req_labels: list[str] = []
    req_value: list[float] = []
    for p in range(len(pods)):
        for res, amount in pods.requests[p].items():
            req_pod.append(p)
            req_value.append(float(amount))
            req_labels.append(labels([
                ("namespace", ns_names[p]), ("pod", pods.name[p]), ("uid", pods.uid[p]),
                ("container", CLASSES[pods.cls[p]].container), ("node", hw.nodes[pods.node[p]].name),
                ("resource", re.sub(r"[^a-zA-Z0-9_]", "_", res)), ("unit", "integer"),
            ]))
    return np.array(req_pod, dtype=np.int64), table(req_labels), np.array(req_value)


def _node_epochs(sim: SimulatedFleet) -> list[tuple[int, int, str]]:
    """Each node's label set per span between MIG-config changes (labels change with them)."""
    hw = sim.hw
    epochs: list[tuple[int, int, str]] = []
    for n_idx, hw_node in enumerate(hw.nodes):
        bounds = sorted({0, sim.tb.steps, *(s for s, _, _ in hw_node.mig_epochs)})
        for lo, hi in itertools.pairwise(bounds):
            node = node_labels(sim.spec, hw, n_idx, lo)
            epochs.append((lo, hi, labels(
                [("node", hw_node.name), *sorted((label_name(k), v) for k, v in node.items())]
            )))
    return epochs
