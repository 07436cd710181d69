"""A small fake of the `pynvml` calls the agent makes (the NVML seam; no GPU exists in CI).

Two H100s: GPU 0 whole (one process), GPU 1 in MIG mode with instances 1 (3g.40gb) and 2
(2g.20gb). GPM counters advance by a fixed amount per sample so the second reading yields known
ratios. Every call is recorded in `calls`; an attribute the fake does not implement raises, so an
unexpected (e.g. writing) call cannot pass silently.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

MIB = 1024 * 1024
NVML_TEMPERATURE_GPU = 0
NVML_DEVICE_MIG_ENABLE = 1
NVML_GPM_METRICS_GET_VERSION = 1
NVML_GPM_METRIC_GRAPHICS_UTIL = 1
NVML_GPM_METRIC_SM_UTIL = 2
NVML_GPM_METRIC_ANY_TENSOR_UTIL = 5
NVML_GPM_METRIC_DRAM_BW_UTIL = 10
GPM_PERCENT = {1: 42.0, 2: 30.0, 5: 12.5, 10: 55.0}
"""What GPM reports per metric id between two samples, in percent."""


class NVMLError(Exception):
    pass


@dataclass
class _Device:
    index: int
    uuid: str
    mig: bool = False
    instances: dict[int, dict[str, Any]] = field(default_factory=dict)


class _Metrics:
    def __init__(self) -> None:
        self.version = 0
        self.numMetrics = 0
        self.sample1: Any = None
        self.sample2: Any = None
        self.metrics = [SimpleNamespace(metricId=0, nvmlReturn=0, value=0.0) for _ in range(16)]


class FakeNvml:
    NVMLError = NVMLError
    NVML_TEMPERATURE_GPU = NVML_TEMPERATURE_GPU
    NVML_DEVICE_MIG_ENABLE = NVML_DEVICE_MIG_ENABLE
    NVML_GPM_METRICS_GET_VERSION = NVML_GPM_METRICS_GET_VERSION
    NVML_GPM_METRIC_GRAPHICS_UTIL = NVML_GPM_METRIC_GRAPHICS_UTIL
    NVML_GPM_METRIC_SM_UTIL = NVML_GPM_METRIC_SM_UTIL
    NVML_GPM_METRIC_ANY_TENSOR_UTIL = NVML_GPM_METRIC_ANY_TENSOR_UTIL
    NVML_GPM_METRIC_DRAM_BW_UTIL = NVML_GPM_METRIC_DRAM_BW_UTIL
    c_nvmlGpmMetricsGet_t = _Metrics

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.initialized = 0
        self.devices = [
            _Device(0, "GPU-0000-aaaa"),
            _Device(1, "GPU-1111-bbbb", mig=True, instances={
                1: {"slices": 3, "mem_mb": 40192, "uuid": "MIG-1111-i1", "used": 1024},
                2: {"slices": 2, "mem_mb": 19968, "uuid": "MIG-1111-i2", "used": 0},
            }),
        ]

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("nvml"):
            object.__getattribute__(self, "calls").append(name)
        return object.__getattribute__(self, name)

    # lifecycle / system
    def nvmlInit(self) -> None:
        self.initialized += 1

    def nvmlShutdown(self) -> None:
        self.initialized -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        return "580.82.07"

    # devices
    def nvmlDeviceGetCount(self) -> int:
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> Any:
        return ("gpu", i)

    def _dev(self, h: Any) -> _Device:
        return self.devices[h[1]]

    def nvmlDeviceGetUUID(self, h: Any) -> str:
        if h[0] == "mig":
            return str(self._dev(h).instances[h[2]]["uuid"])
        return self._dev(h).uuid

    def nvmlDeviceGetName(self, h: Any) -> str:
        return "NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetPciInfo(self, h: Any) -> Any:
        return SimpleNamespace(busId=f"00000000:{0x18 + h[1]:02X}:00.0".encode())

    def nvmlDeviceGetMemoryInfo(self, h: Any) -> Any:
        if h[0] == "mig":
            inst = self._dev(h).instances[h[2]]
            total = inst["mem_mb"] * MIB
            return SimpleNamespace(total=total, used=inst["used"] * MIB, free=total - inst["used"] * MIB)
        used = 20480 * MIB if h[1] == 0 else 1024 * MIB
        return SimpleNamespace(total=81559 * MIB, used=used, free=81559 * MIB - used)

    def nvmlDeviceGetUtilizationRates(self, h: Any) -> Any:
        return SimpleNamespace(gpu=37, memory=12)

    def nvmlDeviceGetPowerUsage(self, h: Any) -> int:
        return 250_500

    def nvmlDeviceGetTemperature(self, h: Any, sensor: int) -> int:
        return 55

    def nvmlDeviceGetMigMode(self, h: Any) -> tuple[int, int]:
        dev = self._dev(h)
        return (1, 1) if dev.mig else (0, 0)

    def nvmlDeviceGetMaxMigDeviceCount(self, h: Any) -> int:
        return 7 if self._dev(h).mig else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h: Any, slot: int) -> Any:
        ids = sorted(self._dev(h).instances)
        if slot >= len(ids):
            raise NVMLError("Not Found")
        return ("mig", h[1], ids[slot])

    def nvmlDeviceGetGpuInstanceId(self, h: Any) -> int:
        return int(h[2])

    def nvmlDeviceGetAttributes(self, h: Any) -> Any:
        inst = self._dev(h).instances[h[2]]
        return SimpleNamespace(gpuInstanceSliceCount=inst["slices"], memorySizeMB=inst["mem_mb"])

    def nvmlDeviceGetComputeRunningProcesses(self, h: Any) -> list[Any]:
        if h[0] == "gpu" and h[1] == 0:
            return [SimpleNamespace(pid=4242, usedGpuMemory=20000 * MIB)]
        if h[0] == "mig" and h[2] == 1:
            return [SimpleNamespace(pid=777, usedGpuMemory=1000 * MIB)]
        return []

    # GPM
    def nvmlGpmQueryDeviceSupport(self, h: Any) -> Any:
        return SimpleNamespace(isSupportedDevice=1)

    def nvmlGpmSampleAlloc(self) -> Any:
        return SimpleNamespace(t=None)

    def nvmlGpmSampleFree(self, sample: Any) -> None:
        sample.t = "freed"

    def nvmlGpmSampleGet(self, h: Any, sample: Any) -> Any:
        sample.t = len(self.calls)
        return sample

    def nvmlGpmMigSampleGet(self, h: Any, gi: int, sample: Any) -> Any:
        sample.t = len(self.calls)
        return sample

    def nvmlGpmMetricsGet(self, request: Any) -> Any:
        assert request.sample1.t not in (None, "freed") and request.sample2.t not in (None, "freed")
        for i in range(request.numMetrics):
            request.metrics[i].value = GPM_PERCENT[request.metrics[i].metricId]
            request.metrics[i].nvmlReturn = 0
        return request
