"""Hand-built warehouse tables for the analytics tests.

A case is written as a few *segments* (device, holder, start, end, activity, framebuffer);
`samples()` expands them into the 1-minute rows dcgm-exporter would have produced, and
`load()` puts every table into a real DuckDB warehouse file through `Warehouse.load`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from gpuledger.core.frames import TABLES, polars_schema
from gpuledger.core.window import Window
from gpuledger.warehouse import LoadBatch, Warehouse

T0 = datetime(2026, 11, 1, tzinfo=UTC)
STEP = timedelta(minutes=1)


def at(hours: float = 0, minutes: float = 0, days: int = 0) -> datetime:
    return T0 + timedelta(days=days, hours=hours, minutes=minutes)


@dataclass(frozen=True)
class Seg:
    """Samples of one device from `start` to `end` (exclusive), every minute."""

    uuid: str
    start: datetime
    end: datetime
    namespace: str | None = None
    pod: str | None = None
    act: float | None = 0.5
    fb: float = 20_000.0
    gpu_i_id: int = -1
    profile: str | None = None
    vgpu: str | None = None
    node: str = "node-a"
    util: float | None = None


def samples(segs: Iterable[Seg]) -> pl.DataFrame:
    rows: list[dict[str, Any]] = []
    for s in segs:
        t = s.start
        while t < s.end:
            rows.append({
                "ts": t, "node": s.node, "uuid": s.uuid, "gpu_i_id": s.gpu_i_id,
                "mig_profile": s.profile, "vgpu": s.vgpu, "namespace": s.namespace,
                "pod": s.pod, "container": "main" if s.pod else None,
                "gr_engine_active": s.act, "sm_active": None, "gpu_util": s.util,
                "fb_used_mib": s.fb, "fb_free_mib": None, "power_w": None,
                "tensor_active": None, "dram_active": None, "gpu_temp_c": None,
            })
            t += STEP
    return pl.DataFrame(rows, schema=polars_schema(TABLES["gpu_samples"]))


def gpus(*rows: dict[str, Any]) -> pl.DataFrame:
    base = {"node": "node-a", "gpu_index": 0, "model": "H100-80GB", "model_name": None,
            "memory_mib": 81920.0, "pool": "default", "sharing_mode": "exclusive",
            "replicas": None, "first_seen": None, "last_seen": None}
    full = [base | r for r in rows]
    return pl.DataFrame(full, schema=polars_schema(TABLES["gpus"]))


def namespaces(mapping: dict[str, str | None]) -> pl.DataFrame:
    rows = [{"namespace": ns, "team": team, "labels": json.dumps({"team": team} if team else {}),
             "observed_at": T0} for ns, team in mapping.items()]
    return pl.DataFrame(rows, schema=polars_schema(TABLES["namespaces"]))


def pods(*rows: dict[str, Any]) -> pl.DataFrame:
    base = {"node": "node-a", "queue": None, "owner_kind": None, "owner_name": None,
            "gpu_requests": json.dumps({"nvidia.com/gpu": 1}), "labels": "{}",
            "start_ts": T0 - timedelta(days=1), "end_ts": T0 + timedelta(days=40)}
    return pl.DataFrame([base | r for r in rows], schema=polars_schema(TABLES["pods"]))


def mig_instances(*rows: tuple[str, int, str, datetime, datetime]) -> pl.DataFrame:
    return pl.DataFrame(
        [{"uuid": u, "gpu_i_id": g, "profile": p, "start_ts": s, "end_ts": e} for u, g, p, s, e in rows],
        schema=polars_schema(TABLES["mig_instances"]),
    )


def load(path: Path, window: Window, frames: dict[str, pl.DataFrame]) -> Path:
    """Create a warehouse file at `path` holding `frames` (samples inside `window`)."""
    with Warehouse.open(path) as wh:
        wh.load(LoadBatch(frames=frames, window=window))
    return path


def simulated(path: Path, gpus: int, window: Window, seed: int) -> Path:
    """Create a warehouse file at `path` holding the default simulated fleet of `gpus` over
    `window` (what the day-parts tests read: serving Deployments, shared cards, allocations)."""
    from gpuledger.pipeline import load_simulation
    from gpuledger.simulator.engine import Simulation
    from gpuledger.simulator.fleet import FleetSpec

    with Warehouse.open(path) as wh:
        load_simulation(wh, Simulation(FleetSpec.default(gpus=gpus), window, seed=seed))
    return path


def totals(lines: pl.DataFrame, key: str = "team") -> dict[str, dict[str, float]]:
    return {row[key]: row for row in lines.iter_rows(named=True)}


def approx_equal(a: float, b: float, tol: float = 1e-6) -> bool:
    return abs(a - b) <= tol


def window(hours: float, start: datetime = T0) -> Window:
    return Window(start, start + timedelta(hours=hours))


def seq(*values: Sequence[Any]) -> list[Any]:
    return [v for group in values for v in group]
