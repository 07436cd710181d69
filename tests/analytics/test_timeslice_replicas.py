"""Time-slice shares from configuration: GFD's `nvidia.com/gpu.replicas` node label.

Prices: H100-80GB 3.00/card-hour (default config); timeslice discount 0.8 (default config).

Cases:
- a card configured for 4 replicas with 2 pods in use (the inventory, as a Prometheus-only
  collector builds it, says 2: the replicas it saw): each pod pays 1/4 of the card and the
  other half is on the unallocated line; no node is reported unknown;
- the same card with no replica label anywhere: billed as before (1/2 each, from the replicas
  seen) but the bill names the node in `replicas_unknown_nodes` and the CLI warns once;
- the roll-up path (`card_hours_hourly` written by `analytics.usage.rollup`) gives the same shares;
- kube-state-metrics: `kube_node_labels{label_nvidia_com_gpu_replicas="4"}` becomes the node's
  `nvidia.com/gpu.replicas` label and its `replicas`, replacing the count seen; unknown
  sanitized keys are not guessed back;
- the Kubernetes API (real kube-apiserver): a node labelled by GFD with 4 replicas and a
  `-SHARED` product, and one with a `-MIG-1g.5gb` product under the single strategy, are read
  with their replica count and their model without the suffix.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from gpuledger.analytics.billing.bill import compute_bill
from gpuledger.analytics.usage.rollup import rollup_batch
from gpuledger.collectors.ksm import node_labels_from_vector, with_node_labels
from gpuledger.core.config import Settings
from gpuledger.core.frames import TABLES, polars_schema
from gpuledger.warehouse import Warehouse
from tests.analytics.builders import Seg, at, gpus, load, namespaces, samples, window
from tests.analytics.conftest import assert_conserved, by_team

H100 = 3.00
TIMESLICE = 0.8
ROOT = Path(__file__).resolve().parents[2]


def _nodes(*rows: dict[str, Any]) -> pl.DataFrame:
    base = {"pool": "default", "model": "H100-80GB", "gpu_count": 1, "sharing_mode": "timeslice",
            "replicas": None, "mig_config": None, "mig_config_state": None, "labels": None,
            "capacity": None, "allocatable": None, "resource_version": None, "observed_at": at(0)}
    return pl.DataFrame([base | r for r in rows], schema=polars_schema(TABLES["nodes"]))


def _frames(node_labels: dict[str, str] | None, hours: int = 2) -> dict[str, pl.DataFrame]:
    """A card time-sliced in 2, held by x's and y's pod for `hours`; `node-a` with `node_labels`."""
    frames = {
        # What a Prometheus-only collector stores: 2 replicas, the number of `vgpu` labels seen.
        "gpus": gpus({"uuid": "GPU-T", "sharing_mode": "timeslice", "replicas": 2}),
        "gpu_samples": samples([
            Seg("GPU-T", at(0), at(hours), "x-ns", "p1", act=0.4, vgpu="0"),
            Seg("GPU-T", at(0), at(hours), "y-ns", "p2", act=0.4, vgpu="1"),
        ]),
        "namespaces": namespaces({"x-ns": "x", "y-ns": "y"}),
    }
    if node_labels is not None:
        frames["nodes"] = _nodes({"node": "node-a", "labels": json.dumps(node_labels)})
    return frames


def test_configured_replicas_set_the_share(make_bill):
    bill = make_bill(window(2), _frames({"nvidia.com/gpu.replicas": "4"}))
    lines = by_team(bill)
    for team in ("x", "y"):
        assert lines[team]["card_hours"] == pytest.approx(2 * 0.25)
        assert lines[team]["cost"] == round(2 * 0.25 * H100 * TIMESLICE, 2)
    assert lines["unallocated"]["card_hours"] == pytest.approx(1.0)
    assert lines["unallocated"]["cost"] == 1.0 * H100
    assert bill.replicas_unknown_nodes == ()


def test_unknown_replicas_are_reported_not_guessed_silently(make_bill, tmp_path):
    bill = make_bill(window(2), _frames(None))
    lines = by_team(bill)
    assert lines["x"]["card_hours"] == pytest.approx(2 * 0.5)
    assert "unallocated" not in lines or lines["unallocated"]["card_hours"] == pytest.approx(0.0)
    assert bill.replicas_unknown_nodes == ("node-a",)
    assert bill.to_dict()["replicas_unknown_nodes"] == ["node-a"]
    path = load(tmp_path / "unknown.duckdb", window(2), _frames({"some.other/label": "x"}))
    done = subprocess.run(
        [sys.executable, "-m", "gpuledger", "--warehouse", str(path), "bill", "--start",
         "2026-11-01T00:00:00Z", "--end", "2026-11-01T02:00:00Z", "--format", "json"],
        capture_output=True, text=True, check=False, cwd=ROOT, timeout=300,
    )
    assert done.returncode == 0
    assert json.loads(done.stdout)["replicas_unknown_nodes"] == ["node-a"]
    warnings = done.stderr.splitlines()
    assert len(warnings) == 1 and "node-a" in warnings[0] and "nvidia.com/gpu.replicas" in warnings[0]


def test_rollup_path_uses_the_configured_replicas(tmp_path):
    path = load(tmp_path / "rollup.duckdb", window(2), _frames({"nvidia.com/gpu.replicas": "4"}))
    with Warehouse.open(path) as wh:
        wh.load(rollup_batch(wh, window(2), Settings()))
        stored = wh.query("SELECT DISTINCT share FROM allocations")["share"].to_list()
        bill = compute_bill(wh, window(2), Settings(), source="rollup", grain="lines")
    assert_conserved(bill)
    assert bill.source == "rollup"
    assert stored == [pytest.approx(0.25)]
    lines = by_team(bill)
    assert lines["x"]["card_hours"] == pytest.approx(0.5)
    assert lines["unallocated"]["card_hours"] == pytest.approx(1.0)


def test_kube_state_metrics_node_labels():
    vector = [
        {"metric": {"__name__": "kube_node_labels", "node": "node-a",
                    "label_nvidia_com_gpu_replicas": "4", "label_nvidia_com_gpu_product": "NVIDIA-L4-SHARED",
                    "label_some_vendor_io_thing": "x"}, "value": [0, "1"]},
        {"metric": {"__name__": "kube_node_labels", "node": "node-b"}, "value": [0, "1"]},
    ]
    labels = node_labels_from_vector(vector)
    assert labels == {
        "node-a": {"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.product": "NVIDIA-L4-SHARED"},
        "node-b": {},
    }
    seen = _nodes({"node": "node-a", "replicas": 2}, {"node": "node-b", "replicas": 3})
    merged = {r["node"]: r for r in with_node_labels(seen, labels).to_dicts()}
    assert merged["node-a"]["replicas"] == 4
    assert json.loads(merged["node-a"]["labels"])["nvidia.com/gpu.replicas"] == "4"
    assert merged["node-b"]["replicas"] == 3  # no label: the count seen stays, and stays unknown
    assert json.loads(merged["node-b"]["labels"]) == {}


@pytest.mark.k8s
def test_kubernetes_api_node_labels(k8s_cluster: Any) -> None:
    from kubernetes import client

    from gpuledger.collectors.kubernetes import KubernetesCollector

    wanted = {
        "ts-replicas-4": {"nvidia.com/gpu.product": "NVIDIA-L4-SHARED", "nvidia.com/gpu.replicas": "4",
                          "nvidia.com/gpu.count": "1"},
        "mig-single": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
                       "nvidia.com/mig.strategy": "single", "nvidia.com/gpu.count": "1"},
    }
    when = datetime(2026, 11, 1, tzinfo=UTC)
    with k8s_cluster.api_client() as api:
        core = client.CoreV1Api(api)
        for name, labels in wanted.items():
            core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name=name, labels=labels)))
        try:
            nodes = {r["node"]: r for r in KubernetesCollector(api, Settings()).nodes(when).to_dicts()}
        finally:
            for name in wanted:
                core.delete_node(name)
    assert nodes["ts-replicas-4"]["sharing_mode"] == "timeslice"
    assert nodes["ts-replicas-4"]["replicas"] == 4
    assert json.loads(nodes["ts-replicas-4"]["labels"])["nvidia.com/gpu.replicas"] == "4"
    assert nodes["ts-replicas-4"]["model"] == "NVIDIA-L4"
    assert nodes["mig-single"]["model"] == "A100-SXM4-40GB"
