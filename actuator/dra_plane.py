"""The plane guard: MIG Manager labels are never written to a node on the DRA plane.

Why: on a node whose GPUs a DRA driver publishes (the GPU Operator's DRA-only node plane: no
device plugin, no MIG Manager), `nvidia.com/mig.config` is read by nobody, and where the driver
creates MIG devices on demand a layout written behind its back would destroy the devices live
claims hold. The rule is the collector's (`collectors.dra_objects.plane_rows`): a node named by
a ResourceSlice of NVIDIA's GPU driver is on the DRA plane. It is checked against the live
cluster right before the write, not against the plan's snapshot: a node can change planes
between planning and applying. It fails closed: where the slices cannot be read (RBAC), no label
is written.
"""

from __future__ import annotations

from gpuledger.actuator.gateway import ClusterGateway
from gpuledger.collectors.dra_objects import NVIDIA_DRIVER
from gpuledger.core.errors import ClusterError, ConflictingPlanError, NotFoundError

SLICES_PATH = "/apis/resource.k8s.io/v1/resourceslices"


class DraPlaneError(ConflictingPlanError):
    """The plan would write MIG Manager labels to a node on the DRA plane (re-plan)."""


def dra_slices(gateway: ClusterGateway, node: str) -> list[str]:
    """Names of the NVIDIA GPU driver's ResourceSlices on `node` ([] where DRA is not served)."""
    try:
        items = gateway.list_objects(SLICES_PATH, what=f"list ResourceSlices of Node/{node}",
                                     field_selector=f"spec.nodeName={node}")
    except NotFoundError:
        return []  # resource.k8s.io/v1 not served: no DRA plane in this cluster
    except ClusterError as exc:
        raise DraPlaneError(f"Node/{node}: cannot tell its GPU plane ({exc}); no MIG label written") from None
    return [str((s.get("metadata") or {}).get("name")) for s in items
            if str((s.get("spec") or {}).get("driver", "")).endswith(NVIDIA_DRIVER)]


def refuse_dra_node(gateway: ClusterGateway, node: str) -> None:
    """Raise `DraPlaneError` when `node` is on the DRA plane."""
    slices = dra_slices(gateway, node)
    if slices:
        raise DraPlaneError(
            f"Node/{node} is on the DRA plane (ResourceSlice {slices[0]} of {NVIDIA_DRIVER}): MIG "
            "Manager labels are never written there; size DeviceClass/claim-template profiles instead"
        )
