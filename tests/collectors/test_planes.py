"""Sharing planes as real clusters publish them, read by the real parsers (issue 29).

The fixtures are `tests/fixtures/planes/{whole,mig,timeslice,label_poor}/` (built from the
upstream sources SOURCES.md cites, never from gpuledger's code or simulator); the truths checked
are the ones SOURCES.md states for the window W = [10:00, 11:00).

The Prometheus path: each `.prom` file is one scrape (exporters write no timestamps), replayed
at every minute of W into an OpenMetrics file, backfilled with promtool into a real Prometheus,
then `collect_window` (what `gpuledger collect` runs) into a real DuckDB warehouse and
`compute_bill` over W; each scenario has its own day, so the two dcgm modes of the time-sliced
cards never meet. The Kubernetes API path: each object of the YAML files through the collector's
own parsers (`collectors.kubernetes._node_row`), as it parses the API server's JSON.

Cases:
- whole cards: `train-a-0` 1.0 card-hour for team `vision`, the free card (no pod labels) 1.0
  unallocated; pool `gpu-training` from Karpenter's label, model H100;
- MIG, mixed strategy: embed 1/7 (team `search`), finetune 3/7 (`nlp`), the free 2g instance
  2/7 unallocated and the uncovered slice 1/7 stranded;
- time-slicing and MPS, from the node labels alone (no `vgpu` label in the default exporter):
  the A10G (x4) gives `ts-a-0`, `ts-a-1` 0.25 each (team `a`), `ts-b-0` 0.25 (`b`), 0.25
  unallocated, although dcgm names `ts-b-0` alone; the L4 (MPS x2) gives `mps-a-0` 0.5, 0.5
  unallocated; the same with `--kubernetes-virtual-gpus` (a `vgpu` series per pod: three on a
  card of four replicas, so the count seen is not the count); the stored inventory says
  `timeslice` with the configured replicas; the API path reads the same from `nodes.yaml`
  (MPS recognised as MPS), and `renameByDefault` (no `-SHARED`) is still replicated;
- label-poor: no pool, no team, no model label anywhere: `exp-17` and `serve-0` 1.0 card-hour
  each on `unattributed`, both namespaces named, the two free cards 2.0 unallocated, pool and
  model `unknown`; the API path reads no pool from `node.yaml` either.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml

from gpuledger.analytics.billing.bill import Bill, compute_bill
from gpuledger.collect_pipeline import collect_window
from gpuledger.collectors.kubernetes import _node_row
from gpuledger.core.config import Settings
from gpuledger.core.gfd import Replicated, replicated
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse
from tests.collectors.gauges import write_gauges
from tools.metrics_servers import ServerPool

pytestmark = pytest.mark.prometheus

PLANES = Path(__file__).parents[1] / "fixtures" / "planes"
W = Window(datetime(2026, 9, 1, 10, tzinfo=UTC), datetime(2026, 9, 1, 11, tzinfo=UTC))
SCENARIOS: dict[str, tuple[str, ...]] = {
    "whole": ("whole/dcgm-exporter.prom", "whole/kube-state-metrics.prom"),
    "mig": ("mig/dcgm-exporter.prom", "mig/kube-state-metrics.prom"),
    "timeslice": ("timeslice/dcgm-exporter-default.prom", "timeslice/kube-state-metrics.prom"),
    "timeslice-vgpu": ("timeslice/dcgm-exporter-virtual-gpus.prom", "timeslice/kube-state-metrics.prom"),
    "label_poor": ("label_poor/dcgm-exporter.prom", "label_poor/kube-state-metrics.prom"),
}
LINE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{.*\})\s+(\S+)$")
TS_CARD, MPS_CARD = "GPU-87e9db8e-7797-0932-7789-4f168dc6e860", "GPU-d49309c8-12a9-6e4e-4ca4-315d0d055de3"


def window_of(name: str) -> Window:
    """The scenario's own W: the same hour, one day apart per scenario."""
    shift = timedelta(days=list(SCENARIOS).index(name))
    return Window(W.start + shift, W.end + shift)


def openmetrics(path: Path) -> Path:
    """Every scenario's scrape replayed at each minute of its W (families kept together)."""
    by_metric: dict[str, list[str]] = {}
    for name, files in SCENARIOS.items():
        start = int(window_of(name).start.timestamp())
        for file in files:
            for raw in (PLANES / file).read_text().splitlines():
                if not raw or raw.startswith("#"):
                    continue
                match = LINE.match(raw)
                assert match, raw
                metric, labels, value = match.groups()
                by_metric.setdefault(metric, []).extend(
                    f"{metric}{labels} {value} {start + 60 * i}" for i in range(60))
    return write_gauges(path, by_metric)


@pytest.fixture(scope="module")
def prom_url(metrics_servers: ServerPool, tmp_path_factory: pytest.TempPathFactory) -> str:
    return metrics_servers.prometheus(openmetrics(tmp_path_factory.mktemp("planes") / "planes.om")).url


SETTINGS = Settings(prometheus={"chunk": "1h", "retries": 1, "timeout_s": 10})
"""No fallback team rule: a namespace is on a team only by its label, as on a real cluster."""


def collected(prom_url: str, tmp_path: Path, name: str) -> tuple[Bill, Warehouse]:
    window = window_of(name)
    wh = Warehouse.open(tmp_path / f"{name}.duckdb")
    collect_window(wh, SETTINGS, prom_url, window, now=lambda: window.end + timedelta(minutes=5))
    return compute_bill(wh, window, SETTINGS, by=("team", "pod", "pool", "model")), wh


def per(bill: Bill, *keys: str) -> dict[tuple[Any, ...], float]:
    out: dict[tuple[Any, ...], float] = {}
    for row in bill.lines.filter(pl.col("team") != "sharing_discount").iter_rows(named=True):
        key = tuple(row[k] for k in keys)
        out[key] = out.get(key, 0.0) + row["card_hours"]
    return out


def objects(file: str) -> list[dict[str, Any]]:
    doc = yaml.safe_load((PLANES / file).read_text())
    return doc["items"] if doc.get("kind") == "List" else [doc]


def test_whole_cards(prom_url: str, tmp_path: Path) -> None:
    bill, wh = collected(prom_url, tmp_path, "whole")
    with wh:
        assert per(bill, "team", "pod", "pool", "model") == pytest.approx({
            ("vision", "train-a-0", "gpu-training", "H100-80GB"): 1.0,
            ("unallocated", None, "gpu-training", "H100-80GB"): 1.0,
        })
    row = _node_row(objects("whole/node.yaml")[0], W.end)
    assert (row["pool"], row["sharing_mode"], row["replicas"], row["model"]) == (
        "gpu-training", "exclusive", None, "H100-80GB")


def test_mig_mixed_strategy(prom_url: str, tmp_path: Path) -> None:
    bill, wh = collected(prom_url, tmp_path, "mig")
    with wh:
        assert per(bill, "team", "pod") == pytest.approx({
            ("search", "embed-7c9d5b6f4-q2x8k"): 1 / 7, ("nlp", "finetune-0"): 3 / 7,
            ("unallocated", None): 2 / 7 + 1 / 7,
        })
        stranded = float(bill.unallocated["stranded_card_hours"].sum())
    assert stranded == pytest.approx(1 / 7)
    row = _node_row(objects("mig/node.yaml")[0], W.end)
    assert row["sharing_mode"] == "mig" and replicated(yaml.safe_load(
        (PLANES / "mig/node.yaml").read_text())["metadata"]["labels"]) is None  # replicas "0"


@pytest.mark.parametrize("name", ["timeslice", "timeslice-vgpu"])
def test_time_slicing_and_mps_from_node_labels(prom_url: str, tmp_path: Path, name: str) -> None:
    bill, wh = collected(prom_url, tmp_path, name)
    with wh:
        pods = per(bill, "team", "pod")
        cards = wh.query("SELECT uuid, sharing_mode, replicas FROM gpus ORDER BY uuid").rows()
        detail = bill.detail.filter(pl.col("kind") == "unallocated").group_by("uuid").agg(pl.col("card_hours").sum())
    assert pods == pytest.approx({
        ("a", "ts-a-0"): 1 / 4, ("a", "ts-a-1"): 1 / 4, ("b", "ts-b-0"): 1 / 4, ("a", "mps-a-0"): 1 / 2,
        ("unallocated", None): 1 / 4 + 1 / 2,
    })
    assert dict(detail.iter_rows()) == pytest.approx({TS_CARD: 1 / 4, MPS_CARD: 1 / 2})
    assert cards == [(TS_CARD, "timeslice", 4), (MPS_CARD, "timeslice", 2)]
    assert bill.replicas_unknown_nodes == ()


def test_time_slicing_and_mps_through_the_api_parser() -> None:
    rows = {o["metadata"]["name"]: (_node_row(o, W.end), o["metadata"]["labels"])
            for o in objects("timeslice/nodes.yaml")}
    t1, p1 = rows["gpu-t1"], rows["gpu-p1"]
    assert (t1[0]["sharing_mode"], t1[0]["replicas"], t1[0]["model"]) == ("timeslice", 4, "NVIDIA-A10G")
    assert (p1[0]["sharing_mode"], p1[0]["replicas"]) == ("timeslice", 2)
    assert replicated(t1[1]) == Replicated("time-slicing", 4)
    assert replicated(p1[1]) == Replicated("mps", 2)
    # renameByDefault: the product keeps its plain name, the labels still say replicated
    renamed = {**t1[1], "nvidia.com/gpu.product": "NVIDIA-A10G"}
    assert replicated(renamed) == Replicated("time-slicing", 4)
    # a GFD before the strategy label: MPS known by `mps.capable`, else time-slicing
    old = {k: v for k, v in p1[1].items() if k != "nvidia.com/gpu.sharing-strategy"}
    assert replicated(old) == Replicated("mps", 2)
    assert replicated({**old, "nvidia.com/mps.capable": "false"}) == Replicated("time-slicing", 2)


def test_label_poor_node(prom_url: str, tmp_path: Path) -> None:
    bill, wh = collected(prom_url, tmp_path, "label_poor")
    with wh:
        assert per(bill, "team", "pod", "pool", "model") == pytest.approx({
            ("unattributed", "exp-17", "unknown", "unknown"): 1.0,
            ("unattributed", "serve-0", "unknown", "unknown"): 1.0,
            ("unallocated", None, "unknown", "unknown"): 2.0,
        })
    assert bill.unattributed_namespaces == ("ml-prod", "research")
    assert bill.unallocated.select("pool", "model").rows() == [("unknown", "unknown")]
    row = _node_row(objects("label_poor/node.yaml")[0], W.end)
    assert (row["pool"], row["sharing_mode"], row["model"]) == (None, "exclusive", None)
