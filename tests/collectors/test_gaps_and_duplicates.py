"""Outages, HA replicas and label renames: collection never wedges and never double counts.

The fleet (built here, truth from its own layout): node `node-h`, GPU-h0 held by team-a/pod-a,
GPU-h1 unallocated, GR_ENGINE_ACTIVE every 5 minutes for 3 days, answered by two Prometheus
replicas (`prometheus_replica` r0, r1). Day 0: r1 misses hours 2-3 of GPU-h0. Day 1: no DCGM
series at all (a day-long exporter outage). Day 2 at 12:00: the exporter is redeployed behind
a ServiceMonitor with honorLabels false and the 2026 label spelling: `Hostname` → `hostname`,
the workload moves to `exported_*`, plain `pod` names the exporter.

Cases (real Prometheus, promtool backfill, daily chunks):
- the day-long hole is a gap: the run completes, the watermark reaches the window end, the
  report lists the empty chunk, the days around it are loaded, a second run is up to date
  (today's code failed with `frame for gpus: column uuid has null values` forever);
- HA: one row per device and instant (r1's hole filled by r0), merged copies counted as
  `ha_duplicate`, nothing else dropped;
- renames: GPU-h0 keeps node and holder across 12:00 on day 2 (no break, no double row);
  GPU-h1 stays unallocated (the exporter's own pod is not billed);
- a window without any DCGM series: `gpuledger collect` prints one line naming the URL, the
  window and the metrics looked for, exits 1, and loads nothing;
Cases (through the parser, no engine):
- HA copies merged (one replica's gap filled by the other); two series that differ only in a
  label we do not read (two scrape jobs), with no replica label, stay `duplicate_series`;
- a `pod` → `exported_pod` rename inside one chunk keeps the holder on both sides.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gpuledger.cli import main
from gpuledger.collect_pipeline import collect_window, resume_point
from gpuledger.collectors.chunks import Chunk
from gpuledger.collectors.dcgm import build_gpu_samples, fetch_labels
from gpuledger.collectors.prom_parse import parse_matrix
from gpuledger.collectors.quality import Quality
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse
from tests.collectors.conftest import tiny_settings
from tools.metrics_servers import ServerPool

T0 = datetime(2026, 3, 1, tzinfo=UTC)
STEP = 300
PER_DAY = 86_400 // STEP
DAYS = 3
RENAME = T0 + timedelta(days=2, hours=12)
R1_HOLE = (T0 + timedelta(hours=2), T0 + timedelta(hours=4))
WINDOW = Window(T0, T0 + timedelta(days=DAYS), timedelta(seconds=STEP))
METRIC = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
EXPORTER = {"pod": "dcgm-exporter-1", "namespace": "gpu-operator", "container": "exporter"}


def _labels(gpu: str, at: datetime, replica: str) -> dict[str, str]:
    base = {"gpu": gpu[-1], "UUID": gpu, "modelName": "NVIDIA H100 80GB HBM3"}
    workload = {"namespace": "team-a", "pod": "pod-a", "container": "main"} if gpu == "GPU-h0" else {}
    if at < RENAME:
        out = {**base, "Hostname": "node-h", **workload}
    else:
        out = {**base, "hostname": "node-h", **EXPORTER, **{f"exported_{k}": v for k, v in workload.items()}}
    return {**out, "prometheus_replica": replica}


def _present(gpu: str, at: datetime, replica: str) -> bool:
    if T0 + timedelta(days=1) <= at < T0 + timedelta(days=2):
        return False  # the outage
    return not (gpu == "GPU-h0" and replica == "r1" and R1_HOLE[0] <= at < R1_HOLE[1])


def _instants() -> list[datetime]:
    return [T0 + timedelta(seconds=STEP * i) for i in range(DAYS * PER_DAY)]


def _write(path: Path) -> Path:
    series: dict[str, list[str]] = {}
    for gpu in ("GPU-h0", "GPU-h1"):
        for replica in ("r0", "r1"):
            for at in _instants():
                if _present(gpu, at, replica):
                    text = "{" + ",".join(f'{k}="{v}"' for k, v in _labels(gpu, at, replica).items()) + "}"
                    series.setdefault(text, []).append(f"{METRIC}{text} 0.25 {int(at.timestamp())}")
    lines = [f"# TYPE {METRIC} gauge", *(x for group in series.values() for x in group),
             "# TYPE kube_namespace_labels gauge",
             *(f'kube_namespace_labels{{namespace="team-a"}} 1 {int(at.timestamp())}' for at in _instants())]
    path.write_text("\n".join([*lines, "# EOF"]) + "\n")
    return path


@pytest.fixture(scope="module")
def prom_url(metrics_servers: ServerPool, tmp_path_factory: pytest.TempPathFactory) -> str:
    return metrics_servers.prometheus(_write(tmp_path_factory.mktemp("gaps") / "g.om")).url


def _settings() -> object:
    return tiny_settings(chunk="1d", step=f"{STEP}s")


@pytest.mark.prometheus
def test_day_long_hole_is_a_gap_and_collection_goes_on(prom_url: str, tmp_path: Path) -> None:
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        report = collect_window(wh, _settings(), prom_url, WINDOW,  # type: ignore[arg-type]
                                now=lambda: WINDOW.end + timedelta(hours=1))
        assert report.quality is not None
        assert report.quality.gaps == [(T0 + timedelta(days=1), T0 + timedelta(days=2))]
        assert any("gaps: 1 chunk(s)" in line for line in report.lines())
        assert resume_point(wh) == WINDOW.end
        per_day = wh.query("SELECT epoch(ts - ?::TIMESTAMPTZ)::BIGINT // 86400 AS day, count(*) AS n "
                           "FROM gpu_samples GROUP BY day ORDER BY day", [T0]).rows()
        assert per_day == [(0, 2 * PER_DAY), (2, 2 * PER_DAY)]
        again = collect_window(wh, _settings(), prom_url, WINDOW,  # type: ignore[arg-type]
                               now=lambda: WINDOW.end + timedelta(hours=1))
        assert again.up_to_date


@pytest.mark.prometheus
def test_ha_replicas_merged_and_renames_continue(prom_url: str, tmp_path: Path) -> None:
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        report = collect_window(wh, _settings(), prom_url, WINDOW,  # type: ignore[arg-type]
                                now=lambda: WINDOW.end + timedelta(hours=1))
        # Truth: each replica pair answered both at every instant outside the outage, except
        # r1's hole on GPU-h0; a merged copy is one sample per instant both answered.
        both = sum(1 for gpu in ("GPU-h0", "GPU-h1") for at in _instants()
                   if _present(gpu, at, "r0") and _present(gpu, at, "r1"))
        assert report.quality is not None
        assert report.quality.by_reason() == {"ha_duplicate": both}
        assert report.quality.merged_duplicates == both
        rows = wh.query("SELECT uuid, node, namespace, pod, container, count(*) AS n, count(DISTINCT ts) AS t "
                        "FROM gpu_samples GROUP BY ALL ORDER BY uuid").rows()
        assert rows == [("GPU-h0", "node-h", "team-a", "pod-a", "main", 2 * PER_DAY, 2 * PER_DAY),
                        ("GPU-h1", "node-h", None, None, None, 2 * PER_DAY, 2 * PER_DAY)]
        assert wh.query("SELECT uuid, node FROM gpus ORDER BY uuid").rows() == [
            ("GPU-h0", "node-h"), ("GPU-h1", "node-h")]


@pytest.mark.prometheus
def test_window_without_dcgm_series_is_one_clear_line(
    prom_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("prometheus:\n  retries: 0\n")
    warehouse = tmp_path / "w.duckdb"
    code = main(["--config", str(config), "--warehouse", str(warehouse), "collect", "--prometheus", prom_url,
                 "--start", "2026-01-01T00:00:00Z", "--end", "2026-01-02T00:00:00Z"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert len(err) == 1, err
    line = err[0]
    assert line.startswith("gpuledger: error: no DCGM series at " + prom_url)
    assert "2026-01-01T00:00:00+00:00" in line and "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in line
    assert "DCGM_FI_DEV_GPU_UTIL" in line and "is dcgm-exporter scraped by this Prometheus?" in line
    with Warehouse.open(warehouse) as wh:
        assert wh.query("SELECT count(*) FROM gpu_samples").item() == 0
        assert resume_point(wh) is None


# Through the parser --------------------------------------------------------------------------
CHUNK = Chunk(Window(T0, T0 + timedelta(minutes=10), timedelta(minutes=1)))


def _body(series: list[tuple[dict[str, str], list[int]]]) -> bytes:
    """A Prometheus matrix answer: per series its labels and the minutes it has a sample at."""
    result = [{"metric": labels, "values": [[(T0 + timedelta(minutes=m)).timestamp(), "0.5"] for m in minutes]}
              for labels, minutes in series]
    return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}}).encode()


def _build(series: list[tuple[dict[str, str], list[int]]]) -> tuple[list[tuple[object, ...]], Quality]:
    quality = Quality()
    matrix = parse_matrix(_body(series), fetch_labels(), "test")
    build = build_gpu_samples({"gr_engine_active": matrix}, CHUNK, T0 + timedelta(hours=1), "auto", quality)
    return build.samples.select("ts", "uuid", "node", "namespace", "pod").sort("ts").rows(), quality


def test_parser_merges_ha_copies_only() -> None:
    dev = {"UUID": "GPU-x", "gpu": "0", "modelName": "NVIDIA H100 80GB HBM3", "Hostname": "n1", "pod": "p",
           "namespace": "ns"}
    rows, quality = _build([({**dev, "replica": "A"}, [0, 1, 2, 3, 4]), ({**dev, "replica": "B"}, [3, 4, 5, 6]),
                            ({**dev, "job": "other"}, [8])])
    assert [r[0] for r in rows] == [T0 + timedelta(minutes=m) for m in (0, 1, 2, 3, 4, 5, 6, 8)]
    assert quality.by_reason() == {"ha_duplicate": 2}
    # A series without the replica label, next to labelled copies, is one more copy.
    rows, quality = _build([({**dev, "replica": "A"}, [0, 1]), (dev, [1, 2])])
    assert quality.by_reason() == {"ha_duplicate": 1} and len(rows) == 3
    rows, quality = _build([(dev, [0, 1]), ({**dev, "job": "x"}, [1, 2])])
    assert quality.by_reason() == {"duplicate_series": 1} and len(rows) == 3


def test_parser_rename_to_exported_keeps_the_holder() -> None:
    base = {"UUID": "GPU-x", "gpu": "0", "modelName": "NVIDIA H100 80GB HBM3"}
    before = {**base, "Hostname": "n1", "pod": "p", "namespace": "ns", "container": "main"}
    after = {**base, "hostname": "n1", **EXPORTER, "exported_pod": "p", "exported_namespace": "ns",
             "exported_container": "main"}
    idle_after = {**base, "UUID": "GPU-y", "gpu": "1", "hostname": "n1", **EXPORTER}
    rows, quality = _build([(before, [0, 1, 2, 3, 4]), (after, [5, 6, 7, 8, 9]), (idle_after, [5, 6])])
    held = [r for r in rows if r[1] == "GPU-x"]
    assert [r[0] for r in held] == [T0 + timedelta(minutes=m) for m in range(10)]
    assert {r[2:] for r in held} == {("n1", "ns", "p")}
    assert {r[2:] for r in rows if r[1] == "GPU-y"} == {("n1", None, None)}
    assert quality.total == 0
