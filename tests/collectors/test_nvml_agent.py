"""The NVML agent through the injected NVML seam (`fake_nvml`), and scraped by real Prometheus.

Cases:
- a reading lists both GPUs, the MIG instances with profiles from our MIG facts (3g.40gb,
  2g.20gb), memory in MiB, power in W, processes;
- `/metrics` uses dcgm-exporter names and labels: `UUID` of the parent on MIG series with
  `GPU_I_ID` and `GPU_I_PROFILE`, `Hostname`, `modelName`; no GPU_UTIL on MIG instances;
  profiling ratios (GPM) appear from the second scrape, as ratios 0..1;
- read-only: every NVML call made is a getter/sampler, and the reader's source names no
  setter (Set/Create/Destroy/Reset/Clear);
- end to end: real Prometheus scrapes the agent; `collect_window` turns the scrapes into
  `gpu_samples` rows exactly as the fake reports them;
- `gpuledger agent` without a usable NVML fails with one line.
"""

from __future__ import annotations

import inspect
import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import requests

from gpuledger.cli import main
from gpuledger.collect_pipeline import collect_window
from gpuledger.collectors import nvml_read
from gpuledger.collectors.nvml_agent import Agent
from gpuledger.collectors.nvml_exporter import render
from gpuledger.collectors.nvml_read import NvmlReader
from gpuledger.core.config import Settings
from gpuledger.core.window import Window, floor_time
from gpuledger.warehouse import Warehouse
from tests.collectors.fake_nvml import FakeNvml
from tools.metrics_servers import ServerPool

LINE = re.compile(r"^(\w+)\{(.*)\} (\S+)$")


def _parse(text: str) -> list[tuple[str, dict[str, str], float]]:
    out = []
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        match = LINE.match(line)
        assert match, line
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match.group(2)))
        out.append((match.group(1), labels, float(match.group(3))))
    return out


def test_reading() -> None:
    reader = NvmlReader(FakeNvml())
    reading = reader.read()
    assert reading.driver_version == "580.82.07" and not reading.errors
    gpu0, gpu1 = reading.gpus
    assert (gpu0.uuid, gpu0.mig_enabled, gpu0.gpu_util, gpu0.power_w, gpu0.fb_used_mib) == (
        "GPU-0000-aaaa", False, 37.0, 250.5, 20480.0)
    assert [(p.pid, p.fb_used_mib) for p in gpu0.processes] == [(4242, 20000.0)]
    assert gpu1.mig_enabled and gpu1.gpu_util is None
    assert [(i.gpu_i_id, i.profile, i.fb_used_mib) for i in gpu1.instances] == [
        (1, "3g.40gb", 1024.0), (2, "2g.20gb", 0.0)]
    assert [p.pid for p in gpu1.instances[0].processes] == [777]
    assert gpu0.prof == {}  # GPM needs two samples
    again = reader.read()
    assert again.gpus[0].prof == {"gr_engine_active": 0.42, "sm_active": 0.30,
                                  "tensor_active": 0.125, "dram_active": 0.55}
    assert again.gpus[1].instances[0].prof["gr_engine_active"] == 0.42


def test_metrics_use_dcgm_names_and_labels() -> None:
    reader = NvmlReader(FakeNvml())
    first = _parse(render(reader.read(), "node-7"))
    assert not [m for m, _, _ in first if m.startswith("DCGM_FI_PROF")]
    series = _parse(render(reader.read(), "node-7"))
    util = [(labels["UUID"], v) for m, labels, v in series if m == "DCGM_FI_DEV_GPU_UTIL"]
    assert util == [("GPU-0000-aaaa", 37.0)]
    fb = {(labels["UUID"], labels.get("GPU_I_ID"), labels.get("GPU_I_PROFILE")): v
          for m, labels, v in series if m == "DCGM_FI_DEV_FB_USED"}
    assert fb == {("GPU-0000-aaaa", None, None): 20480.0, ("GPU-1111-bbbb", "1", "3g.40gb"): 1024.0,
                  ("GPU-1111-bbbb", "2", "2g.20gb"): 0.0}
    for _, labels, _ in series:
        assert labels["Hostname"] == "node-7"
        if "gpu" in labels:
            assert labels["modelName"] == "NVIDIA H100 80GB HBM3"
            assert labels["DCGM_FI_DRIVER_VERSION"] == "580.82.07"
    names = {m for m, _, _ in series}
    assert names == {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_DEV_GPU_UTIL",
                     "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_POWER_USAGE",
                     "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_DEV_GPU_TEMP",
                     "gpuledger_nvml_process_fb_used_mib"}
    temps = {labels.get("GPU_I_ID"): v for m, labels, v in series if m == "DCGM_FI_DEV_GPU_TEMP"}
    assert temps == {None: 55.0, "1": 55.0, "2": 55.0}
    active = {labels.get("GPU_I_ID"): v for m, labels, v in series if m == "DCGM_FI_PROF_GR_ENGINE_ACTIVE"}
    assert active == {None: 0.42, "1": 0.42, "2": 0.42}


def test_read_only() -> None:
    fake = FakeNvml()
    reader = NvmlReader(fake)
    reader.read()
    reader.read()
    reader.close()
    allowed = re.compile(r"^nvml(Init|Shutdown|SystemGet\w+|DeviceGet\w+|Gpm(QueryDeviceSupport|SampleAlloc|"
                         r"SampleFree|SampleGet|MigSampleGet|MetricsGet))$")
    assert fake.calls and all(allowed.match(c) for c in fake.calls), set(fake.calls)
    named = set(re.findall(r"nvml\w+", inspect.getsource(nvml_read)))
    assert not [n for n in named if re.search(r"Set|Create|Destroy|Reset|Clear", n)]
    assert fake.initialized == 0


@pytest.mark.prometheus
def test_prometheus_scrapes_agent_into_warehouse(metrics_servers: ServerPool, tmp_path: Path) -> None:
    agent = Agent(FakeNvml(), "127.0.0.1", 0, hostname="agent-node").start()
    try:
        assert "DCGM_FI_DEV_FB_USED" in requests.get(f"http://127.0.0.1:{agent.port}/metrics", timeout=5).text
        server = metrics_servers.scraping_prometheus([f"127.0.0.1:{agent.port}"], interval="1s")
        deadline = time.monotonic() + 60
        first = server.first_scrape(timeout_s=60, poll_s=0.5)
        assert first is not None, "Prometheus never scraped the agent"
        step = timedelta(seconds=2)
        start = floor_time(datetime.fromtimestamp(first, UTC), step) + 2 * step
        end = start + 4 * step
        while datetime.now(UTC) < end + step and time.monotonic() < deadline:
            time.sleep(0.5)
        settings = Settings(prometheus={"step": "2s", "chunk": "1h", "retries": 0})
        with Warehouse.open(tmp_path / "w.duckdb") as wh:
            collect_window(wh, settings, server.url, Window(start, end, step))
            rows = wh.query("SELECT ts, node, uuid, gpu_i_id, mig_profile, gpu_util, fb_used_mib, power_w, "
                            "gr_engine_active FROM gpu_samples ORDER BY ts, uuid, gpu_i_id")
    finally:
        agent.stop()
    assert rows.height == 4 * 3  # 4 instants x (GPU 0, MIG 1, MIG 2)
    assert set(rows["node"]) == {"agent-node"}
    by_device = {(r["uuid"], r["gpu_i_id"], r["mig_profile"]) for r in rows.to_dicts()}
    assert by_device == {("GPU-0000-aaaa", -1, None), ("GPU-1111-bbbb", 1, "3g.40gb"),
                         ("GPU-1111-bbbb", 2, "2g.20gb")}
    whole = rows.filter(rows["gpu_i_id"] == -1)
    assert set(whole["gpu_util"]) == {37.0} and set(whole["fb_used_mib"]) == {20480.0}
    assert set(whole["power_w"]) == {250.5} and set(whole["gr_engine_active"]) == {0.42}
    assert rows.filter(rows["gpu_i_id"] >= 0)["gpu_util"].null_count() == 8


def test_agent_command_without_nvml(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    import pynvml

    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        pass
    else:
        pynvml.nvmlShutdown()
        pytest.skip("this machine has a working NVML; the no-NVML error path cannot be shown here")
    code = main(["--warehouse", str(tmp_path / "w.duckdb"), "agent", "--host", "127.0.0.1", "--port", "0"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1 and "NVML is not usable" in err[0]
