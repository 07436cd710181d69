"""THE rule for reading time-slicing and MPS off a node's labels, as GPU feature discovery writes them.

Why one home: the NVIDIA device plugin replicates a card (time-slicing or MPS) by
configuration, and only GPU feature discovery (GFD) says so on the node; dcgm-exporter does not
(by default it shows one series per card labelled with ONE arbitrary sharing pod, and with
`--kubernetes-virtual-gpus` a card no pod uses has no series at all). Both collectors (the
Kubernetes API's node labels, kube-state-metrics' `kube_node_labels`) and the bill (the node
labels stored in `nodes.labels`) must read the same labels the same way, or a card is billed as
shared on one path and whole on the other.

What GFD writes (NVIDIA/k8s-device-plugin `internal/lm/resource.go`, `nvml.go`; fixtures in
`tests/fixtures/planes/timeslice/`):
- `nvidia.com/gpu.replicas`: the configured replicas per card (`sharing.timeSlicing|mps.
  resources[].replicas`); 1 without sharing; "0" on MIG-enabled cards;
- `nvidia.com/gpu.sharing-strategy`: `time-slicing`, `mps` or `none` (only GFD releases with
  MPS support write it);
- `nvidia.com/mps.capable`: "true" where the card is shared by MPS (the MPS control daemon's
  DaemonSet selects these nodes);
- `nvidia.com/gpu.product`: the NVML name with `-SHARED` appended when replicated, unless the
  config renames the resource (`renameByDefault`: the resource becomes `nvidia.com/gpu.shared`
  and the product keeps its plain name). The suffix is not needed here: the replicas say it.

The rule (`replicated`): a node's cards are replicated when the strategy label says
`time-slicing` or `mps`, or, where GFD predates the strategy label (or kube-state-metrics does
not export it), when the replica count is above one: MPS if `nvidia.com/mps.capable` is "true",
else time-slicing. `none`, a count of 0 or 1, or no label at all: not replicated. MPS and
time-slicing are billed alike, each replica 1 / replicas of the card: under MPS the device
plugin's control daemon enforces exactly that (`set_default_device_pinned_mem_limit` = memory /
replicas, `set_default_active_thread_percentage` = 100 / replicas, `cmd/mps-control-daemon/mps/
daemon.go`); under time-slicing it is a billing convention (nothing enforces a fraction).

Pure Python over plain mappings: no heavy import (docs/decisions/0167).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

REPLICAS = "nvidia.com/gpu.replicas"
STRATEGY = "nvidia.com/gpu.sharing-strategy"
MPS_CAPABLE = "nvidia.com/mps.capable"
PRODUCT = "nvidia.com/gpu.product"
SHARED_RESOURCE = "nvidia.com/gpu.shared"
"""The resource a `renameByDefault` config advertises (`DefaultSharedResourceNameSuffix`)."""

Strategy = Literal["time-slicing", "mps"]
STRATEGIES: tuple[Strategy, ...] = ("time-slicing", "mps")


@dataclass(frozen=True, slots=True)
class Replicated:
    """How a node's cards are replicated: the strategy, and the configured replicas per card
    (None where no label states the count: the bill then falls back and names the node)."""

    strategy: Strategy
    replicas: int | None


def replica_count(labels: Mapping[str, object]) -> int | None:
    """`nvidia.com/gpu.replicas` as a count, None when absent or not a whole number."""
    try:
        return int(str(labels.get(REPLICAS, "")).strip())
    except ValueError:
        return None


def replicated(labels: Mapping[str, object]) -> Replicated | None:
    """The module's rule: how the node's cards are replicated, or None when they are not."""
    count = replica_count(labels)
    replicas = count if count is not None and count > 1 else None
    strategy = str(labels.get(STRATEGY) or "").strip()
    if strategy == "none":
        return None
    if strategy in STRATEGIES:
        return Replicated("mps" if strategy == "mps" else "time-slicing", replicas)
    if replicas is None:
        return None
    mps = str(labels.get(MPS_CAPABLE) or "").strip().lower() == "true"
    return Replicated("mps" if mps else "time-slicing", replicas)
