"""HAMi conformance: what HAMi, kube-state-metrics and dcgm-exporter really publish for a HAMi
node (tests/fixtures/planes/hami/, each file citing its upstream source) read right by the real
collection path, and billed as SOURCES.md's truth table says.

Scenario (SOURCES.md, hami/): node `gpu-h1`, 2 x A100-SXM4-80GB (81920 MiB), split x10.
`team-nlp/llm-a-0` got 32768 MiB and 40 % cores of card 0, `team-vision/nb-b-0` 25 % of the
memory (HAMi wrote 20480 MiB) and 20 % cores of card 0, `team-nlp/batch-c-0` 16384 MiB and no
core limit on card 1.

Cases:
- the API objects through the Kubernetes collector's parsing (`collectors.hami.frames_from_api`,
  `collectors.kubernetes._node_row` / `_pod_row`): both cards `vgpu` (from the register
  annotation, though the node has no gpumem capacity), each pod's card and amounts from its
  allocation annotation, all request forms kept under their real names; the register
  annotation's two older forms decode to the same cards;
- KSM's sanitized resource names restored by the table (`collectors.ksm.resource_name`), the
  ones this fixture and the time-slicing one use;
- the `.prom` files (dcgm, KSM, the HAMi scheduler; current and `--legacy-metrics` names)
  replayed every minute into a real Prometheus (promtool backfill, its exposition parser), then
  `collect_window` Prometheus-only and `compute_bill`: per team, card-hours = the truth table's
  max(cores / 100, MiB / 81920) (arithmetic here), unallocated the rest of 2 cards x 1 h;
  with card 1's dcgm activity set to 0, its holder is idle for its whole share and card 0's
  holders are not (the card's activity applies to its holders).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml

from gpuledger.analytics.billing.bill import compute_bill
from gpuledger.collect_pipeline import collect_window
from gpuledger.collectors import hami
from gpuledger.collectors.ksm import resource_name
from gpuledger.collectors.kubernetes import _node_row, _pod_row
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse
from tests.collectors.conftest import tiny_settings
from tests.collectors.gauges import write_gauges
from tools.metrics_servers import ServerPool

PLANES = Path(__file__).parents[1] / "fixtures" / "planes"
FIXTURES = PLANES / "hami"
CARD0 = "GPU-f46e6be5-1cd4-ffff-07c2-758d4752834b"
CARD1 = "GPU-b0d33141-808d-0b7c-3849-b83027e456e8"
CARD_MIB = 81920.0
AT = datetime(2026, 9, 1, 11, tzinfo=UTC)
W = Window(datetime(2026, 9, 1, 10, tzinfo=UTC), datetime(2026, 9, 1, 11, tzinfo=UTC))
TRUTH = {  # pod: (namespace, card, MiB in the annotation, cores %), SOURCES.md's table
    "llm-a-0": ("team-nlp", CARD0, 32768.0, 40.0),
    "nb-b-0": ("team-vision", CARD0, 0.25 * CARD_MIB, 20.0),
    "batch-c-0": ("team-nlp", CARD1, 16384.0, 0.0),
}
LINE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{.*\})\s+(\S+)$")


def _items(name: str) -> list[dict[str, Any]]:
    data = yaml.safe_load((FIXTURES / name).read_text())
    return list(data["items"]) if data.get("kind") == "List" else [data]


def _share(mem_mib: float, cores: float) -> float:
    """SOURCES.md's max basis, computed here: the larger of cores / 100 and MiB / card."""
    return max(cores / 100.0, mem_mib / CARD_MIB)


# The Kubernetes API ----------------------------------------------------------------------
def test_api_cards_and_allocations() -> None:
    nodes, pods = _items("node.yaml"), _items("pods.yaml")
    frames, hami_nodes = hami.frames_from_api(nodes, pods, AT)
    assert hami_nodes == {"gpu-h1"}
    gpus = frames["gpus"].sort("gpu_index")
    assert gpus.select("uuid", "node", "gpu_index", "model", "sharing_mode").rows() == [
        (CARD0, "gpu-h1", 0, "A100-80GB", "vgpu"), (CARD1, "gpu-h1", 1, "A100-80GB", "vgpu")]
    got = frames["vgpu_allocations"].sort("pod").select(
        "pod", "namespace", "uuid", "container_index", "source", "mem_mib", "cores_pct", "card_mem_mib",
        "start_ts", "end_ts").rows()
    started = datetime(2026, 9, 1, 9, 55, tzinfo=UTC)
    assert got == sorted(
        (pod, ns, card, 0, "api", mem, cores, CARD_MIB, started, AT)
        for pod, (ns, card, mem, cores) in TRUTH.items())


def test_api_node_is_hami_without_gpumem_capacity() -> None:
    node = _items("node.yaml")[0]
    assert "nvidia.com/gpumem" not in node["status"]["capacity"]
    assert _node_row(node, AT)["sharing_mode"] == "vgpu"
    # the same node without HAMi's annotation is not HAMi, `gpu=on` notwithstanding
    bare = {**node, "metadata": {**node["metadata"], "annotations": {}}}
    assert _node_row(bare, AT)["sharing_mode"] != "vgpu"
    assert _node_row(bare, AT, {"gpu-h1"})["sharing_mode"] == "vgpu"  # a pod HAMi placed there


def test_api_pods_keep_every_request_form() -> None:
    rows = {row["pod"]: row for item in _items("pods.yaml") if (row := _pod_row(item, AT, ()))}
    import json
    assert json.loads(rows["nb-b-0"]["gpu_requests"]) == {
        "nvidia.com/gpu": 1.0, "nvidia.com/gpucores": 20.0, "nvidia.com/gpumem-percentage": 25.0}
    assert json.loads(rows["batch-c-0"]["gpu_requests"]) == {
        "nvidia.com/gpu": 1.0, "nvidia.com/gpumem": 16384.0}


def test_register_annotation_older_forms() -> None:
    """The 7-field and 9-field colon forms (`DecodeNodeDevices`) name the same cards."""
    seven = f"{CARD0},10,81920,100,NVIDIA-NVIDIA A100-SXM4-80GB,0,true:{CARD1},10,81920,100,NVIDIA-NVIDIA A100-SXM4-80GB,0,true:"
    nine = (f"{CARD0},10,81920,100,NVIDIA A100-SXM4-80GB,0,true,0,hami-core:"
            f"{CARD1},10,81920,100,NVIDIA A100-SXM4-80GB,0,true,1,hami-core:")
    current = _items("node.yaml")[0]["metadata"]["annotations"][hami.REGISTER]
    for text in (current, seven, nine):
        cards = hami.decode_node_devices(text)
        assert [(c.uuid, c.count, c.devmem_mib) for c in cards] == [
            (CARD0, 10, CARD_MIB), (CARD1, 10, CARD_MIB)], text
        assert {hami.card_model(c.type) for c in cards} == {"A100-80GB"}
    assert [c.index for c in hami.decode_node_devices(nine)] == [0, 1]


def test_allocation_annotation_encoding() -> None:
    """`UUID,Type,MiB,cores` per device, `:` between devices, `;` per container (init first)."""
    text = f";{CARD0},NVIDIA,1024,20:{CARD1},NVIDIA,2048,0:;"
    got = hami.decode_pod_devices(text)
    assert [[(d.uuid, d.mem_mib, d.cores_pct) for d in c] for c in got] == [
        [], [(CARD0, 1024.0, 20.0), (CARD1, 2048.0, 0.0)]]


# kube-state-metrics ----------------------------------------------------------------------
def _ksm_resources(path: Path) -> set[str]:
    return set(re.findall(r'resource="([^"]+)"', path.read_text()))


def test_ksm_resource_names_restored() -> None:
    restored = {r: resource_name(r) for r in _ksm_resources(FIXTURES / "kube-state-metrics.prom")}
    assert restored == {
        "nvidia_com_gpu": "nvidia.com/gpu", "nvidia_com_gpumem": "nvidia.com/gpumem",
        "nvidia_com_gpucores": "nvidia.com/gpucores",
        "nvidia_com_gpumem_percentage": "nvidia.com/gpumem-percentage"}
    renamed = _ksm_resources(PLANES / "timeslice" / "kube-state-metrics-renamed.prom")
    assert {resource_name(r) for r in renamed if r.startswith("nvidia")} == {"nvidia.com/gpu.shared"}
    assert resource_name("nvidia_com_mig_1g_10gb") == "nvidia.com/mig-1g.10gb"
    assert resource_name("nvidia_com_mig_1g_10gb_me") == "nvidia.com/mig-1g.10gb+me"
    assert resource_name("example_com_foo_bar") == "example_com_foo_bar"  # unknown: as written


# Through Prometheus ----------------------------------------------------------------------
SLOTS = {  # slot -> (scheduler fixture, card 1 idle)
    "current": ("hami-scheduler.prom", False),
    "legacy": ("hami-scheduler-legacy.prom", False),
    "idle": ("hami-scheduler.prom", True),
}


def _window(slot: str) -> Window:
    start = W.start + timedelta(days=list(SLOTS).index(slot))
    return Window(start, start + (W.end - W.start))


def _samples(name: str, idle_card: str | None) -> list[tuple[str, str, str]]:
    out = []
    for raw in (FIXTURES / name).read_text().splitlines():
        if raw and not raw.startswith("#"):
            match = LINE.match(raw)
            assert match, raw
            metric, labels, value = match.groups()
            if idle_card and f'UUID="{idle_card}"' in labels and metric.startswith("DCGM_FI_"):
                value = "0"
            out.append((metric, labels, value))
    return out


def _openmetrics(path: Path) -> Path:
    """Each fixture scrape replayed every minute from 09:55 (the pods' start) to 11:05."""
    by_metric: dict[str, list[str]] = {}
    for slot, (scheduler, idle) in SLOTS.items():
        first = int((_window(slot).start - timedelta(minutes=5)).timestamp())
        for name in ("dcgm-exporter.prom", "kube-state-metrics.prom", scheduler):
            for metric, labels, value in _samples(name, CARD1 if idle else None):
                by_metric.setdefault(metric, []).extend(
                    f"{metric}{labels} {value} {first + 60 * i}" for i in range(71))
    return write_gauges(path, by_metric)


@pytest.fixture(scope="module")
def prom_url(metrics_servers: ServerPool, tmp_path_factory: pytest.TempPathFactory) -> str:
    return metrics_servers.prometheus(_openmetrics(tmp_path_factory.mktemp("hami") / "f.om")).url


def _collect_and_bill(prom_url: str, tmp_path: Path, slot: str) -> tuple[Warehouse, pl.DataFrame]:
    window = _window(slot)
    wh = Warehouse.open(tmp_path / f"{slot}.duckdb")
    settings = tiny_settings(chunk="1h")
    collect_window(wh, settings, prom_url, window, now=lambda: window.end + timedelta(minutes=5))
    lines = compute_bill(wh, window, settings).lines
    return wh, lines


def _team_hours(lines: pl.DataFrame, column: str) -> dict[str, float]:
    return {t: round(float(v), 6) for t, v in lines.select("team", column).iter_rows() if v}


@pytest.mark.prometheus
@pytest.mark.parametrize("slot", ["current", "legacy"])
def test_prometheus_only_bills_the_truth(prom_url: str, tmp_path: Path, slot: str) -> None:
    wh, lines = _collect_and_bill(prom_url, tmp_path, slot)
    got = wh.query("SELECT uuid, sharing_mode FROM gpus ORDER BY gpu_index").rows()
    allocations = wh.query("SELECT pod, uuid, mem_mib, cores_pct, card_mem_mib, source "
                           "FROM vgpu_allocations ORDER BY pod").rows()
    wh.close()
    assert got == [(CARD0, "vgpu"), (CARD1, "vgpu")]
    assert allocations == sorted(
        (pod, card, mem, cores, CARD_MIB, "prometheus") for pod, (_, card, mem, cores) in TRUTH.items())
    shares = {pod: _share(mem, cores) for pod, (_, _, mem, cores) in TRUTH.items()}
    expected = {"nlp": shares["llm-a-0"] + shares["batch-c-0"], "vision": shares["nb-b-0"]}
    expected["unallocated"] = 2.0 - sum(shares.values())
    assert _team_hours(lines, "card_hours") == {t: round(v, 6) for t, v in expected.items()}
    assert {t: v for t, v in _team_hours(lines, "idle_card_hours").items() if t in expected} == {}


@pytest.mark.prometheus
def test_card_activity_applies_to_its_holders(prom_url: str, tmp_path: Path) -> None:
    wh, lines = _collect_and_bill(prom_url, tmp_path, "idle")
    wh.close()
    idle = _team_hours(lines, "idle_card_hours")
    _, _, mem, cores = TRUTH["batch-c-0"]
    assert idle.get("nlp") == round(_share(mem, cores), 6)  # llm-a-0's card 0 is busy
    assert "vision" not in idle
