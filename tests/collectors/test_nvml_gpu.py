"""The NVML agent against a real GPU (skips, saying why, where no GPU/driver is present).

Cases:
- `tools/gpu_check.py` reads every GPU twice, serves and scrapes `/metrics`, and finds the
  MIG mode and power limit unchanged afterwards (the agent only reads);
- the scraped series carry dcgm-exporter names and a parent `UUID` starting with `GPU-`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]


def _nvml_problem() -> str | None:
    try:
        import pynvml
    except ImportError:
        return "pynvml (nvidia-ml-py) is not installed"
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return f"no usable NVIDIA GPU/driver on this machine ({exc})"
    try:
        count = pynvml.nvmlDeviceGetCount()
    finally:
        pynvml.nvmlShutdown()
    return None if count else "NVML reports no GPU on this machine"


def test_agent_reads_the_real_gpu(tmp_path: Path) -> None:
    problem = _nvml_problem()
    if problem:
        pytest.skip(problem)
    out = tmp_path / "gpu_check.json"
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "gpu_check.py"), "--out", str(out)],
                          capture_output=True, text=True, timeout=300, check=False)
    result = json.loads(out.read_text())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert result["ok"] and result["unchanged"]
    assert result["gpu_count"] >= 1
    assert all(g["uuid"].startswith("GPU-") for g in result["reading"]["gpus"])
    assert "DCGM_FI_DEV_FB_USED" in result["scraped_metric_names"]
    assert "DCGM_FI_DEV_POWER_USAGE" in result["scraped_metric_names"]
    assert "DCGM_FI_DEV_GPU_TEMP" in result["scraped_metric_names"]
