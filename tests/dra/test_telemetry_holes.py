"""Issue 29's DRA case, by hand: claims whose pods lose telemetry for hours, read from a real
Prometheus with no Kubernetes API, and claims loaded after their hours were rolled up. Each
case's expected numbers are arithmetic on the scenario below, never the code under test; every
case fails on a gpuledger that knows claims only from an API listing.

Scenario, 2026-05-04 00:00-06:00 UTC, node `n1`, three H100 cards, series written as
dcgm-exporter (`KUBERNETES_ENABLE_DRA`) and kube-state-metrics write them:
- `team-x/train`: pod `train-0` created 00:30, bound (its claim allocated) at 01:00, pending on
  its prepared claim until 04:00, then running to 06:00; the node's exporter is down
  04:30-05:00. Held 01:00-06:00: 5 card-hours; hours 01, 02 and 03 show no series of it:
  3 activity-unknown card-hours; it is busy whenever seen.
- `team-y/serve`: pod `serve-0` bound at 00:00 and running throughout, idle (activity 0)
  02:00-03:00 (one idle hour): 6 card-hours (5.5 seen: the exporter's hole is its too), 1 idle.
- the third card has no claim in Prometheus; an API history loaded after the roll-up (an
  audit log of the lists) shows `team-x/warm` holding it 02:00-05:00 with no pod: 3 card-hours.

Cases:
- Prometheus only, collected and rolled up in one run: the default bill gives team-x 5 and
  team-y 6 card-hours, team-x 3 activity-unknown card-hours, team-y 1 idle card-hour;
- collected every hour with the roll-up by the hour (as `collect --follow`): the hours rolled
  up before `train`'s first series named its device are rolled up again when it arrives, so
  the default bill (the roll-up) is the same;
- claims loaded after the roll-up: the API history's claim is billed by the default bill (its
  3 card-hours to team-x), the days it touches rolled up again; a collect without it keeps the
  roll-up as it was.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from gpuledger.analytics.billing.bill import Bill, compute_bill
from gpuledger.collect_pipeline import collect_window
from gpuledger.collect_rollup import RollupPlan
from gpuledger.core.config import Settings
from gpuledger.core.window import HOUR, Window
from gpuledger.warehouse import Warehouse
from tools.metrics_servers import ServerPool

pytestmark = [pytest.mark.prometheus, pytest.mark.slow]

T0 = datetime(2026, 5, 4, tzinfo=UTC)
WINDOW = Window(T0, T0 + 6 * HOUR)
SETTINGS = Settings(prometheus={"chunk": "1h", "retries": 1})
NODE, MODEL = "n1", "NVIDIA H100 80GB HBM3"
CARDS = ("GPU-aaaaaaaa-0000-4000-8000-000000000001", "GPU-aaaaaaaa-0000-4000-8000-000000000002",
         "GPU-aaaaaaaa-0000-4000-8000-000000000003")
DOWN = range(270, 300)  # the exporter's hole, minutes from T0


def _minute(m: int) -> int:
    return int((T0 + timedelta(minutes=m)).timestamp())


def _labels(pairs: list[tuple[str, str]]) -> str:
    return ",".join(f'{k}="{v}"' for k, v in pairs)


def _card(i: int) -> list[tuple[str, str]]:
    return [("gpu", str(i)), ("UUID", CARDS[i]), ("pci_bus_id", f"00000000:{0x18 + i:02X}:00.0"),
            ("device", f"nvidia{i}"), ("modelName", MODEL), ("Hostname", NODE)]


def _claimed(i: int, ns: str, claim: str, pod: str) -> list[tuple[str, str]]:
    return [*_card(i), ("container", "main"), ("dra_claim_name", claim), ("dra_claim_namespace", ns),
            ("dra_device_name", f"gpu-{i}"), ("dra_driver_name", "gpu.nvidia.com"),
            ("dra_pool_name", NODE), ("namespace", ns), ("pod", pod)]


def _series() -> dict[str, list[str]]:
    """Every family's sample lines (module docstring's scenario)."""
    out: dict[str, list[str]] = {"DCGM_FI_PROF_GR_ENGINE_ACTIVE": [], "DCGM_FI_DEV_FB_USED": [],
                                 "kube_pod_resourceclaim_info": [], "kube_pod_status_scheduled_time": [],
                                 "kube_namespace_labels": []}

    def add(family: str, labels: list[tuple[str, str]], value: float, m: int) -> None:
        out[family].append(f"{family}{{{_labels(labels)}}} {value!r} {_minute(m)}")

    for m in range(360):
        for ns in ("team-x", "team-y"):
            add("kube_namespace_labels", [("namespace", ns), ("label_team", ns[-1])], 1, m)
        pods = (("team-x", "train-0", "train", 30, 60), ("team-y", "serve-0", "serve", 0, 0))
        for ns, pod, claim, created, bound in pods:
            who = [("namespace", ns), ("pod", pod), ("uid", f"uid-{pod}")]
            if m >= created:
                add("kube_pod_resourceclaim_info", [*who, ("claim_name", "gpu"), ("resourceclaim_name", claim),
                                                    ("resourceclaim_template_name", "")], 1, m)
            if m >= bound:
                add("kube_pod_status_scheduled_time", who, _minute(bound), m)
        if m in DOWN:
            continue
        devices = [(_claimed(1, "team-y", "serve", "serve-0"), 0.0 if 120 <= m < 180 else 0.6),
                   (_claimed(0, "team-x", "train", "train-0") if m >= 240 else _card(0), 0.8 if m >= 240 else 0.0),
                   (_card(2), 0.0)]
        for labels, active in devices:
            add("DCGM_FI_PROF_GR_ENGINE_ACTIVE", labels, active, m)
            add("DCGM_FI_DEV_FB_USED", labels, 4096 if active else 0, m)
    return out


@pytest.fixture(scope="module")
def prom_url(metrics_servers: ServerPool, tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("holes") / "holes.om"
    lines = [line for family, rows in _series().items() for line in (f"# TYPE {family} gauge", *rows)]
    path.write_text("\n".join([*lines, "# EOF"]) + "\n")
    return metrics_servers.prometheus(path).url


def _teams(bill: Bill) -> dict[str, dict[str, Any]]:
    return {r["team"]: r for r in bill.lines.iter_rows(named=True)}


def _check_truth(bill: Bill) -> None:
    teams = _teams(bill)
    assert bill.source == "rollup"  # the default bill reads the roll-up
    assert teams["x"]["card_hours"] == pytest.approx(5.0, abs=1e-9)
    assert teams["x"]["activity_unknown_card_hours"] == pytest.approx(3.0, abs=1e-9)
    assert teams["y"]["card_hours"] == pytest.approx(6.0, abs=1e-9)
    assert teams["y"]["idle_card_hours"] == pytest.approx(1.0, abs=1e-9)
    assert teams["y"]["activity_unknown_card_hours"] == 0.0


def test_held_claims_without_telemetry_are_billed(prom_url: str, tmp_path: Path) -> None:
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        collect_window(wh, SETTINGS, prom_url, WINDOW, now=lambda: WINDOW.end, rollup=RollupPlan())
        bill = compute_bill(wh, WINDOW, SETTINGS, by=("team",))
        _check_truth(bill)
        assert set(wh.query("SELECT source FROM dra_claims")["source"].to_list()) == {"prometheus"}


def test_hours_rolled_up_before_the_device_was_seen_are_rolled_up_again(prom_url: str, tmp_path: Path) -> None:
    reports = []
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        for hours in range(1, 7):
            end = T0 + hours * HOUR
            plan = RollupPlan() if end == WINDOW.end else RollupPlan(grain=HOUR, to_end=False, origin=T0)
            reports.append(collect_window(wh, SETTINGS, prom_url, Window(T0, end),
                                          now=lambda at=end: at, rollup=plan))  # type: ignore[misc]
        bill = compute_bill(wh, WINDOW, SETTINGS, by=("team",))
    _check_truth(bill)
    # train's device first named at 04:00 (the run to 05:00): its hours from 01:00, rolled up
    # before, are rolled up again then (and, conservatively, when its series returns at 05:00)
    assert [r.rerolled_days for r in reports][:5] == [0, 0, 0, 0, 1]


class _History:
    """An API history (an audit log of lists) handed to collect as its Kubernetes snapshot."""

    def __init__(self, frames: Mapping[str, pl.DataFrame]) -> None:
        self.frames = frames

    def snapshot(self) -> Mapping[str, pl.DataFrame]:
        return self.frames


def _warm_history() -> dict[str, pl.DataFrame]:
    from gpuledger.collectors.dra import DraObjects, frames_from_history

    device = {"name": "gpu-2", "attributes": {"type": {"string": "gpu"}, "uuid": {"string": CARDS[2]},
                                              "productName": {"string": MODEL}}}
    slices = [{"spec": {"driver": "gpu.nvidia.com", "nodeName": NODE, "pool": {"name": NODE},
                        "devices": [device]}}]
    claim: dict[str, Any] = {
        "metadata": {"name": "warm", "namespace": "team-x", "uid": "warm-uid",
                     "creationTimestamp": "2026-05-04T01:30:00Z"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
        "status": {"allocation": {"allocationTimestamp": "2026-05-04T02:00:00Z", "devices": {"results": [
            {"request": "gpu", "driver": "gpu.nvidia.com", "pool": NODE, "device": "gpu-2"}]}}},
    }
    gone = {**claim, "metadata": {**claim["metadata"], "deletionTimestamp": "2026-05-04T05:00:00Z"}}
    history = [(T0 + 3 * HOUR, DraObjects(slices=slices, claims=[claim])),
               (T0 + 5 * HOUR + timedelta(minutes=10), DraObjects(slices=slices, claims=[gone]))]
    frames = frames_from_history(history)
    namespaces = pl.DataFrame([{"namespace": ns, "team": ns[-1], "labels": json.dumps({"team": ns[-1]}),
                                "observed_at": WINDOW.end} for ns in ("team-x", "team-y")])
    return {**frames, "namespaces": namespaces}


def test_claims_loaded_after_the_rollup_are_billed(prom_url: str, tmp_path: Path) -> None:
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        collect_window(wh, SETTINGS, prom_url, WINDOW, now=lambda: WINDOW.end, rollup=RollupPlan())
        before = _teams(compute_bill(wh, WINDOW, SETTINGS, by=("team",)))["x"]["card_hours"]
        report = collect_window(wh, SETTINGS, prom_url, WINDOW, now=lambda: WINDOW.end,
                                kubernetes=_History(_warm_history()), rollup=RollupPlan())
        bill = compute_bill(wh, WINDOW, SETTINGS, by=("team",))
    assert before == pytest.approx(5.0, abs=1e-9)
    assert bill.source == "rollup"
    assert _teams(bill)["x"]["card_hours"] == pytest.approx(5.0 + 3.0, abs=1e-9)
    assert report.up_to_date and report.rerolled_days == 1
