"""Jittered and skewed scrapes through real engines: each scrape on its own minute, idle runs whole.

A hand-built 90-minute series (one scrape per minute) of two whole GPUs, each held by one pod
for the whole window, written as OpenMetrics with millisecond timestamps and read by the
collector from Prometheus (promtool backfill) and VictoriaMetrics (import API):

- `GPU-j` on node `jitter-node` (scrape jitter): every scrape 5 s early except minute 30's,
  8 s late; busy (GR_ENGINE_ACTIVE 0.8) in minutes 0..29 and 60..89, idle (0.01) in 30..59.
  With each instant reading the step ENDING at it, scrape 30 (at 30:08) and scrape 31 (at
  30:55) both fell in (30:00, 31:00]: scrape 30 was lost, instant 30 was empty, and the idle
  run measured 29 minutes, under the 30-minute minimum: no idle time at all.
- `GPU-s` on node `skew-node` (clock skew): every scrape 3 s late; busy in minutes 0..59,
  idle in 60..89, the idle run ending with the window. With the step ending at each
  instant, every scrape moved to the next minute and the last one (89:03) to 90:00, outside
  the window: the run measured 29 minutes.

Expected numbers, by hand: each scrape belongs to its nominal minute, so each device has 90
rows, one per minute 0..89, on the minute grid; minute 30 of `GPU-j` shows 0.01 (its own
scrape) and minute 29 0.8. Each device holds 1.5 h and has one idle run of exactly
30 minutes: 0.5 idle hours, from minute 30 to 60 (`GPU-j`) and 60 to 90 (`GPU-s`).

Cases (each on both engines):
- rows per device: 90, one per minute, every value the scrape of that minute;
- held hours per device 1.5, idle hours 0.5, one idle run with the hand-computed bounds.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from gpuledger.analytics.sampling.results import held_hourly, idle_runs
from gpuledger.collect_pipeline import collect_window
from gpuledger.core.config import PrometheusSettings, Settings
from gpuledger.core.rules import SamplingRules
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse
from tools.metrics_servers import ServerPool

T0 = datetime(2026, 1, 1, tzinfo=UTC)
MINUTES = 90
WINDOW = Window(T0, T0 + timedelta(minutes=MINUTES))
NOW = WINDOW.end + timedelta(minutes=5)
MODEL = "NVIDIA H100 80GB HBM3"
BUSY, IDLE = 0.8, 0.01


def jitter_offset_ms(minute: int) -> int:
    return 8_000 if minute == 30 else -5_000


def skew_offset_ms(minute: int) -> int:
    return 3_000


DEVICES = {
    # uuid: (node, pod, offset of each scrape, idle minutes)
    "GPU-j": ("jitter-node", "train-j", jitter_offset_ms, range(30, 60)),
    "GPU-s": ("skew-node", "train-s", skew_offset_ms, range(60, 90)),
}


def value(uuid: str, minute: int) -> float:
    return IDLE if minute in DEVICES[uuid][3] else BUSY


def _lines() -> Iterator[str]:
    t0_ms = int(T0.timestamp()) * 1000
    for metric, of in (("DCGM_FI_PROF_GR_ENGINE_ACTIVE", value),
                       ("DCGM_FI_DEV_FB_USED", lambda u, m: 2000.0)):
        yield f"# TYPE {metric} gauge"
        for uuid, (node, pod, offset, _) in DEVICES.items():
            labels = (f'gpu="0",UUID="{uuid}",modelName="{MODEL}",Hostname="{node}",'
                      f'namespace="team-a",pod="{pod}",container="main"')
            for minute in range(MINUTES):
                ms = t0_ms + minute * 60_000 + offset(minute)
                yield f"{metric}{{{labels}}} {of(uuid, minute)} {ms // 1000}.{ms % 1000:03d}"


@pytest.fixture(scope="module")
def openmetrics(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("jitter") / "jitter.om"
    path.write_text("\n".join([*_lines(), "# EOF"]) + "\n")
    return path


@pytest.fixture(params=["prometheus", "victoriametrics"])
def collected(request: pytest.FixtureRequest, metrics_servers: ServerPool, openmetrics: Path,
              tmp_path: Path) -> Iterator[Warehouse]:
    request.applymarker(getattr(pytest.mark, request.param))
    if request.param == "prometheus":
        url = metrics_servers.prometheus(openmetrics).url
    else:
        url = metrics_servers.victoriametrics(openmetrics).url
    settings = Settings(prometheus=PrometheusSettings(chunk="1h", retries=1, timeout_s=10))
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        collect_window(wh, settings, url, WINDOW, now=lambda: NOW)
        yield wh


def test_each_scrape_on_its_own_minute(collected: Warehouse) -> None:
    rows = collected.query(
        "SELECT uuid, ts, gr_engine_active FROM gpu_samples ORDER BY uuid, ts")
    for uuid in DEVICES:
        mine = rows.filter(pl.col("uuid") == uuid)
        expected = [T0 + timedelta(minutes=m) for m in range(MINUTES)]
        assert mine["ts"].to_list() == expected, uuid
        assert mine["gr_engine_active"].to_list() == [value(uuid, m) for m in range(MINUTES)], uuid


def test_idle_runs_are_whole(collected: Warehouse) -> None:
    rules = SamplingRules.of(Settings())
    hourly = held_hourly(collected, WINDOW, rules).group_by("uuid").agg(
        pl.sum("held_hours"), pl.sum("idle_hours")).sort("uuid")
    assert hourly.rows() == [("GPU-j", pytest.approx(1.5), pytest.approx(0.5)),
                             ("GPU-s", pytest.approx(1.5), pytest.approx(0.5))]
    runs = idle_runs(collected, WINDOW, rules).sort("uuid")
    assert runs.select("uuid", "start_ts", "end_ts").rows() == [
        ("GPU-j", T0 + timedelta(minutes=30), T0 + timedelta(minutes=60)),
        ("GPU-s", T0 + timedelta(minutes=60), T0 + timedelta(minutes=90)),
    ]
