"""Which PodDisruptionBudgets will block a MIG rollout's evictions, read before anything is evicted.

Why read them ourselves when the Eviction API enforces them anyway: the API server's refusal
("Cannot evict pod as it would violate the pod's disruption budget") names neither the budget
nor why, and it comes only when the node is already cordoned. Reading the budgets (policy/v1,
`list` in the read role the chart already grants) lets the preview say, before any write,
"PodDisruptionBudget ns/name (maxUnavailable 0) blocks evicting Pod/ns/pod", and the rollout
skip that node with the same words.

A budget blocks when it selects the pod and either its spec allows no disruption at all
(`maxUnavailable: 0` or `0%`, or `minAvailable: 100%`), or the disruption controller's status
(current for this generation) allows fewer disruptions than the plan would make under it. A
budget whose status is stale or unwritten and whose spec allows some disruption is left to the
Eviction API (we cannot know better than the controller).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpuledger.actuator.gateway import ClusterGateway, Obj


def selects(selector: Mapping[str, Any] | None, pod_labels: Mapping[str, str]) -> bool:
    """A label selector (matchLabels + matchExpressions) against a pod's labels; an empty
    selector in policy/v1 selects every pod of the namespace."""
    selector = selector or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if pod_labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), set(expr.get("values") or [])
        present = key in pod_labels
        ok = {
            "In": present and pod_labels.get(key) in values,
            "NotIn": not present or pod_labels.get(key) not in values,
            "Exists": present,
            "DoesNotExist": not present,
        }.get(str(op), False)
        if not ok:
            return False
    return True


def _why_blocked(pdb: Obj, evicted_under_it: int) -> str | None:
    spec, status = pdb.get("spec") or {}, pdb.get("status") or {}
    max_unavailable = spec.get("maxUnavailable")
    if max_unavailable is not None and str(max_unavailable) in ("0", "0%"):
        return "maxUnavailable 0"
    if str(spec.get("minAvailable")) == "100%":
        return "minAvailable 100%"
    generation = int((pdb.get("metadata") or {}).get("generation") or 0)
    current = int(status.get("observedGeneration") or 0) >= max(generation, 1)
    allowed = status.get("disruptionsAllowed")
    if current and allowed is not None and int(allowed) < evicted_under_it:
        return f"allows {int(allowed)} disruption(s) now, the plan needs {evicted_under_it}"
    return None


def blocking_budgets(gateway: ClusterGateway, pods: Sequence[Obj]) -> list[str]:
    """One line per (budget, pod) that will refuse the pod's eviction; `pods` are live Pod objects."""
    by_namespace: dict[str, list[Obj]] = {}
    for pod in pods:
        by_namespace.setdefault(str(pod["metadata"]["namespace"]), []).append(pod)
    out: list[str] = []
    for namespace, members in sorted(by_namespace.items()):
        budgets = gateway.list_objects(
            f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets",
            what=f"list PodDisruptionBudgets in Namespace/{namespace}",
        )
        for pdb in sorted(budgets, key=lambda b: str(b["metadata"]["name"])):
            chosen = [p for p in members
                      if selects((pdb.get("spec") or {}).get("selector"), p["metadata"].get("labels") or {})]
            why = _why_blocked(pdb, len(chosen)) if chosen else None
            if why is None:
                continue
            name = pdb["metadata"]["name"]
            out += [f"PodDisruptionBudget {namespace}/{name} ({why}) blocks evicting "
                    f"Pod/{namespace}/{p['metadata']['name']}" for p in chosen]
    return out

