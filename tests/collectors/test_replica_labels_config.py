"""`prometheus.replica_labels` in the config names the labels that tell HA replicas apart.

The fleet (built here): one H100 GPU-r0 on node-r, held by team-a/pod-a, GR_ENGINE_ACTIVE every
minute for one hour, answered twice by a query layer that marks its two Prometheus replicas
with a label of its own, `ha="x"` / `ha="y"`.

Cases (real Prometheus, promtool backfill, `collect_window`):
- with `replica_labels: [ha]`: one row per minute, the 60 copies merged as `ha_duplicate`;
- with the defaults (`replica`, `prometheus_replica`): `ha` is not known as a replica label, so
  the copies are two series of one device: one row per minute still, 60 counted as
  `duplicate_series` (never double counted either way).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gpuledger.collect_pipeline import collect_window
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse
from tests.collectors.conftest import tiny_settings
from tools.metrics_servers import ServerPool

T0 = datetime(2026, 5, 1, tzinfo=UTC)
WINDOW = Window(T0, T0 + timedelta(hours=1), timedelta(minutes=1))


def _write(path: Path) -> Path:
    lines = ["# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge"]
    for replica in ("x", "y"):
        labels = ('gpu="0",UUID="GPU-r0",modelName="NVIDIA H100 80GB HBM3",Hostname="node-r",'
                  f'namespace="team-a",pod="pod-a",container="main",ha="{replica}"')
        lines += [f"DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{labels}}} 0.5 {int((T0 + timedelta(minutes=i)).timestamp())}"
                  for i in range(60)]
    path.write_text("\n".join([*lines, "# EOF"]) + "\n")
    return path


@pytest.fixture(scope="module")
def prom_url(metrics_servers: ServerPool, tmp_path_factory: pytest.TempPathFactory) -> str:
    return metrics_servers.prometheus(_write(tmp_path_factory.mktemp("ha") / "ha.om")).url


@pytest.mark.prometheus
@pytest.mark.parametrize(("replica_labels", "reason"), [(("ha",), "ha_duplicate"), (None, "duplicate_series")])
def test_configured_replica_labels(prom_url: str, tmp_path: Path, replica_labels, reason) -> None:
    extra = {"replica_labels": replica_labels} if replica_labels else {}
    settings = tiny_settings(chunk="1h", step="60s", **extra)
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        report = collect_window(wh, settings, prom_url, WINDOW, now=lambda: WINDOW.end + timedelta(hours=1))
        assert wh.count("gpu_samples") == 60
    assert report.quality is not None
    assert report.quality.by_reason() == {reason: 60}
