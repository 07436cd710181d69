"""The bill does not depend on `prometheus.step` (issue 31 item 8).

The fleet (real Prometheus, promtool backfill, scrapes every 60 s, or every 30 s): one
time-sliced H100 (`nvidia.com/gpu.replicas` 2 on its node) exported without the `vgpu` label,
so its holders come from kube-state-metrics' pod history (`analytics.devices.unlabeled`):
pod `a` requests one replica for the whole 4 hours, pod `b` from minute 30 to minute 150, pod
`c` from minute 200 to the end; a second, whole card on another node is held by `team-w`
throughout (its holder from the DCGM labels). Collected at steps 15 s, 30 s, 60 s and 120 s
over the same scrapes, the bill is the same to the cent, and equals the truth computed here:
each pod holds 1/2 of the card for its lifetime (the node is never over-committed) at the
time-slicing discount 0.8, the rest of the card's time is unallocated.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gpuledger.analytics.billing.bill import compute_bill
from gpuledger.collect_pipeline import collect_window
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse
from tests.collectors.conftest import tiny_settings
from tools.metrics_servers import ServerPool

pytestmark = pytest.mark.prometheus

T0 = datetime(2026, 6, 1, tzinfo=UTC)
MINUTES = 240
END = T0 + timedelta(minutes=MINUTES)
PRICE = 3.00  # H100-80GB, default price book
TIMESLICE = 0.8  # the default discount factor of a time-sliced share (core/config.py)
PODS = {"a": (0, MINUTES), "b": (30, 150), "c": (200, MINUTES)}
"""pod -> [first minute, end minute) of its life, all in namespace team-s."""
MODEL = 'modelName="NVIDIA H100 80GB HBM3"'


def _write(path: Path, scrape_s: int) -> Path:
    instants = [int((T0 + timedelta(seconds=s)).timestamp()) for s in range(0, MINUTES * 60, scrape_s)]
    lines = ["# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge"]
    shared = f'gpu="0",UUID="GPU-s0",{MODEL},Hostname="node-s",namespace="team-s",pod="a",container="m"'
    whole = f'gpu="0",UUID="GPU-w0",{MODEL},Hostname="node-w",namespace="team-w",pod="w",container="m"'
    for labels in (shared, whole):
        lines += [f"DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{labels}}} 0.5 {t}" for t in instants]
    lines.append("# TYPE kube_pod_container_resource_requests gauge")
    for pod, (first, end) in PODS.items():
        alive = [t for t in instants if first * 60 <= t - T0.timestamp() < end * 60]
        lines += [f'kube_pod_container_resource_requests{{namespace="team-s",pod="{pod}",container="m",'
                  f'resource="nvidia_com_gpu",unit="integer",node="node-s"}} 1 {t}' for t in alive]
    lines.append("# TYPE kube_pod_info gauge")
    for pod, (first, end) in PODS.items():
        alive = [t for t in instants if first * 60 <= t - T0.timestamp() < end * 60]
        lines += [f'kube_pod_info{{namespace="team-s",pod="{pod}",node="node-s",created_by_kind="Job",'
                  f'created_by_name="{pod}"}} 1 {t}' for t in alive]
    lines.append("# TYPE kube_node_labels gauge")
    lines += [f'kube_node_labels{{node="node-s",label_nvidia_com_gpu_replicas="2"}} 1 {t}' for t in instants]
    lines.append("# TYPE kube_namespace_labels gauge")
    for ns in ("team-s", "team-w"):
        lines += [f'kube_namespace_labels{{namespace="{ns}"}} 1 {t}' for t in instants]
    path.write_text("\n".join([*lines, "# EOF"]) + "\n")
    return path


def _costs(url: str, tmp_path: Path, step: str) -> dict[str, float]:
    settings = tiny_settings(chunk="1h", step=step, read_path="query_range")
    window = Window(T0, END, timedelta(seconds=int(step.removesuffix("s"))))
    with Warehouse.open(tmp_path / f"w-{step}.duckdb") as wh:
        collect_window(wh, settings, url, window, now=lambda: END + timedelta(hours=1))
        bill = compute_bill(wh, Window(T0, END), settings, ("team",))
    out = {row["team"]: round(row["cost"], 2) for row in bill.lines.to_dicts()}
    out["unallocated"] = round(float(bill.unallocated["cost"].sum()), 2) if bill.unallocated.height else 0.0
    return out


def _truth() -> dict[str, float]:
    shared_hours = sum(end - first for first, end in PODS.values()) / 60 / 2  # half a card each
    card_hours = MINUTES / 60
    shared = shared_hours * PRICE
    return {"s": round(shared * TIMESLICE, 2), "w": round(card_hours * PRICE, 2),
            "sharing_discount": round(shared * (1 - TIMESLICE), 2),
            "unallocated": round((card_hours - shared_hours) * PRICE, 2)}


@pytest.mark.parametrize("scrape_s", [60, 30])
def test_bill_is_the_same_at_every_step(metrics_servers: ServerPool, tmp_path: Path, scrape_s: int) -> None:
    url = metrics_servers.prometheus(_write(tmp_path / f"s{scrape_s}.om", scrape_s)).url
    bills = {step: _costs(url, tmp_path, step) for step in ("15s", "30s", "60s", "120s")}
    for step, costs in bills.items():
        assert costs == _truth(), (scrape_s, step, bills)
