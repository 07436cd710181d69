"""The pending scenario (`simulator.pending`) loaded into a real kube-apiserver, collected by the
Kubernetes collector and stored in a warehouse, with the scenario's MIG cards stored as the
DCGM collector stores them (`gpus`, `mig_instances`, `gpu_samples` of the holders)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import polars as pl

from gpuledger.core.frames import GPU_SAMPLES, GPUS, MIG_INSTANCES
from gpuledger.core.table_spec import polars_schema
from gpuledger.core.window import Window
from gpuledger.simulator import pending as scenario
from gpuledger.warehouse import LoadBatch, Warehouse

KEEP = ("nodes", "namespaces", "pods", "queues", "pending_workloads", "queue_usage")


def card_frames(prefix: str, ns: str, at: Any) -> dict[str, pl.DataFrame]:
    gpus, instances, samples = [], [], []
    for card in scenario.cards(prefix):
        gpus.append({"uuid": card.uuid, "node": card.node, "gpu_index": 0, "model": scenario.MODEL,
                     "model_name": "NVIDIA A100-SXM4-80GB", "memory_mib": 81920.0, "pool": "train",
                     "sharing_mode": "mig", "replicas": None, "first_seen": at - timedelta(hours=1),
                     "last_seen": at})
        gi = 0
        for profile, count in sorted(card.instances.items()):
            for k in range(count):
                gi += 1
                instances.append({"uuid": card.uuid, "gpu_i_id": gi, "profile": profile,
                                  "start_ts": at - timedelta(hours=1), "end_ts": at})
                if k < card.held.get(profile, 0):
                    samples.append({"ts": at - timedelta(minutes=1), "node": card.node, "uuid": card.uuid,
                                    "gpu_i_id": gi, "mig_profile": profile, "namespace": ns,
                                    "pod": f"holder-{card.node.rsplit('-', 2)[-2]}-{card.node[-1]}"})
    return {"gpus": pl.DataFrame(gpus, schema=polars_schema(GPUS)),
            "mig_instances": pl.DataFrame(instances, schema=polars_schema(MIG_INSTANCES)),
            "gpu_samples": pl.DataFrame(samples, schema=polars_schema(GPU_SAMPLES))}


def collect_into(api: Any, settings: Any, path: Path, prefix: str, ns: str) -> Warehouse:
    """Snapshot the cluster, store what capacity and `why` read; the warehouse is returned open."""
    from gpuledger.collectors.kubernetes import KubernetesCollector

    frames = KubernetesCollector(api, settings, queue_system=("kueue", "volcano")).snapshot()
    at = frames["nodes"]["observed_at"][0]
    wh = Warehouse.open(path)
    cards = card_frames(prefix, ns, at)
    window = Window(at - timedelta(minutes=5), at + timedelta(minutes=1))
    wh.load(LoadBatch({**{k: frames[k] for k in KEEP}, **cards}, window=window))
    return wh
