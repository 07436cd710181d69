"""The DRA plane as upstream publishes it (tests/fixtures/planes/dra, SOURCES.md `dra/`), read
by the real parsers: the API objects through `collectors.dra` and the exporters' output through a
real Prometheus and `collect_window`. The truths asserted are SOURCES.md's, for the window
W = [2026-09-01 10:00, 11:00) UTC over which each `.prom` file is one unchanged scrape.

Cases:
- ResourceSlices: NVIDIA's devices with their card (uuid / parentUUID), profile and placement
  from the device name (`gpu-1-mig-1g10gb-19-0` at slice 0, `...-9-4` at slice 4; the
  `memorySlice<N>` capacities and dynamic MIG's `memory-slice-N` counters agree), the card's
  index from the `gpu-<minor>` prefix (no `index` attribute exists), dynamic partitions without
  a uuid marked `dynamic`;
- claims: time-slicing from the GpuConfig; the generated claim names its template; no claim
  starts at its `creationTimestamp` when its pods say when they were bound (`allocationTimestamp`
  is absent): `shared-gpu` (created 09:50:02) and the template claim (created 09:54:58) from
  09:55:00; `warm-pool-3g`, which no pod reserves, from the first list that saw it;
- Prometheus only: the claims rebuilt from dcgm-exporter's `dra_*` labels and
  kube-state-metrics' claim series, each named `prometheus`: gpu-0 1.0 card-hour to
  `shared-gpu` split 0.5 / 0.5 between `nlp-a-0` and `nlp-b-0` (team `nlp`), the 1g.10gb claim
  1/7 to `infer-...` (team `search`), the unclaimed 3g device's card time unallocated; the
  dra-n2 partition, which no series places on a card, named in the bill's warning;
- the API's lists (at 10:00 and 11:00) and Prometheus together: every claim `api`, and
  `warm-pool-3g` billed 3/7 card-hours to team `search` (the API places its device);
- the template and namespaces: the generated claim's template asks for its DeviceClass and
  profile, the namespaces' `team` labels give `nlp` and `search`.
(dcgm-exporter's own upstream DRA scrapes: tests/dra/test_dcgm_dra_fixtures.py.)
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
from gpuledger.analytics.devices.dra_rows import claim_rows
from gpuledger.collect_pipeline import collect_window
from gpuledger.collectors.dra import DraObjects, frames_from_history, frames_from_objects
from gpuledger.core.config import Settings
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.store import LoadBatch
from tools.metrics_servers import ServerPool

FIXTURES = Path(__file__).parents[1] / "fixtures" / "planes" / "dra"
W = Window(datetime(2026, 9, 1, 10, tzinfo=UTC), datetime(2026, 9, 1, 11, tzinfo=UTC))
SETTINGS = Settings(prometheus={"chunk": "1h", "retries": 1})
CARD_0, CARD_1 = "GPU-9c9ca84d-a89f-9562-a0dd-f7e87d6af152", "GPU-1540d9e0-e0d1-4468-2d34-4c6a7bad3870"
DYNAMIC_CARD = "GPU-e9613130-d63b-273b-257e-17fb8b4fa65a"
INFER_CLAIM = "infer-6d8f7c9b5-k4t2w-mig-x7k2p"
BOUND = datetime(2026, 9, 1, 9, 55, tzinfo=UTC)
LINE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{.*\})\s+(\S+)$")


def _items(name: str) -> list[dict[str, Any]]:
    doc = yaml.safe_load((FIXTURES / name).read_text())
    return doc["items"] if doc.get("kind") == "List" else [doc]


def _objects() -> DraObjects:
    return DraObjects(slices=_items("resourceslice.yaml") + _items("resourceslice-dynamic-mig.yaml"),
                      claims=_items("resourceclaims.yaml"), device_classes=_items("deviceclasses.yaml"),
                      pods=_items("pods.yaml"), nodes=_items("node.yaml"))


@pytest.fixture(scope="module")
def listed() -> dict[str, pl.DataFrame]:
    return frames_from_objects(_objects(), W.end)


def test_devices_are_placed_by_their_names(listed: dict[str, pl.DataFrame]) -> None:
    rows = {(r["pool"], r["device"]): r for r in listed["dra_devices"].iter_rows(named=True)}
    expected = {  # (pool, device): (kind, parent card, profile, placement, dynamic, has own uuid)
        ("dra-n1", "gpu-0"): ("gpu", CARD_0, None, -1, 0, True),
        ("dra-n1", "gpu-1-mig-1g10gb-19-0"): ("mig", CARD_1, "1g.10gb", 0, 0, True),
        ("dra-n1", "gpu-1-mig-3g40gb-9-4"): ("mig", CARD_1, "3g.40gb", 4, 0, True),
        ("dra-n2", "gpu-0"): ("gpu", DYNAMIC_CARD, None, -1, 1, True),
        ("dra-n2", "gpu-0-mig-1g10gb-19-0"): ("mig", DYNAMIC_CARD, "1g.10gb", 0, 1, False),
        ("dra-n2", "gpu-0-mig-1g10gb-19-1"): ("mig", DYNAMIC_CARD, "1g.10gb", 1, 1, False),
        ("dra-n2", "gpu-0-mig-3g40gb-9-4"): ("mig", DYNAMIC_CARD, "3g.40gb", 4, 1, False),
    }
    assert {k: (r["kind"], r["parent_uuid"], r["profile"], r["placement"], r["dynamic"], r["uuid"] is not None)
            for k, r in rows.items()} == expected
    assert {r["model"] for r in rows.values()} == {"A100-80GB"}
    assert {r["source"] for r in rows.values()} == {"api"}


def test_placement_sources_agree() -> None:
    """The name, the `memorySlice<N>` capacities and the `memory-slice-N` counters say the same."""
    from gpuledger.collectors.dra_objects import _first_slice
    from gpuledger.core.dra_names import device_name

    for name in ("resourceslice.yaml", "resourceslice-dynamic-mig.yaml"):
        for device in _items(name)[0]["spec"]["devices"]:
            if "-mig-" in device["name"]:
                assert device_name(device["name"]).placement == _first_slice(device), device["name"]


def test_cards_are_indexed_by_the_name_prefix(listed: dict[str, pl.DataFrame]) -> None:
    cards = {r["uuid"]: (r["node"], r["gpu_index"], r["model"]) for r in listed["gpus"].iter_rows(named=True)}
    assert cards == {CARD_0: ("dra-n1", 0, "A100-80GB"), CARD_1: ("dra-n1", 1, "A100-80GB"),
                     DYNAMIC_CARD: ("dra-n2", 0, "A100-80GB")}


def test_claims_start_when_their_pods_were_bound(listed: dict[str, pl.DataFrame]) -> None:
    claims = {r["claim"]: r for r in listed["dra_claims"].iter_rows(named=True)}
    assert set(claims) == {"shared-gpu", INFER_CLAIM, "warm-pool-3g"}
    assert claims["shared-gpu"]["start_ts"] == BOUND  # created 09:50:02, pods bound at 09:55:00
    assert claims[INFER_CLAIM]["start_ts"] == BOUND  # created 09:54:58
    assert claims["warm-pool-3g"]["start_ts"] == W.end  # no pod: first seen by this list
    assert claims["shared-gpu"]["sharing"] == "timeslicing"
    assert claims[INFER_CLAIM]["template"] == "mig-1g"
    assert claims[INFER_CLAIM]["device_class"] == "mig.nvidia.com"
    assert claims["warm-pool-3g"]["pool"] == "dra-n2" and claims["warm-pool-3g"]["device"] == "gpu-0-mig-3g40gb-9-4"
    pods = set(listed["dra_reservations"].select("pod").to_series().to_list())
    assert pods == {"nlp-a-0", "nlp-b-0", "infer-6d8f7c9b5-k4t2w"}
    planes = dict(zip(listed["node_planes"]["node"], listed["node_planes"]["plane"], strict=True))
    assert planes == {"dra-n1": "dra"}


def _replayed(root: Path) -> Path:
    """Both `.prom` files as one scrape per minute of W (exporters write no timestamps)."""
    by_metric: dict[str, list[str]] = {}
    for name in ("dcgm-exporter.prom", "kube-state-metrics.prom"):
        for raw in (FIXTURES / name).read_text().splitlines():
            if raw and not raw.startswith("#"):
                match = LINE.match(raw)
                assert match, raw
                metric, labels, value = match.groups()
                by_metric.setdefault(metric, []).extend(
                    f"{metric}{labels} {value} {int(W.start.timestamp()) + 60 * i}" for i in range(60))
    lines = [line for metric, samples in by_metric.items() for line in (f"# TYPE {metric} gauge", *samples)]
    path = root / "dra.om"
    path.write_text("\n".join([*lines, "# EOF"]) + "\n")
    return path


@pytest.fixture(scope="module")
def prom_url(metrics_servers: ServerPool, tmp_path_factory: pytest.TempPathFactory) -> str:
    return metrics_servers.prometheus(_replayed(tmp_path_factory.mktemp("plane-dra"))).url


def _collected(prom_url: str, path: Path, *, api: bool) -> Warehouse:
    wh = Warehouse.open(path)
    if api:
        history = [(W.start, _objects()), (W.end, _objects())]
        wh.load(LoadBatch(frames=frames_from_history(history)))
    collect_window(wh, SETTINGS, prom_url, W, now=lambda: W.end + timedelta(minutes=5))
    return wh


@pytest.mark.prometheus
def test_prometheus_only_rebuilds_the_claims(prom_url: str, tmp_path: Path) -> None:
    with _collected(prom_url, tmp_path / "w.duckdb", api=False) as wh:
        rows = claim_rows(wh, W)
        bill = compute_bill(wh, W, SETTINGS, by=("team", "pod"), source="raw")
        sources = wh.query("SELECT DISTINCT source FROM dra_claims")["source"].to_list()
    assert sources == ["prometheus"]
    held = {(r["dra_claim"], r["pod"], r["uuid"], r["gpu_i_id"]): r["held_hours"]
            for r in rows.group_by("dra_claim", "pod", "uuid", "gpu_i_id").agg(pl.col("held_hours").sum())
            .iter_rows(named=True)}
    assert held == pytest.approx({("shared-gpu", "nlp-a-0", CARD_0, -1): 0.5, ("shared-gpu", "nlp-b-0", CARD_0, -1): 0.5,
                                  (INFER_CLAIM, "infer-6d8f7c9b5-k4t2w", CARD_1, 0): 1.0})
    assert set(rows["dra_source"].to_list()) == {"prometheus"}
    lines = {(r["team"], r["pod"]): r["card_hours"] for r in bill.lines.iter_rows(named=True)}
    assert lines[("nlp", "nlp-a-0")] == pytest.approx(0.5) and lines[("nlp", "nlp-b-0")] == pytest.approx(0.5)
    assert lines[("search", "infer-6d8f7c9b5-k4t2w")] == pytest.approx(1 / 7)
    assert lines[("unallocated", None)] == pytest.approx(6 / 7)  # the 3g device and the uncovered slice
    assert [w for w in bill.warnings if "warm-pool-3g" in w and "dra-n2/gpu-0-mig-3g40gb-9-4" in w]


@pytest.mark.prometheus
def test_the_api_and_prometheus_together(prom_url: str, tmp_path: Path) -> None:
    with _collected(prom_url, tmp_path / "w.duckdb", api=True) as wh:
        rows = claim_rows(wh, W)
        bill = compute_bill(wh, W, SETTINGS, by=("team",), source="raw")
    assert set(rows["dra_source"].to_list()) == {"api"}  # the API's spans win on every device
    teams = {r["team"]: r["card_hours"] for r in bill.lines.iter_rows(named=True)}
    assert teams["nlp"] == pytest.approx(1.0)
    assert teams["search"] == pytest.approx(1 / 7 + 3 / 7)  # the warm-pool claim without any pod
    assert not bill.warnings


def test_the_template_and_namespaces_agree_with_the_claims(listed: dict[str, pl.DataFrame]) -> None:
    """The generated claim's template (resourceclaimtemplates.yaml) asks for the DeviceClass and
    the profile the claim got; the namespaces' `team` labels (namespaces.yaml) give the teams the
    bills above use."""
    from gpuledger.core.teams import resolve_team

    claim = next(r for r in listed["dra_claims"].iter_rows(named=True) if r["claim"] == INFER_CLAIM)
    templates = {(t["metadata"]["namespace"], t["metadata"]["name"]): t for t in _items("resourceclaimtemplates.yaml")}
    request = templates[(claim["namespace"], claim["template"])]["spec"]["spec"]["devices"]["requests"][0]
    assert request["exactly"]["deviceClassName"] == claim["device_class"] == "mig.nvidia.com"
    device = listed["dra_devices"].filter((pl.col("pool") == claim["pool"]) & (pl.col("device") == claim["device"]))
    assert f"== '{device['profile'][0]}'" in request["exactly"]["selectors"][0]["cel"]["expression"]
    teams = {ns["metadata"]["name"]: resolve_team(ns["metadata"]["name"], ns["metadata"]["labels"], Settings().teams)
             for ns in _items("namespaces.yaml")}
    assert teams == {"team-nlp": "nlp", "team-search": "search"}
