"""The metric families the simulator emits, in the order a file lists them.

Why its own module: the file writer, the live exposition and the CLI's `--families` check all
need the same list (names, types, help texts) without pulling in the renderers.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuledger.core.errors import InputError
from gpuledger.core.frames import DCGM_FIELDS
from gpuledger.simulator.hami import SCHEDULER_FAMILIES

WAIT_BUCKETS = tuple(float(2**i) for i in range(14))
"""Upper bounds (s) of the admission-wait histogram: 1, 2, 4 ... 8192, then +Inf."""


@dataclass(frozen=True)
class Family:
    name: str
    type: str
    help: str
    suffix: str = ""
    """Sample-name suffix (`_total` for counters)."""


FAMILIES: tuple[Family, ...] = (
    *(Family(m, "gauge", f"dcgm-exporter field {m}") for m in DCGM_FIELDS),
    Family("vllm:prompt_tokens", "counter", "Number of prefill tokens processed.", "_total"),
    Family("vllm:generation_tokens", "counter", "Number of generation tokens processed.", "_total"),
    Family("kube_pod_labels", "gauge", "Kubernetes labels converted to Prometheus labels."),
    Family("kube_pod_info", "gauge", "Information about pod."),
    Family("kube_pod_container_resource_requests", "gauge",
           "The number of requested request resource by a container."),
    Family("kube_namespace_labels", "gauge", "Kubernetes labels converted to Prometheus labels."),
    Family("kube_node_labels", "gauge", "Kubernetes labels converted to Prometheus labels."),
    Family("kueue_cluster_queue_resource_usage", "gauge",
           "Reports the cluster_queue's total resource usage"),
    Family("kueue_cluster_queue_nominal_quota", "gauge",
           "Reports the cluster_queue's resource nominal quota"),
    Family("kueue_pending_workloads", "gauge",
           "The number of pending workloads, per cluster_queue and status."),
    Family("kueue_admission_wait_time_seconds", "histogram",
           "The time between a workload was created or requeued until admission, per cluster_queue"),
    Family("volcano_queue_allocated_scalar_resources", "gauge", "Allocated scalar resources of the queue"),
    Family("volcano_queue_deserved_scalar_resources", "gauge", "Deserved scalar resources of the queue"),
    Family("volcano_queue_pod_group_pending_count", "gauge", "The number of Pending PodGroup in this queue"),
    Family("volcano_queue_pod_group_inqueue_count", "gauge", "The number of Inqueue PodGroup in this queue"),
    *(Family(name, "gauge", text) for name, text in SCHEDULER_FAMILIES),
)
FAMILY_NAMES = tuple(f.name for f in FAMILIES)


def choose_families(families: tuple[str, ...] | None) -> tuple[str, ...]:
    """The asked families in file order (all when None); an unknown name is an InputError."""
    if families is None:
        return FAMILY_NAMES
    unknown = [f for f in families if f not in FAMILY_NAMES]
    if unknown:
        raise InputError(f"metric families {', '.join(unknown)}: unknown (known: {', '.join(FAMILY_NAMES)})")
    return tuple(f for f in FAMILY_NAMES if f in families)
