"""Field conformance: real dcgm-exporter output, read right by the real collection path.

Each fixture in `tests/fixtures/dcgm/` is real exporter output copied from a public source
(cited per test below and in SOURCES.md, which lists the facts each must yield). The test
writes its samples at 5 one-minute instants into an OpenMetrics file, backfills it with
promtool into a real Prometheus, and runs `collect_window` (the `gpuledger collect` path)
into a real DuckDB warehouse. A fixture whose only family is one we do not collect
(SM_CLOCK, PCIE_RX_BYTES, VGPU_LICENSE_STATUS) is carried on `DCGM_FI_DEV_FB_USED`, label
set unchanged: every dcgm-exporter field of a device carries the same labels.

Cases:
- whole GPUs with pod mapping (#490): 3 GPUs, one held, two unallocated;
- legacy 2.x label set without modelName/Hostname (gpu-monitoring-tools#138): kept, the
  missing labels counted as noted series, model and node `unknown`;
- MIG instances with pods (#512): 3 × 1g.10gb, one unallocated;
- `7g.79gb` (#713): mapped to the catalog's `7g.80gb`; empty pod labels are no pod;
- MIG on A30 (#68): GR_ENGINE_ACTIVE and PIPE_TENSOR_ACTIVE values; unknown-to-catalog
  profile kept as reported;
- DRA whole GPU shared by two pods through one claim (kubernetes/website): one card, one row
  per instant, the second series counted `duplicate_series`; GH200 is not H200-141GB;
- DRA + MIG with lowercase `hostname` (#664): node from `hostname`, GPU_I_* used;
- DRA + MIG on GH200 without GPU_I_* (#532): an instance from `dra_mig_*` labels;
- old exporter with GPU_UTIL only (gpu-monitoring-tools#138): activity from GPU_UTIL/100;
- `exported_*` labels behind a ServiceMonitor (#340): the workload, not the exporter pod;
- `canonical_model`: GH200/GB200 are not H200/B200; dcgm and GFD spellings map;
- `canonical_profile`: rounding quirks map by compute slices, unknown models unchanged.
"""

from __future__ import annotations

import re
import zlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from gpuledger.collect_pipeline import CollectReport, collect_window
from gpuledger.core.activity import activity_sql
from gpuledger.core.frames import DCGM_FIELDS
from gpuledger.core.mig import canonical_model, canonical_profile
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse
from tests.collectors.conftest import tiny_settings
from tests.collectors.gauges import write_gauges
from tools.metrics_servers import ServerPool

pytestmark = pytest.mark.prometheus

FIXTURES = Path(__file__).parents[1] / "fixtures" / "dcgm"
NAMES = sorted(p.stem for p in FIXTURES.glob("*.prom"))
T0 = datetime(2026, 2, 1, tzinfo=UTC)
POINTS = 5
CARRIER = "DCGM_FI_DEV_FB_USED"
LINE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{.*\})\s+(\S+)$")


def _slot(name: str) -> datetime:
    return T0 + timedelta(hours=NAMES.index(name))


def _samples(name: str) -> list[tuple[str, str, str]]:
    """(metric, label text, value) of each sample line, carried as described above."""
    out = []
    for raw in (FIXTURES / f"{name}.prom").read_text().splitlines():
        if raw and not raw.startswith("#"):
            match = LINE.match(raw)
            assert match, raw
            out.append((match.group(1), match.group(2), match.group(3)))
    if not any(metric in DCGM_FIELDS for metric, _, _ in out):
        return [(CARRIER, labels, value) for _, labels, value in out]
    return [s for s in out if s[0] in DCGM_FIELDS]


def _openmetrics(path: Path) -> Path:
    by_metric: dict[str, list[str]] = {}
    for name in NAMES:
        start = int(_slot(name).timestamp())
        for metric, labels, value in _samples(name):
            by_metric.setdefault(metric, []).extend(
                f"{metric}{labels} {value} {start + 60 * i}" for i in range(POINTS))
    return write_gauges(path, by_metric)


@pytest.fixture(scope="module")
def prom_url(metrics_servers: ServerPool, tmp_path_factory: pytest.TempPathFactory) -> str:
    return metrics_servers.prometheus(_openmetrics(tmp_path_factory.mktemp("dcgm") / "f.om")).url


def _collect(prom_url: str, tmp_path: Path, name: str) -> tuple[Warehouse, CollectReport]:
    start = _slot(name)
    window = Window(start, start + timedelta(minutes=POINTS))
    wh = Warehouse.open(tmp_path / f"{name}.duckdb")
    report = collect_window(wh, tiny_settings(chunk="1h"), prom_url, window,
                            now=lambda: window.end + timedelta(minutes=5))
    return wh, report


def _rows(wh: Warehouse, sql: str) -> list[tuple[object, ...]]:
    return wh.query(sql).rows()


def _devices(wh: Warehouse) -> list[tuple[object, ...]]:
    """Per device: (uuid, gpu_i_id, mig_profile, node, namespace, pod, container, rows)."""
    return _rows(wh, "SELECT uuid, gpu_i_id, mig_profile, node, namespace, pod, container, count(*) "
                     "FROM gpu_samples GROUP BY ALL ORDER BY uuid, gpu_i_id")


def test_whole_gpus_with_pods(prom_url: str, tmp_path: Path) -> None:
    """Source: https://github.com/NVIDIA/dcgm-exporter/issues/490 (2025-04-30)."""
    wh, _ = _collect(prom_url, tmp_path, "whole_gpu_pods_h100")
    node = "computeinstance-e00c1p6dpy98xytphp"
    assert _devices(wh) == [
        ("GPU-15338f3e-5fd9-962d-921a-979b820520f0", -1, None, node, None, None, None, POINTS),
        ("GPU-838de0dd-3f65-636a-83e8-fcb0f9e03cd0", -1, None, node, None, None, None, POINTS),
        ("GPU-8b2281de-6d3c-22ed-0ec8-d3b864870b8b", -1, None, node, "default", "dcgmproftester2",
         "dcgmproftester2", POINTS),
    ]
    assert _rows(wh, "SELECT DISTINCT gpu_util FROM gpu_samples") == [(0.0,)]
    assert _rows(wh, "SELECT uuid, gpu_index, model, model_name, sharing_mode FROM gpus ORDER BY gpu_index") == [
        ("GPU-8b2281de-6d3c-22ed-0ec8-d3b864870b8b", 0, "H100-80GB", "NVIDIA H100 80GB HBM3", "exclusive"),
        ("GPU-15338f3e-5fd9-962d-921a-979b820520f0", 1, "H100-80GB", "NVIDIA H100 80GB HBM3", "exclusive"),
        ("GPU-838de0dd-3f65-636a-83e8-fcb0f9e03cd0", 2, "H100-80GB", "NVIDIA H100 80GB HBM3", "exclusive"),
    ]
    wh.close()


def test_legacy_labels_without_model_or_node(prom_url: str, tmp_path: Path) -> None:
    """Source: https://github.com/NVIDIA/gpu-monitoring-tools/issues/138 (comment 2020-12-16)."""
    wh, report = _collect(prom_url, tmp_path, "whole_gpu_pods_prof_legacy")
    assert _devices(wh) == [("GPU-227ba87f-fcf3-c09a-dc3b-c72ea41297e3", -1, None, "unknown", "default",
                             "dcgmproftester", "dcgmproftester11", POINTS)]
    # the exporter printed 0.000001; the warehouse stores dram_active at 1 % (decision 0143)
    assert _rows(wh, "SELECT DISTINCT dram_active FROM gpu_samples") == [(0.0,)]
    assert _rows(wh, "SELECT model, model_name, node FROM gpus") == [("unknown", None, "unknown")]
    assert report.quality is not None
    assert report.quality.series_by_reason() == {"missing_model_name": 1, "missing_node": 1}
    wh.close()


def test_mig_instances_with_pods(prom_url: str, tmp_path: Path) -> None:
    """Source: https://github.com/NVIDIA/dcgm-exporter/issues/512 (comment 2025-08-19)."""
    wh, _ = _collect(prom_url, tmp_path, "mig_h100_pods")
    uuid, ns = "GPU-58e8f5ea-13cc-013a-d88f-2bcf5ae8bc77", "model-playground-stg"
    assert _devices(wh) == [
        (uuid, 7, "1g.10gb", "gsrh100-074", ns, "text-embedding-predictor-00008-deployment-57946f6c67-vdtjl",
         "kserve-container", POINTS),
        (uuid, 8, "1g.10gb", "gsrh100-074", None, None, None, POINTS),
        (uuid, 9, "1g.10gb", "gsrh100-074", ns, "tts-predictor-00011-deployment-5554f75554-8j8pl",
         "kserve-container", POINTS),
    ]
    assert _rows(wh, "SELECT DISTINCT gr_engine_active FROM gpu_samples") == [(0.0,)]
    assert _rows(wh, "SELECT gpu_i_id, profile FROM mig_instances ORDER BY gpu_i_id") == [
        (7, "1g.10gb"), (8, "1g.10gb"), (9, "1g.10gb")]
    assert _rows(wh, "SELECT model, sharing_mode FROM gpus") == [("H100-80GB", "mig")]
    wh.close()


def test_7g_79gb_maps_to_the_whole_card_profile(prom_url: str, tmp_path: Path) -> None:
    """Source: https://github.com/NVIDIA/dcgm-exporter/issues/713 (2026-07-16)."""
    wh, _ = _collect(prom_url, tmp_path, "mig_a100_7g79gb")
    assert _devices(wh) == [("GPU-06357e72-c3ee-614b-775f-a89e18e8cc08", 0, "7g.80gb", "metal-gpu-08",
                             None, None, None, POINTS)]
    assert _rows(wh, "SELECT profile FROM mig_instances") == [("7g.80gb",)]
    assert _rows(wh, "SELECT model, model_name FROM gpus") == [("A100-80GB", "NVIDIA A100 80GB PCIe")]
    wh.close()


def test_mig_a30_activity_values(prom_url: str, tmp_path: Path) -> None:
    """Source: https://github.com/NVIDIA/dcgm-exporter/issues/68 (comment 2022-05-26)."""
    wh, _ = _collect(prom_url, tmp_path, "mig_a30_gr_engine")
    assert _devices(wh) == [("GPU-603a8873-0edd-c157-ce48-2078e8b1a935", 1, "2g.12gb", "dcgm-exporter-sn5rp",
                             None, None, None, POINTS)]
    # printed 0.381124 and 0.022137: gr_engine_active is stored exactly, tensor_active at 1 % (0143)
    assert _rows(wh, "SELECT DISTINCT gr_engine_active, tensor_active FROM gpu_samples") == [(0.381124, 0.02)]
    assert _rows(wh, "SELECT model, sharing_mode FROM gpus") == [("NVIDIA A30", "mig")]
    wh.close()


def test_dra_whole_gpu_two_pods_one_card(prom_url: str, tmp_path: Path) -> None:
    """Source: kubernetes/website, feature gate KubeletPodResourcesDynamicResources (docs page)."""
    wh, report = _collect(prom_url, tmp_path, "dra_full_gpu_gh200")
    assert _devices(wh) == [("GPU-a4f34abc-7715-3560-dcea-7238b9611a45", -1, None, "sc-starwars-xxxx",
                             "gpu-test3", "pod1", "ctr", POINTS)]
    assert report.quality is not None and report.quality.by_reason() == {"duplicate_series": POINTS}
    assert _rows(wh, "SELECT count(*), min(model), min(sharing_mode) FROM gpus") == [
        (1, "NVIDIA GH200 96GB HBM3", "exclusive")]
    wh.close()


def test_dra_mig_lowercase_hostname(prom_url: str, tmp_path: Path) -> None:
    """Source: https://github.com/NVIDIA/dcgm-exporter/pull/664 (2026-05-29)."""
    wh, _ = _collect(prom_url, tmp_path, "dra_mig_a30_lowercase_hostname")
    node = "nim-operator-72q5r53"
    assert _devices(wh) == [
        ("GPU-e04ce2a0-21a4-b68c-854a-f5c0d26bfc0b", 3, "1g.6gb", node, "gpu-test4", "pod-c98945f5d-dnjs6",
         "ctr0", POINTS),
        ("GPU-f50641a9-38d7-6df1-0bec-e661b4ca1847", -1, None, node, None, None, None, POINTS),
    ]
    assert _rows(wh, "SELECT uuid, sharing_mode FROM gpus ORDER BY uuid") == [
        ("GPU-e04ce2a0-21a4-b68c-854a-f5c0d26bfc0b", "mig"), ("GPU-f50641a9-38d7-6df1-0bec-e661b4ca1847", "exclusive")]
    wh.close()


def test_dra_mig_without_gpu_i_labels(prom_url: str, tmp_path: Path) -> None:
    """Source: https://github.com/NVIDIA/dcgm-exporter/pull/532 (comment 2025-07-31)."""
    wh, _ = _collect(prom_url, tmp_path, "dra_mig_gh200")
    # The instance id is derived from the MIG UUID (CRC-32 past the real ids, 0..14).
    expected_id = 1000 + zlib.crc32(b"MIG-24c6a0e5-fe28-53ac-9537-c4e23104f30f") % 1_000_000
    assert _devices(wh) == [("GPU-a4f34abc-7715-3560-dcea-7238b9611a45", expected_id, "1g.12gb",
                             "sc-starwars-mab9-b00", "gpu-test4", "pod-56dbf5cf44-xnfk5", "ctr0", POINTS)]
    assert _rows(wh, "SELECT profile FROM mig_instances") == [("1g.12gb",)]
    assert _rows(wh, "SELECT model, sharing_mode FROM gpus") == [("NVIDIA GH200 96GB HBM3", "mig")]
    wh.close()


def test_old_exporter_activity_from_gpu_util(prom_url: str, tmp_path: Path) -> None:
    """Source: https://github.com/NVIDIA/gpu-monitoring-tools/issues/138 (2020-12-08)."""
    wh, report = _collect(prom_url, tmp_path, "old_exporter_gpu_util_only")
    assert _devices(wh) == [("GPU-6bf47ca9-ad3e-15db-beed-1079a7d74116", -1, None, "unknown",
                             None, None, None, POINTS)]
    assert _rows(wh, f"SELECT DISTINCT gr_engine_active, gpu_util, power_w, gpu_temp_c, {activity_sql()} "
                     "FROM gpu_samples") == [(None, 44.0, 302.2, 55.0, 0.44)]  # 302.206 W at 0.1 W (0143)
    assert report.quality is not None
    assert report.quality.series_by_reason() == {"missing_model_name": 1, "missing_node": 1}
    wh.close()


def test_exported_labels_name_the_workload(prom_url: str, tmp_path: Path) -> None:
    """Source: https://github.com/NVIDIA/dcgm-exporter/issues/340 (2024-06-09), reconstructed."""
    wh, report = _collect(prom_url, tmp_path, "exported_labels_rtx4090")
    assert _devices(wh) == [("GPU-longgui", -1, None, "worker1", "default", "pod1", "ai-artifactory-control",
                             POINTS)]
    assert report.quality is not None
    # two all-NaN series (pod1, pod2) on one GPU: each read counted once, under its value (nan)
    assert report.quality.by_reason() == {"nan": 2 * POINTS}
    assert _rows(wh, "SELECT model FROM gpus") == [("NVIDIA GeForce RTX 4090",)]
    assert wh.query("SELECT * FROM gpu_samples WHERE namespace = 'monitoring'").height == 0
    wh.close()


@pytest.mark.parametrize(("name", "canonical"), [
    ("NVIDIA GH200 96GB HBM3", "NVIDIA GH200 96GB HBM3"),  # dra fixtures above: not an H200
    ("NVIDIA-GH200-480GB", "NVIDIA-GH200-480GB"),
    ("NVIDIA GB200", "NVIDIA GB200"),
    ("NVIDIA H200", "H200-141GB"), ("NVIDIA-H200", "H200-141GB"), ("NVIDIA H200 NVL", "H200-141GB"),
    ("NVIDIA B200", "B200-180GB"), ("NVIDIA-B200", "B200-180GB"),
    ("NVIDIA H100 80GB HBM3", "H100-80GB"), ("NVIDIA-H100-80GB-HBM3", "H100-80GB"),
    ("NVIDIA H100 NVL", "NVIDIA H100 NVL"),  # 94 GB, other MIG profiles
    ("NVIDIA A100 80GB PCIe", "A100-80GB"), ("NVIDIA A100-SXM4-80GB", "A100-80GB"),
    ("NVIDIA A100-SXM4-40GB", "A100-SXM4-40GB"), ("NVIDIA H20", "NVIDIA H20"), ("NVIDIA A30", "NVIDIA A30"),
])
def test_canonical_model_is_anchored(name: str, canonical: str) -> None:
    assert canonical_model(name) == canonical


def test_canonical_profile_maps_rounding_quirks_only() -> None:
    assert canonical_profile("NVIDIA A100 80GB PCIe", "7g.79gb") == "7g.80gb"
    assert canonical_profile("NVIDIA A100 80GB PCIe", "3g.40gb") == "3g.40gb"
    assert canonical_profile("NVIDIA A100 80GB PCIe", "1g.19gb") == "1g.20gb"   # not 1g.10gb
    assert canonical_profile("NVIDIA A100 80GB PCIe", "1g.10gb+me") == "1g.10gb+me"
    assert canonical_profile("NVIDIA A100 80GB PCIe", "7g.60gb") == "7g.60gb"   # too far: as reported
    assert canonical_profile("NVIDIA A30", "2g.12gb") == "2g.12gb"              # model not in the catalog
    assert canonical_profile(None, "7g.79gb") == "7g.79gb"
    assert canonical_profile("NVIDIA A100 80GB PCIe", "weird") == "weird"


def test_fixture_lines_all_read() -> None:
    """Every sample line of every fixture is read by the test's own line pattern (no silent skip)."""
    for name in NAMES:
        text = (FIXTURES / f"{name}.prom").read_text()
        lines = [x for x in text.splitlines() if x and not x.startswith("#")]
        assert all(LINE.match(x) for x in lines), name
    assert pl.Series(NAMES).n_unique() == 10
