"""The HAMi vGPU table: which card HAMi placed each container on, and how much of it.

Why a table of its own: on a HAMi node dcgm-exporter cannot name the pods on a card (HAMi's
device IDs `GPU-<uuid>-<n>` are not card UUIDs, HAMi issues 112 and 1032), so the samples carry
no holder at all. Who held a card, and what part of it, is known only from HAMi itself: the
pod annotation `hami.io/vgpu-devices-allocated` (the Kubernetes API) or the scheduler's
`hami_vgpu_memory_allocated_bytes` / `hami_vgpu_core_allocated_ratio` series (Prometheus
history). Each source's rows are kept under its name (`source`), so a reader can say where a
holder came from, and one source never erases the other's spans.

Amounts are what HAMi enforces per device, not what the pod asked for: a
`nvidia.com/gpumem-percentage` request is already MiB here (HAMi converts it at scheduling),
and a pod that asked no memory got the whole card's. `card_mem_mib` is HAMi's own total for the
card (the register annotation's `devmem`, `hami_gpu_memory_limit_bytes`), the denominator the
MiB are a part of.
"""

from __future__ import annotations

from gpuledger.core.table_spec import TS, TableSpec
from gpuledger.core.table_spec import col as _c

VGPU_ALLOCATIONS = TableSpec(
    "vgpu_allocations", "interval",
    (
        _c("uuid", "VARCHAR", False, "the card (GPU UUID) HAMi placed the container on"),
        _c("namespace", "VARCHAR", False),
        _c("pod", "VARCHAR", False),
        _c("container_index", "INTEGER", False,
           "position in HAMi's per-container list (init containers first), the scheduler's "
           "`container_index`"),
        _c("source", "VARCHAR", False, "api (the pod annotation) | prometheus (the scheduler's series)"),
        _c("node", "VARCHAR"),
        _c("mem_mib", "DOUBLE", doc="device memory HAMi allocated, MiB"),
        _c("cores_pct", "DOUBLE", doc="SM share HAMi allocated, % of the card (0: no core limit)"),
        _c("card_mem_mib", "DOUBLE", doc="HAMi's total memory of the card, MiB (NULL: not published)"),
        _c("start_ts", TS, False, "first seen allocated"),
        _c("end_ts", TS, False, "last seen allocated, plus one step (the API: the snapshot time)"),
    ),
    key=("uuid", "namespace", "pod", "container_index", "source"),
    doc="HAMi's pod-to-card allocations over time, per source (the holders of a HAMi card).",
)

HAMI_TABLES: tuple[TableSpec, ...] = (VGPU_ALLOCATIONS,)
