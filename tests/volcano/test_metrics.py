"""Volcano's queue metrics (`volcano_queue_*`) through a real Prometheus, beside Kueue's.

An OpenMetrics file (30 one-minute samples) backfilled into Prometheus with promtool holds
two Volcano Queues (allocated and deserved `nvidia.com/gpu` in Volcano's milli-units, Pending
and Inqueue PodGroup counts; queue b has no Inqueue series) and one Kueue ClusterQueue. With
`queues.systems: [kueue, volcano]` one collection stores both systems' rows in
`queue_samples`: Volcano usage and quota in whole GPUs under flavor `default`, pending
workloads = Pending + Inqueue PodGroups (Pending alone where Inqueue is absent), and Kueue's
rows as before.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gpuledger.collect_pipeline import collect_window
from gpuledger.core.config import Settings
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse

pytestmark = pytest.mark.prometheus
T0 = datetime(2026, 11, 1, tzinfo=UTC)
MINUTES = 30
SERIES = {
    "volcano_queue_allocated_scalar_resources": [('queue_name="vq-a",resource="nvidia.com/gpu"', 3000.0),
                                                 ('queue_name="vq-b",resource="nvidia.com/gpu"', 1000.0)],
    "volcano_queue_deserved_scalar_resources": [('queue_name="vq-a",resource="nvidia.com/gpu"', 8000.0),
                                                ('queue_name="vq-b",resource="nvidia.com/gpu"', 4000.0)],
    "volcano_queue_pod_group_pending_count": [('queue_name="vq-a"', 2.0), ('queue_name="vq-b"', 5.0)],
    "volcano_queue_pod_group_inqueue_count": [('queue_name="vq-a"', 1.0)],
    "kueue_cluster_queue_resource_usage": [('cluster_queue="cq",flavor="h100",resource="nvidia.com/gpu"', 5.0)],
    "kueue_cluster_queue_nominal_quota": [('cluster_queue="cq",flavor="h100",resource="nvidia.com/gpu"', 6.0)],
    "kueue_pending_workloads": [('cluster_queue="cq",status="active"', 1.0)],
}


def _write(path: Path) -> Path:
    lines = []
    for name, series in SERIES.items():
        lines.append(f"# TYPE {name} gauge")
        for m in range(MINUTES):
            ts = (T0 + timedelta(minutes=m)).timestamp()
            lines.extend(f"{name}{{{labels}}} {value} {ts:.0f}" for labels, value in series)
    path.write_text("\n".join([*lines, "# EOF", ""]))
    return path


def test_volcano_and_kueue_queue_samples_from_one_prometheus(metrics_servers, tmp_path):
    server = metrics_servers.prometheus(_write(tmp_path / "queues.om"))
    settings = Settings(queues={"systems": ["kueue", "volcano"]},
                        prometheus={"chunk": "1h", "retries": 1, "timeout_s": 10})
    window = Window(T0 + timedelta(minutes=5), T0 + timedelta(minutes=25))
    with Warehouse.open(tmp_path / "wh.duckdb") as wh:
        collect_window(wh, settings, server.url, window, require_series=False, now=lambda: T0 + timedelta(hours=1))
        rows = wh.query("SELECT cluster_queue, flavor, resource, usage, nominal_quota, pending_workloads, "
                        "count(*) AS n FROM queue_samples GROUP BY ALL ORDER BY cluster_queue").rows()
    assert rows == [
        ("cq", "h100", "nvidia.com/gpu", 5.0, 6.0, 1.0, 20),
        ("vq-a", "default", "nvidia.com/gpu", 3.0, 8.0, 3.0, 20),
        ("vq-b", "default", "nvidia.com/gpu", 1.0, 4.0, 5.0, 20),
    ]
