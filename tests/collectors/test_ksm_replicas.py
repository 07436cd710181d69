"""Time-slice replicas configured on the node reach the bill through kube-state-metrics.

The fleet (built here): node `node-ts`, one H100 time-sliced card GPU-t0 shared through
dcgm-exporter's `--kubernetes-virtual-gpus` (`vgpu` label) by team-a/pod-a (vgpu 0) and
team-b/pod-b (vgpu 1), GR_ENGINE_ACTIVE every minute for 2 hours. kube-state-metrics exports
the GPU feature discovery label `nvidia.com/gpu.replicas` as `label_nvidia_com_gpu_replicas`.

Cases (real Prometheus, promtool backfill, then `collect_window` and `compute_bill`):
- replicas 4 on the node: each pod is billed a quarter of the card (0.5 card-hours over two
  hours), the unused half of the card is unallocated (1.0), nothing is reported unknown;
- no `kube_node_labels`: the replica count is unknown, the node is listed in
  `replicas_unknown_nodes` (the shares fall back to the replicas seen, as before).
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

T0 = datetime(2026, 4, 1, tzinfo=UTC)
WINDOW = Window(T0, T0 + timedelta(hours=2), timedelta(minutes=1))
HOLDERS = {"0": ("team-a", "pod-a"), "1": ("team-b", "pod-b")}


def _write(path: Path, *, replicas: int | None) -> Path:
    instants = [int((T0 + timedelta(minutes=i)).timestamp()) for i in range(120)]
    lines = ["# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge"]
    for vgpu, (ns, pod) in HOLDERS.items():
        labels = (f'gpu="0",UUID="GPU-t0",modelName="NVIDIA H100 80GB HBM3",Hostname="node-ts",'
                  f'vgpu="{vgpu}",namespace="{ns}",pod="{pod}",container="main"')
        lines += [f"DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{labels}}} 0.5 {t}" for t in instants]
    lines.append("# TYPE kube_namespace_labels gauge")
    for ns, _ in HOLDERS.values():
        lines += [f'kube_namespace_labels{{namespace="{ns}"}} 1 {t}' for t in instants]
    if replicas is not None:
        lines.append("# TYPE kube_node_labels gauge")
        lines += [f'kube_node_labels{{node="node-ts",label_nvidia_com_gpu_replicas="{replicas}"}} 1 {t}'
                  for t in instants]
    path.write_text("\n".join([*lines, "# EOF"]) + "\n")
    return path


def _bill(metrics_servers: ServerPool, tmp_path: Path, replicas: int | None):
    url = metrics_servers.prometheus(_write(tmp_path / "ts.om", replicas=replicas)).url
    settings = tiny_settings(chunk="1h", step="60s")
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        collect_window(wh, settings, url, WINDOW, now=lambda: WINDOW.end + timedelta(hours=1))
        return compute_bill(wh, WINDOW, settings, ("team",))


@pytest.mark.prometheus
def test_configured_replicas_reach_the_bill(metrics_servers: ServerPool, tmp_path: Path) -> None:
    bill = _bill(metrics_servers, tmp_path, replicas=4)
    hours = {r["team"]: r["card_hours"] for r in bill.lines.to_dicts()}
    assert hours["a"] == pytest.approx(0.5)
    assert hours["b"] == pytest.approx(0.5)
    assert hours["unallocated"] == pytest.approx(1.0)
    assert bill.fleet_card_hours == pytest.approx(2.0)
    assert list(bill.replicas_unknown_nodes) == []


@pytest.mark.prometheus
def test_unknown_replicas_are_reported(metrics_servers: ServerPool, tmp_path: Path) -> None:
    bill = _bill(metrics_servers, tmp_path, replicas=None)
    assert list(bill.replicas_unknown_nodes) == ["node-ts"]
    assert bill.fleet_card_hours == pytest.approx(2.0)
