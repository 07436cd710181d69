"""HAMi's shapes for the simulated vGPU pools: what a real HAMi cluster publishes, nothing more.

Written from the upstream sources cited in tests/fixtures/planes/SOURCES.md (hami/), never from
what gpuledger reads:

1. Requests (`nvidia.com/gpu` 1 and the pod's cut of the card) in all four of HAMi's forms,
   taken in turn by pod number: `gpumem` + `gpucores`, `gpumem-percentage` + `gpucores`,
   `gpumem` alone, `gpumem-percentage` alone. What HAMi then enforces (the allocation
   annotation and the scheduler's series): memory in MiB (a percentage converted
   `devmem * pct / 100`, integer as HAMi computes it), cores in % (0 when not asked: no core
   limit). A slot's fraction is whole percent of the card, so every form gives the slot's share
   (`max(cores/100, MiB/devmem)`, the cut HAMi keeps for the pod).
2. Nodes: the register annotation `hami.io/node-nvidia-register` (the current JSON form, zero
   fields omitted) and the handshake; capacity `nvidia.com/gpu` = cards x `deviceSplitCount`
   and nothing else (no `nvidia.com/gpumem`/`gpucores`: the chart marks them
   `ignoredByScheduler`). `gpu=on` stays (the chart's default node selector, an admin's label).
3. Pods: `schedulerName: hami-scheduler` and the annotations of `devices.go` /
   `util/types.go` after the device plugin allocated (`vgpu-devices-to-allocate: ;`).
4. The scheduler's `:31993` series (`cmd/scheduler/metrics.go`, labels sorted, `zone="vGPU"`):
   per card `hami_gpu_memory_limit_bytes`, `hami_gpu_core_limit_ratio`,
   `hami_gpu_memory_allocated_bytes`, `hami_gpu_core_allocated_ratio`, `hami_gpu_shared_count`
   while the card is present; per container device `hami_vgpu_memory_allocated_bytes` and
   `hami_vgpu_core_allocated_ratio` while the pod runs.
dcgm-exporter gives such a card one series without pod labels (`samples`): that is the
simulator's part of "what HAMi does not publish". The scheduler's series and the API
collector's view of the annotations are `simulator.hami_series` (which reads the schedule).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from gpuledger.simulator.fleet import MODEL_FACTS

if TYPE_CHECKING:
    from gpuledger.simulator.hardware import Hardware, Slot

DEVICE_SPLIT_COUNT = 10
"""HAMi's default `deviceSplitCount`: `nvidia.com/gpu` capacity per card."""
MIB = 1024 * 1024
SCHEDULER_FAMILIES: tuple[tuple[str, str], ...] = (
    ("hami_gpu_memory_limit_bytes", "Device memory limit for a certain GPU"),
    ("hami_gpu_core_limit_ratio", "Device core limit for a certain GPU"),
    ("hami_gpu_memory_allocated_bytes", "Device memory allocated for a certain GPU"),
    ("hami_gpu_core_allocated_ratio", "Device core allocated for a certain GPU"),
    ("hami_gpu_shared_count", "Number of containers sharing this GPU"),
    ("hami_vgpu_memory_allocated_bytes", "vGPU memory allocated from a container"),
    ("hami_vgpu_core_allocated_ratio", "vGPU core allocated from a container"),
)
"""(name, HELP) of the scheduler families emitted, as `metrics.go` describes them."""


def devmem_mib(memory_mib: float) -> int:
    """HAMi's `devmem` of a card: NVML's total memory in MiB."""
    return int(memory_mib)


def hami_request(pod_id: int, slot: Slot, memory_mib: float) -> tuple[dict[str, int], tuple[int, int]]:
    """A vGPU pod's requests (form by pod number, step 1) and what HAMi allocates (MiB, cores)."""
    total = devmem_mib(memory_mib)
    pct = round(slot.share * 100)
    by_mib = total * pct // 100
    form = pod_id % 4
    requests: dict[str, int] = {"nvidia.com/gpu": 1}
    if form in (0, 2):
        requests["nvidia.com/gpumem"] = by_mib
    else:
        requests["nvidia.com/gpumem-percentage"] = pct
    if form in (0, 1):
        requests["nvidia.com/gpucores"] = pct
    return requests, (by_mib, pct if form in (0, 1) else 0)


def device_type(model: str) -> str:
    """The register annotation's `type`: the NVML name, `NVIDIA-` prefixed only when it does not
    start with NVIDIA."""
    name = str(MODEL_FACTS[model]["model_name"])
    return name if name.startswith("NVIDIA") else f"NVIDIA-{name}"


def register_annotation(hw: Hardware, n_idx: int, k: int, spans: list[tuple[int, int]]) -> str:
    """`hami.io/node-nvidia-register` of a node at step `k` (JSON, `omitempty` fields dropped):
    the cards present then (`spans`: `presence_steps`; replacements and churn follow them)."""
    node = hw.nodes[n_idx]
    devices = []
    for g in sorted(node.gpus + node.replacements, key=lambda g: hw.gpus[g].index):
        if not spans[g][0] <= k < spans[g][1]:
            continue
        gpu = hw.gpus[g]
        item: dict[str, Any] = {"id": gpu.uuid}
        if gpu.index:
            item["index"] = gpu.index
        item.update({"count": DEVICE_SPLIT_COUNT, "devmem": devmem_mib(gpu.memory_mib), "devcore": 100,
                     "type": device_type(gpu.model), "mode": "hami-core", "health": True})
        devices.append(item)
    return json.dumps(devices, separators=(",", ":"))


def node_annotations(hw: Hardware, n_idx: int, k: int, spans: list[tuple[int, int]],
                     at_text: str) -> dict[str, str]:
    """A vGPU node's HAMi annotations at step `k` (`at_text`: `time.DateTime` of the handshake)."""
    return {"hami.io/node-handshake": f"Requesting_{at_text}",
            "hami.io/node-nvidia-register": register_annotation(hw, n_idx, k, spans)}


def pod_annotations(uuid: str, allocated: tuple[int, int], node: str, bind_s: int) -> dict[str, str]:
    """The annotations of a pod HAMi placed and its device plugin allocated (step 3)."""
    mem, cores = allocated
    return {
        "hami.io/bind-phase": "success", "hami.io/bind-time": str(bind_s),
        "hami.io/vgpu-devices-allocated": f"{uuid},NVIDIA,{mem},{cores}:;",
        "hami.io/vgpu-devices-to-allocate": ";", "hami.io/vgpu-node": node,
        "hami.io/vgpu-time": str(bind_s),
    }
