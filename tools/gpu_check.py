#!/usr/bin/env python3
"""Run the NVML agent's read path against the real GPU(s) of this machine, print JSON, exit.

For a GPU machine where only nvidia-ml-py may be installed: stdlib + pynvml + this repository's
`collectors/nvml_read.py`, `nvml_exporter.py` and `nvml_agent.py` (themselves stdlib-only).

It (1) reads every GPU and MIG instance twice one second apart (GPM ratios need two samples),
(2) serves the agent on a free 127.0.0.1 port and scrapes its `/metrics` twice, (3) checks the
reading changed nothing: MIG mode and power limit are compared before and after.
Exit 0 when a GPU was read and nothing changed; 2 when NVML is not usable; 1 otherwise.

    python3 tools/gpu_check.py [--out FILE]
"""

from __future__ import annotations

import json
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _state(nvml: Any) -> list[dict[str, Any]]:
    """Settings the agent must never change, per GPU."""
    out = []
    for i in range(nvml.nvmlDeviceGetCount()):
        handle = nvml.nvmlDeviceGetHandleByIndex(i)
        entry: dict[str, Any] = {"index": i}
        for key, fn in (("mig_mode", nvml.nvmlDeviceGetMigMode),
                        ("power_limit_mw", nvml.nvmlDeviceGetPowerManagementLimit)):
            try:
                value = fn(handle)
                entry[key] = list(value) if isinstance(value, tuple | list) else value
            except nvml.NVMLError as exc:
                entry[key] = f"unsupported ({exc})"
        out.append(entry)
    return out


def main(argv: list[str]) -> int:
    out_path = Path(argv[argv.index("--out") + 1]) if "--out" in argv else None
    result: dict[str, Any] = {"ok": False}
    try:
        import pynvml
    except ImportError:
        result["error"] = "pynvml (package nvidia-ml-py) is not installed"
        return _emit(result, out_path, 2)
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        result["error"] = f"NVML is not usable here: {exc}"
        return _emit(result, out_path, 2)
    from gpuledger.collectors.nvml_agent import Agent
    from gpuledger.collectors.nvml_exporter import render
    from gpuledger.collectors.nvml_read import NvmlReader

    try:
        before = _state(pynvml)
        reader = NvmlReader(pynvml)
        started = time.perf_counter()
        first = reader.read()
        result["first_read_s"] = round(time.perf_counter() - started, 4)
        time.sleep(1.0)
        second = reader.read()
        text = render(second, "gpu-check")
        reader.close()
        agent = Agent(pynvml, "127.0.0.1", 0, hostname="gpu-check").start()
        try:
            url = f"http://127.0.0.1:{agent.port}/metrics"
            urllib.request.urlopen(url, timeout=30).read()
            time.sleep(1.0)
            scraped = urllib.request.urlopen(url, timeout=30).read().decode()
        finally:
            agent.stop()
        after = _state(pynvml)
        series = [ln for ln in scraped.splitlines() if ln and not ln.startswith("#")]
        result.update({
            "driver_version": second.driver_version,
            "gpu_count": len(second.gpus),
            "first_reading_prof": [g.prof for g in first.gpus],
            "reading": second.to_dict(),
            "rendered_series": len([ln for ln in text.splitlines() if ln and not ln.startswith("#")]),
            "scraped_series": len(series),
            "scraped_metric_names": sorted({ln.split("{")[0] for ln in series}),
            "scraped_sample": series[:40],
            "state_before": before,
            "state_after": after,
            "unchanged": before == after,
            "errors": second.errors,
        })
        result["ok"] = bool(second.gpus) and before == after and bool(series)
    finally:
        pynvml.nvmlShutdown()
    return _emit(result, out_path, 0 if result["ok"] else 1)


def _emit(result: dict[str, Any], out_path: Path | None, code: int) -> int:
    text = json.dumps(result, indent=2, default=str)
    print(text)
    if out_path is not None:
        out_path.write_text(text + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
