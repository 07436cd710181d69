"""The bulk reads (Prometheus remote read, VictoriaMetrics export) give the query path's frames.

The independent check: the same window read twice from the same real engine, once by
`query_range` (the engine evaluates PromQL: `last_over_time` on the centred step, its own
range semantics, its own answer order) and once by the bulk path (raw samples aligned by
`bulk_align`), must give IDENTICAL frames and quality counts, chunk by chunk. The history is
the simulator's field mode with every `FieldEffects` effect on (jitter, missed scrapes, gaps,
exporter restarts, HA replicas, label renames, pod restarts, card replacements, MIG changes,
node churn, clock skew, NaN and negative values), so each rule the query path relies on is
exercised through both; chunks of 50 minutes put chunk edges off the hour, between scrapes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from gpuledger.collectors.prometheus import ChunkData, PrometheusCollector
from gpuledger.core.config import Settings
from gpuledger.core.frames import DCGM_FIELDS
from gpuledger.core.window import Window
from gpuledger.simulator.engine import Simulation
from gpuledger.simulator.field import FieldEffects
from gpuledger.simulator.fleet import FleetSpec
from tools.metrics_servers import ServerPool

pytestmark = [pytest.mark.prometheus, pytest.mark.victoriametrics, pytest.mark.slow]

WINDOW = Window(datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 1, 5, tzinfo=UTC))


EDGE_OFFSETS_MS = (-30_001, -30_000, -29_999, -29_998, -1, 0, 1, 29_999, 30_000, 30_001)
"""Sample offsets from a minute: both ends of the centred step, and either side of each."""


@pytest.fixture(scope="module", params=["none", "all", "wide-jitter", "edges"])
def history(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """`all`: every effect; `wide-jitter`: scrapes anywhere in their step (±30 s), so steps
    with two scrapes and scrapes on a step's edge occur; `edges`: hand-placed samples on and
    next to every step edge, several per step, on a millisecond grid."""
    path = tmp_path_factory.mktemp(f"bulk-{request.param}") / "fleet.om"
    if request.param == "edges":
        _write_edges(path)
    else:
        effects = {"none": FieldEffects.none(), "all": FieldEffects.all(),
                   "wide-jitter": replace(FieldEffects.all(), jitter_s=30.0)}[request.param]
        sim = Simulation(FleetSpec.default(gpus=40, field=effects), WINDOW, seed=11)
        sim.write_openmetrics(path, families=tuple(DCGM_FIELDS))
    yield path


def _write_edges(path: Path) -> None:
    start_ms = int(WINDOW.start.timestamp() * 1000)
    text = []
    for metric, gpus in (("DCGM_FI_DEV_GPU_UTIL", (0, 1)), ("DCGM_FI_DEV_POWER_USAGE", (0,))):
        text.append(f"# TYPE {metric} gauge")
        for gpu in gpus:
            labels = (f'UUID="GPU-edge-{gpu}",gpu="{gpu}",modelName="NVIDIA H100 80GB HBM3",'
                      f'Hostname="edge-node",namespace="ml-a",pod="p-{gpu}",container="main"')
            stamps = sorted({start_ms + minute * 60_000 + EDGE_OFFSETS_MS[(minute * 7 + gpu + j * 3) % 10]
                             for minute in range(1, 300) for j in range(1 + minute % 3)})
            text += [f"{metric}{{{labels}}} {(i * 37 + gpu) % 101} {t / 1000:.3f}" for i, t in enumerate(stamps)]
    path.write_text("\n".join(text) + "\n# EOF\n")


def _collect(url: str, read_path: str) -> tuple[str, list[ChunkData]]:
    settings = Settings(prometheus={"chunk": "50m", "read_path": read_path, "retries": 1})
    with PrometheusCollector(url, settings, now=lambda: WINDOW.end + timedelta(minutes=5),
                             namespaces_from_metrics=False) as collector:
        chunks = list(collector.iter_chunks(WINDOW))
        return collector.choose_read_path(), chunks


def _same(query: list[ChunkData], bulk: list[ChunkData]) -> None:
    assert [c.chunk for c in query] == [c.chunk for c in bulk]
    for q, b in zip(query, bulk, strict=True):
        # Row for row; the frames built by a `group_by` have no row order: those sorted first.
        assert q.frames["gpu_samples"].equals(b.frames["gpu_samples"]), q.chunk
        for name, frame in {**q.frames, "devices": q.devices}.items():
            other = b.frames.get(name, b.devices)
            assert frame.schema == other.schema, (name, q.chunk)
            assert _sorted(frame).equals(_sorted(other)), (name, q.chunk, _diff(frame, other))
        assert q.quality.counts == b.quality.counts, q.chunk
        assert q.quality.series == b.quality.series, q.chunk
        assert q.quality.gaps == b.quality.gaps, q.chunk


def _sorted(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.sort(frame.columns, nulls_last=True)


def _diff(a: pl.DataFrame, b: pl.DataFrame) -> str:
    return f"{a.height} vs {b.height} rows:\n{a.join(b, how='anti', on=a.columns, nulls_equal=True).head(5)}"


@pytest.mark.parametrize("engine, path", [("prometheus", "remote_read"), ("victoriametrics", "export")])
def test_bulk_frames_equal_query_frames(history: Path, metrics_servers: ServerPool, engine: str,
                                        path: str) -> None:
    server = metrics_servers.prometheus(history) if engine == "prometheus" else \
        metrics_servers.victoriametrics(history)
    kind, query = _collect(server.url, "query_range")
    assert kind == "query_range"
    kind, bulk = _collect(server.url, "auto")
    assert kind == path  # auto found the engine's bulk read
    assert sum(c.samples for c in query) > 500  # the window has data to compare
    _same(query, bulk)
