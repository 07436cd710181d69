"""What the product says where the cluster says nothing: the one stated value of an unknown label.

Why one home: clusters are label-poor (DESIGN.md, "Upstream shapes"): a GPU node often has no
pool label, GPU feature discovery may not run (no model label), a namespace may have no team
label. Such a card still costs money, so every output that groups or labels by these values
must name the gap rather than drop the row or crash on it (a `None` label value took `/metrics`
down with a 500, issue 29). Each output writes the same word for it, so a Grafana panel, the
bill's `by pool` lines, the FOCUS tags and the pages agree on what "unknown" means:

- `UNKNOWN` (`"unknown"`): a value the cluster does not publish, e.g. the pool of a node with
  no pool label, the model of a card no source names (`collectors.inventory`). A team is never
  `unknown`: usage without a team goes on the `unattributed` line, which lists its namespaces.
- `NOT_APPLICABLE` (`""`): a dimension a line does not have at all (the `sharing_discount`
  line is not per model); Prometheus reads an empty label value as an absent label.

Which node label names a node's pool is the other half of the same rule (`pool_of`): the
product's own `gpuledger.io/pool` when an admin sets it, else the node-pool label the
platform's autoscaler or cloud already writes (Karpenter, GKE, EKS managed node groups, AKS),
else `UNKNOWN`: real clusters rarely carry a label of ours.

docs/decisions/0166. Pure Python, no import.
"""

from __future__ import annotations

from collections.abc import Mapping

UNKNOWN = "unknown"
"""The stated value of a label the cluster does not publish (no pool label, no model)."""

NOT_APPLICABLE = ""
"""The value of a dimension a line does not have (Prometheus treats it as an absent label)."""


POOL_LABELS: tuple[str, ...] = (
    "gpuledger.io/pool",
    "karpenter.sh/nodepool",
    "cloud.google.com/gke-nodepool",
    "eks.amazonaws.com/nodegroup",
    "kubernetes.azure.com/agentpool",
)
"""Node label keys that name a node's pool, the first one set wins: ours, then Karpenter's
NodePool, a GKE node pool, an EKS managed node group, an AKS agent pool."""


def pool_of(labels: Mapping[str, object]) -> str | None:
    """The node's pool from its labels (`POOL_LABELS`, first non-empty), None when none says."""
    for key in POOL_LABELS:
        value = labels.get(key)
        if value:
            return str(value)
    return None


def label_text(value: object) -> str:
    """`value` as a label value: `NOT_APPLICABLE` for None, else its text."""
    return NOT_APPLICABLE if value is None else str(value)
