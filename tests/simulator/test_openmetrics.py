"""The OpenMetrics file and the live exposition are what Prometheus tooling accepts.

Cases: `promtool tsdb create-blocks-from openmetrics` backfills the whole file and stores every
sample written; the stored DCGM series carry the exact dcgm-exporter label set (MIG series add
GPU_I_PROFILE and GPU_I_ID; time-sliced ones `vgpu`; free devices no pod); GPU_UTIL has no MIG
series; each family is one block with one TYPE line and the file ends with `# EOF`; the
`hostname` and `exported_*` variants render as asked; the sample count equals the frames'; a
thinner metrics step keeps only its grid; the live exposition parses (`promtool check
metrics` reports only the naming lints real dcgm-exporter and vLLM output also gets).
"""

from __future__ import annotations

import re
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest

from gpuledger.core.errors import InputError
from gpuledger.core.window import Window
from gpuledger.simulator.engine import Simulation
from tests.simulator.conftest import START

pytestmark = pytest.mark.prometheus

DCGM_LABELS = ["gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname",
               "DCGM_FI_DRIVER_VERSION", "container", "namespace", "pod"]


@pytest.fixture(scope="module")
def short_sim(tiny_spec) -> Simulation:
    return Simulation(tiny_spec, Window(START + timedelta(hours=10), START + timedelta(hours=12)), seed=7)


@pytest.fixture(scope="module")
def backfilled(short_sim, tmp_path_factory) -> tuple[Path, dict[str, int], Path]:
    base = tmp_path_factory.mktemp("om")
    path = base / "fleet.om"
    counts = short_sim.write_openmetrics(path, chunk=timedelta(minutes=45))
    db = base / "tsdb"
    out = subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", str(path), str(db)],
                         capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr
    (db / "wal").mkdir(exist_ok=True)
    stored = sum(int(line.split()[4]) for line in out.stdout.splitlines() if re.match(r"^[0-9A-Z]{26}\s", line))
    assert stored == sum(counts.values())
    return path, counts, db


def _dump(db: Path, selector: str) -> list[dict[str, str]]:
    out = subprocess.run(["promtool", "tsdb", "dump", f"--match={selector}", str(db)],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    series = []
    for line in out.splitlines():
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', line.split("} ")[0]))
        series.append(labels)
    return series


def test_promtool_backfills_every_sample(backfilled, short_sim):
    path, counts, _ = backfilled
    frames = short_sim.step_frames(0, short_sim.tb.steps)
    assert counts["DCGM_FI_PROF_GR_ENGINE_ACTIVE"] == frames["gpu_samples"].height
    assert counts["DCGM_FI_DEV_GPU_UTIL"] == frames["gpu_samples"]["gpu_util"].drop_nulls().len()
    assert counts["vllm:prompt_tokens"] == frames["token_samples"].height
    assert path.read_bytes().endswith(b"# EOF\n")


def test_stored_dcgm_labels(backfilled):
    _, _, db = backfilled
    samples = _dump(db, '{__name__="DCGM_FI_PROF_GR_ENGINE_ACTIVE"}')
    mig = [s for s in samples if "GPU_I_ID" in s]
    whole = [s for s in samples if "GPU_I_ID" not in s]
    assert mig and whole
    for s in mig:
        assert set(s) - {"__name__"} >= set(DCGM_LABELS) - {"container", "namespace", "pod"} | {"GPU_I_PROFILE"}
        assert re.fullmatch(r"\dg\.\d+gb", s["GPU_I_PROFILE"])
    held = [s for s in samples if "pod" in s]
    assert held and all(set(DCGM_LABELS) <= set(s) for s in held)
    assert any("vgpu" in s for s in held)
    assert not _dump(db, '{__name__="DCGM_FI_DEV_GPU_UTIL",GPU_I_ID!=""}')
    assert _dump(db, '{__name__="kube_pod_container_resource_requests",resource=~"nvidia_com_mig_.*",unit="integer"}')
    assert _dump(db, '{__name__="kube_namespace_labels",label_team="nlp"}')
    assert _dump(db, '{__name__="kueue_admission_wait_time_seconds_bucket",le="+Inf"}')
    assert _dump(db, '{__name__="vllm:generation_tokens_total"}')


def test_families_are_blocks(backfilled):
    path, counts, _ = backfilled
    seen: list[str] = []
    with path.open() as fh:
        for line in fh:
            if line.startswith("# TYPE"):
                seen.append(line.split()[2])
            elif not line.startswith("#"):
                match = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line)
                assert match and match.group(0).startswith(seen[-1]), (line, seen[-1])
    assert len(seen) == len(set(seen)) == len([c for c in counts.values() if c])


def test_label_variants(short_sim, tmp_path):
    path = tmp_path / "x.om"
    short_sim.write_openmetrics(path, hostname_label="hostname", exported=True,
                                families=("DCGM_FI_PROF_GR_ENGINE_ACTIVE",), step=timedelta(minutes=15))
    lines = [line for line in path.read_text().splitlines() if not line.startswith("#")]
    assert lines and all('hostname="' in line and "Hostname=" not in line for line in lines)
    assert all('namespace="gpu-operator"' in line and 'container="nvidia-dcgm-exporter"' in line for line in lines)
    assert any('exported_pod="' in line and 'exported_pod=""' not in line for line in lines)
    stamps = {int(line.rsplit(" ", 1)[1]) for line in lines}
    assert stamps and all(s % 900 == 0 for s in stamps) and len(stamps) == 8
    with pytest.raises(InputError):
        short_sim.write_openmetrics(path, hostname_label="host")
    with pytest.raises(InputError):
        short_sim.write_openmetrics(path, step=timedelta(seconds=90))


def test_live_exposition_parses(short_sim):
    text = short_sim.metrics_text(short_sim.window.start + timedelta(minutes=30))
    assert "# TYPE vllm:prompt_tokens_total counter" in text
    assert "# TYPE kueue_admission_wait_time_seconds histogram" in text
    out = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True,
                         timeout=60, check=False)
    assert out.returncode in (0, 3), out.stderr
    problems = [line for line in (out.stdout + out.stderr).splitlines() if line.strip()]
    allowed = re.compile(r".*(label names should be written in 'snake_case' not 'camelCase'"
                         r"|metric names should not contain ':'"
                         # Volcano's own names (volcano_queue_pod_group_*_count) are gauges:
                         r"|non-histogram and non-summary metrics should not have \"_count\" suffix)$")
    assert all(allowed.match(p) for p in problems), problems[:5]
    frames = short_sim.step_frames(30, 31)
    dcgm = [line for line in text.splitlines() if line.startswith("DCGM_FI_PROF_GR_ENGINE_ACTIVE{")]
    assert len(dcgm) == frames["gpu_samples"].height
    values = sorted(float(line.rsplit(" ", 1)[1]) for line in dcgm)
    assert values == pytest.approx(sorted(frames["gpu_samples"]["gr_engine_active"].to_list()))
