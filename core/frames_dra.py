"""The Dynamic Resource Allocation tables: devices the DRA drivers publish, the claims that hold
them, the pods that reserve the claims, and which plane each GPU node is on.

Why tables of their own: a pod on a DRA GPU requests no `nvidia.com/gpu`, and a dynamically
created MIG device may have no dcgm series at all, so the bill cannot find this capacity in the
telemetry or the pod requests; it reads it from the claims (`analytics.devices.dra`).

Each device and claim row names its `source`: `api` (listed from the Kubernetes API) or
`prometheus` (rebuilt from Prometheus history, where no API listing covers it: a claim's
synthetic UID is `prometheus:<namespace>/<name>`, `collectors.dra_prometheus`).

Keys: a device is `(driver, pool, device)` as its ResourceSlice names it; a claim's allocated
device is keyed by the claim UID and its request, never by a MIG UUID (a dynamic MIG device gets
a new UUID each time it is created: the stable key is the parent card's UUID and the placement).
"""

from __future__ import annotations

from gpuledger.core.table_spec import TS, TableSpec
from gpuledger.core.table_spec import col as _c

API_SOURCE, PROMETHEUS_SOURCE = "api", "prometheus"
"""The two values of `source` on `dra_devices` and `dra_claims`."""
PROMETHEUS_UID_PREFIX = "prometheus:"
"""A claim rebuilt from Prometheus history (which carries no UIDs) is stored under the UID
`prometheus:<namespace>/<name>`; no Kubernetes UID has this shape."""

_SOURCE_DOC = ("where the row came from: `api` (the Kubernetes API's objects) or `prometheus` "
               "(Prometheus history); NULL on rows stored before v012 (the API's)")

DRA_DEVICES = TableSpec(
    "dra_devices", "dimension",
    (
        _c("driver", "VARCHAR", False),
        _c("pool", "VARCHAR", False, "the ResourceSlice's spec.pool.name"),
        _c("device", "VARCHAR", False),
        _c("node", "VARCHAR"),
        _c("kind", "VARCHAR", False, "gpu | mig"),
        _c("uuid", "VARCHAR", doc="the device's UUID (a MIG device's only while it exists)"),
        _c("parent_uuid", "VARCHAR", False, "the physical card: the GPU's own UUID for a whole GPU"),
        _c("profile", "VARCHAR", doc="MIG profile, e.g. 3g.40gb; NULL for a whole GPU"),
        _c("placement", "INTEGER", doc="MIG memory-slice start; -1 for a whole GPU"),
        _c("model", "VARCHAR", doc="canonical model of the parent card"),
        _c("memory_mib", "DOUBLE"),
        _c("dynamic", "INTEGER", False, "1 where the driver creates the MIG device on demand"),
        _c("observed_at", TS, merge="latest"),
        _c("source", "VARCHAR", doc=_SOURCE_DOC),
    ),
    key=("driver", "pool", "device"),
    doc=("Devices published in ResourceSlices, with the card (parent UUID) each lies on; where no "
         "slice was listed, the devices dcgm-exporter's `dra_*` labels name on a card."),
)

DRA_CLAIMS = TableSpec(
    "dra_claims", "interval",
    (
        _c("claim_uid", "VARCHAR", False),
        _c("request", "VARCHAR", False, "the claim's request name the device was allocated for"),
        _c("driver", "VARCHAR", False),
        _c("pool", "VARCHAR", False),
        _c("device", "VARCHAR", False),
        _c("namespace", "VARCHAR", False),
        _c("claim", "VARCHAR", False, "the claim's name"),
        _c("device_class", "VARCHAR"),
        _c("template", "VARCHAR", doc="the ResourceClaimTemplate it was generated from"),
        _c("sharing", "VARCHAR", False, "exclusive | timeslicing | mps (the claim's config)"),
        _c("start_ts", TS, False, "allocated"),
        _c("end_ts", TS, False, "released, or last seen allocated"),
        _c("source", "VARCHAR", doc=_SOURCE_DOC),
    ),
    key=("claim_uid", "request", "driver", "pool", "device"),
    doc=("Each allocated device of each claim over the time the claim held it (`api`), or the "
         "spans Prometheus history shows it allocated (`prometheus`: dcgm-exporter's `dra_*` "
         "series and kube-state-metrics' claim families; `analytics.devices.dra_history` "
         "turns them into held spans)."),
)

DRA_RESERVATIONS = TableSpec(
    "dra_reservations", "interval",
    (
        _c("claim_uid", "VARCHAR", False),
        _c("namespace", "VARCHAR", False),
        _c("pod", "VARCHAR", False),
        _c("start_ts", TS, False),
        _c("end_ts", TS, False),
    ),
    key=("claim_uid", "namespace", "pod"),
    doc="Which pods reserved a claim when (status.reservedFor, the pods' resourceClaimStatuses).",
)

DRA_POD_CLAIMS = TableSpec(
    "dra_pod_claims", "interval",
    (
        _c("namespace", "VARCHAR", False),
        _c("pod", "VARCHAR", False),
        _c("claim", "VARCHAR", False, "the ResourceClaim object's name (resolved for a generated claim)"),
        _c("template", "VARCHAR", doc="the ResourceClaimTemplate it was generated from"),
        _c("start_ts", TS, False, "first seen"),
        _c("end_ts", TS, False, "last seen, plus one step"),
    ),
    key=("namespace", "pod", "claim"),
    doc=("Which pods referenced which claims when, from kube-state-metrics' "
         "`kube_pod_resourceclaim_info`: the pod-claim join where the API's is not collected."),
)

NODE_PLANES = TableSpec(
    "node_planes", "dimension",
    (
        _c("node", "VARCHAR", False),
        _c("plane", "VARCHAR", False, "device-plugin | dra"),
        _c("dynamic_mig", "INTEGER", False, "1 where the DRA driver creates MIG devices on demand"),
        _c("evidence", "VARCHAR", doc="what decided the plane"),
        _c("observed_at", TS),
    ),
    key=("node",),
    doc="Which GPU plane a node is on: MIG plans write MIG Manager labels only on device-plugin nodes.",
)

DRA_TABLES: tuple[TableSpec, ...] = (DRA_DEVICES, DRA_CLAIMS, DRA_RESERVATIONS, NODE_PLANES, DRA_POD_CLAIMS)
