"""Manifests for an autoscaling proposal: an autoscaling/v2 HPA, or a KEDA ScaledObject.

Why two: a HorizontalPodAutoscaler needs a metrics adapter (prometheus-adapter) that serves
the queue as an External metric and GPU activity as a Pods metric, each averaged over the
proposal's window by the adapter rule named in the annotations; it cannot change its minimum
by time of day, so it carries the lowest hourly minimum and the schedule as an annotation.
A KEDA ScaledObject queries Prometheus itself and adds `cron` triggers for the hours whose
minimum is higher, so the time-of-day floor is enforced. `plans export` writes either.
"""

from __future__ import annotations

from typing import Any

from gpuledger.analytics.advice.autoscaling import AutoscalingAdvice

QUEUE_METRIC = "vllm:num_requests_waiting"
ACTIVITY_METRIC = "gpu_gr_engine_active"
ANNOTATION = "gpuledger.io/autoscaling-advice"


def _quantity(value: float) -> str:
    """A Kubernetes quantity: milli-units, so 0.8 is `800m` and 4 is `4`."""
    milli = round(value * 1000)
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def _behavior(advice: AutoscalingAdvice) -> dict[str, Any]:
    p = advice.policy
    return {
        "scaleUp": {"stabilizationWindowSeconds": p.up_stabilization_s, "selectPolicy": "Max",
                    "policies": [{"type": "Pods", "value": 2, "periodSeconds": 60},
                                 {"type": "Percent", "value": 100, "periodSeconds": 60}]},
        "scaleDown": {"stabilizationWindowSeconds": p.down_stabilization_s, "selectPolicy": "Min",
                      "policies": [{"type": "Pods", "value": 1, "periodSeconds": 120}]},
    }


def hour_ranges(minimum_by_hour: tuple[int, ...]) -> list[tuple[int, int, int]]:
    """Contiguous UTC hours whose minimum is above the lowest: (start hour, end hour, minimum)."""
    low = min(minimum_by_hour)
    out: list[tuple[int, int, int]] = []
    for hour, value in enumerate(minimum_by_hour):
        if value <= low:
            continue
        if out and out[-1][1] == hour and out[-1][2] == value:
            out[-1] = (out[-1][0], hour + 1, value)
        else:
            out.append((hour, hour + 1, value))
    return out


def render_hpa(advice: AutoscalingAdvice) -> dict[str, Any]:
    """The autoscaling/v2 HorizontalPodAutoscaler of a proposal."""
    p = advice.policy
    schedule = ", ".join(f"{a:02d}-{b:02d}h UTC: {n}" for a, b, n in hour_ranges(advice.minimum_by_hour))
    return {
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {
            "name": advice.deployment, "namespace": advice.namespace,
            "labels": {"app.kubernetes.io/managed-by": "gpuledger"},
            "annotations": {
                ANNOTATION: advice.reason(),
                "gpuledger.io/adapter-window": f"{p.window_minutes}m",
                "gpuledger.io/minimum-by-hour": schedule or "flat",
            },
        },
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": advice.deployment},
            "minReplicas": advice.min_replicas, "maxReplicas": max(advice.max_replicas, advice.min_replicas),
            "metrics": [
                {"type": "External", "external": {
                    "metric": {"name": QUEUE_METRIC, "selector": {"matchLabels": {
                        "namespace": advice.namespace, "deployment": advice.deployment}}},
                    "target": {"type": "AverageValue", "averageValue": _quantity(p.queue_target)}}},
                {"type": "Pods", "pods": {
                    "metric": {"name": ACTIVITY_METRIC},
                    "target": {"type": "AverageValue", "averageValue": _quantity(p.scale_up)}}},
            ],
            "behavior": _behavior(advice),
        },
    }


def render_keda(advice: AutoscalingAdvice, *, prometheus: str = "http://prometheus:9090") -> dict[str, Any]:
    """The KEDA ScaledObject of a proposal (needs the KEDA CRDs in the cluster)."""
    p = advice.policy
    selector = f'namespace="{advice.namespace}",pod=~"{advice.deployment}-.*"'
    triggers: list[dict[str, Any]] = [
        {"type": "prometheus", "metadata": {
            "serverAddress": prometheus, "threshold": str(p.queue_target),
            "query": f"sum(avg_over_time({QUEUE_METRIC}{{{selector}}}[{p.window_minutes}m]))"}},
        {"type": "prometheus", "metadata": {
            "serverAddress": prometheus, "threshold": str(p.scale_up),
            "query": f"sum(avg_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{selector}}}"
                     f"[{p.window_minutes}m]))"}},
    ]
    for start, end, n in hour_ranges(advice.minimum_by_hour):
        triggers.append({"type": "cron", "metadata": {
            "timezone": "Etc/UTC", "start": f"0 {start} * * *", "end": f"0 {end % 24} * * *",
            "desiredReplicas": str(n)}})
    return {
        "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
        "metadata": {"name": advice.deployment, "namespace": advice.namespace,
                     "labels": {"app.kubernetes.io/managed-by": "gpuledger"},
                     "annotations": {ANNOTATION: advice.reason()}},
        "spec": {
            "scaleTargetRef": {"name": advice.deployment},
            "minReplicaCount": advice.min_replicas,
            "maxReplicaCount": max(advice.max_replicas, advice.min_replicas),
            "advanced": {"horizontalPodAutoscalerConfig": {"behavior": _behavior(advice)}},
            "triggers": triggers,
        },
    }


def render_manifests(advice: AutoscalingAdvice, *, flavor: str = "hpa") -> list[dict[str, Any]]:
    """The manifests `plans export` writes for one proposal: `hpa` (default) or `keda`."""
    if flavor == "keda":
        return [render_keda(advice)]
    return [render_hpa(advice)]
