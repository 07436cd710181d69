"""Every read lands in exactly one place (stored, or one reason), and HA copies of every series
kind (DCGM, vLLM tokens, Kueue queues) are merged and counted `ha_duplicate`.

The expected counts are worked out by hand from the series written in each case (comments
beside them), never from the collector's code. Reads = stored (non-NULL) values + counted.

Cases (through the parser, hand-built matrix answers, one-minute chunk of ten instants):
- DCGM, two series on one device (`duplicate_series`) carrying NaN and negative values: a bad
  copy dropped as a duplicate is counted once, by its value's reason, never also as a
  duplicate (the field run's `fb_used_mib` had one read counted twice);
- DCGM, HA copies whose values are NaN or negative: the copy is `ha_duplicate` only; and
  HA copies of two duplicate series: each read counted once;
- vLLM token counters answered by two replicas (`replica`, one with a gap; and
  `prometheus_replica`): one row per (pod, model, instant), the counter not doubled, the
  copies `ha_duplicate` (not `duplicate_series`); two series without a replica label stay
  `duplicate_series`;
- Kueue usage, quota and pending workloads answered by two replicas: one row per queue key
  and instant, pending workloads not doubled, copies `ha_duplicate`.
Cases (real Prometheus, promtool backfill, `collect_window`):
- a Kueue and vLLM fleet written twice (`replica="a"`, `"b"`): pending workloads per queue are
  3 (not 6, as `sum by (cluster_queue)` across replicas gave), usage 2, tokens as written,
  and the token and queue copies are counted `ha_duplicate`, none `duplicate_series`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from gpuledger.collect_pipeline import collect_window
from gpuledger.collectors import kueue_metrics, vllm
from gpuledger.collectors.chunks import Chunk
from gpuledger.collectors.dcgm import build_gpu_samples, fetch_labels
from gpuledger.collectors.prom_parse import Matrix, parse_matrix
from gpuledger.collectors.quality import Quality
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse
from tests.collectors.conftest import tiny_settings
from tools.metrics_servers import ServerPool

T0 = datetime(2026, 3, 1, tzinfo=UTC)
CHUNK = Chunk(Window(T0, T0 + timedelta(minutes=10), timedelta(minutes=1)))
NOW = T0 + timedelta(hours=1)
DEV = {"UUID": "GPU-x", "gpu": "0", "modelName": "NVIDIA H100 80GB HBM3", "Hostname": "n1",
       "namespace": "ns", "pod": "p1"}
Series = list[tuple[dict[str, str], list[tuple[int, str]]]]


def _body(series: Series) -> bytes:
    """A Prometheus matrix answer: per series its labels and its (minute, value text) samples."""
    result = [{"metric": labels, "values": [[(T0 + timedelta(minutes=m)).timestamp(), v] for m, v in values]}
              for labels, values in series]
    return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}}).encode()


def _reads(series: Series) -> int:
    return sum(len(values) for _, values in series)


def _gpu(series: Series) -> tuple[pl.DataFrame, Quality]:
    quality = Quality()
    matrix = parse_matrix(_body(series), fetch_labels(), "test")
    build = build_gpu_samples({"gr_engine_active": matrix}, CHUNK, NOW, "auto", quality)
    return build.samples, quality


def _stored(frame: pl.DataFrame, column: str) -> int:
    return int(frame[column].is_not_null().sum())


# DCGM ----------------------------------------------------------------------------------------
def test_bad_duplicate_series_copy_counted_once() -> None:
    series: Series = [
        ({**DEV, "job": "a"}, [(0, "NaN"), (1, "-1"), (2, "0.5"), (3, "0.5")]),
        ({**DEV, "pod": "p2"}, [(0, "NaN"), (1, "0.4"), (2, "NaN"), (3, "0.6")]),
    ]
    rows, quality = _gpu(series)
    # Kept (lowest series id, both attributed): p1 at every minute. Minute 0: both NaN (nan 2);
    # 1: p1 negative, p2 good dropped (duplicate 1); 2: p1 stored, p2's NaN dropped (nan 1);
    # 3: p1 stored, p2 dropped (duplicate 1).
    assert quality.by_reason() == {"nan": 3, "negative": 1, "duplicate_series": 2}
    assert _stored(rows, "gr_engine_active") == 2
    assert rows.height == 4 and set(rows["pod"]) == {"p1"}
    assert _reads(series) == 2 + quality.total


def test_bad_ha_copy_counted_once() -> None:
    series: Series = [
        ({**DEV, "replica": "A"}, [(0, "NaN"), (1, "NaN"), (2, "0.5")]),
        ({**DEV, "replica": "B"}, [(0, "NaN"), (1, "0.5"), (3, "-2")]),
    ]
    rows, quality = _gpu(series)
    # Minutes 0 and 1 answered by both: A's kept (NaN, NaN), B's copies ha_duplicate; 2: A 0.5;
    # 3: only B, negative.
    assert quality.by_reason() == {"ha_duplicate": 2, "nan": 2, "negative": 1}
    assert _stored(rows, "gr_engine_active") == 1 and rows.height == 4
    assert _reads(series) == 1 + quality.total
    # HA copies of a second series on the same device (pod p2): its copies are ha_duplicate
    # (2); then at minute 0 its NaN loses to p1 (nan, not also duplicate), at 2 its 0.7 does
    # (duplicate 1).
    series += [({**DEV, "pod": "p2", "replica": r}, [(0, "NaN"), (2, "0.7")]) for r in ("A", "B")]
    rows, quality = _gpu(series)
    assert quality.by_reason() == {"ha_duplicate": 4, "nan": 3, "negative": 1, "duplicate_series": 1}
    assert _stored(rows, "gr_engine_active") == 1 and set(rows["pod"]) == {"p1"}
    assert _reads(series) == 1 + quality.total


# vLLM ----------------------------------------------------------------------------------------
TOKENS = {"namespace": "team-b", "pod": "serve-1", "model_name": "llama"}


def _tokens(series: Series) -> tuple[pl.DataFrame, Quality]:
    quality = Quality()
    matrix = parse_matrix(_body(series), vllm.LABELS, "test")
    frame = vllm.build_token_samples({"prompt_tokens_total": matrix}, CHUNK, NOW, quality)
    return frame.sort("ts"), quality


@pytest.mark.parametrize("label", ["replica", "prometheus_replica"])
def test_token_replicas_merged(label: str) -> None:
    a = [(m, str(10 * (m + 1))) for m in (0, 1, 2, 3, 4)] + [(6, "NaN")]
    b = [(m, str(10 * (m + 1))) for m in (0, 1, 3, 4, 5)] + [(6, "NaN")]  # b misses minute 2
    series: Series = [({**TOKENS, label: "a"}, a), ({**TOKENS, label: "b"}, b)]
    frame, quality = _tokens(series)
    assert frame["ts"].to_list() == [T0 + timedelta(minutes=m) for m in range(7)]
    assert frame["prompt_tokens_total"].to_list() == [10.0, 20.0, 30.0, 40.0, 50.0, 60.0, None]
    assert vllm.counter_increase(frame["prompt_tokens_total"].to_list()) == 50.0
    # Both answered minutes 0, 1, 3, 4 and 6: five copies; minute 6 is NaN once.
    assert quality.by_reason() == {"ha_duplicate": 5, "nan": 1}
    assert _reads(series) == _stored(frame, "prompt_tokens_total") + quality.total


def test_token_series_without_replica_label_stay_duplicates() -> None:
    series: Series = [(TOKENS, [(0, "10"), (1, "20")]),
                      ({**TOKENS, "exported_pod": "serve-1", "pod": "vllm-exporter"}, [(1, "20")])]
    frame, quality = _tokens(series)
    assert frame.height == 2
    assert quality.by_reason() == {"duplicate_series": 1}


# Kueue ---------------------------------------------------------------------------------------
KEY = {"cluster_queue": "cq-a", "flavor": "h100", "resource": "nvidia.com/gpu"}


def _queues(fields: dict[str, Series]) -> tuple[pl.DataFrame, Quality]:
    quality = Quality()
    matrices: dict[str, Matrix] = {
        name: parse_matrix(_body(series), kueue_metrics.LABELS, name) for name, series in fields.items()}
    return kueue_metrics.build_queue_samples(matrices, CHUNK, NOW, quality), quality


def test_queue_replicas_merged() -> None:
    minutes_a, minutes_b = [0, 1, 2, 3], [0, 2, 3, 4]
    fields: dict[str, Series] = {
        "usage": [({**KEY, "replica": r}, [(m, "2") for m in ms]) for r, ms in (("a", minutes_a), ("b", minutes_b))],
        "nominal_quota": [({**KEY, "replica": r}, [(m, "4") for m in ms])
                          for r, ms in (("a", minutes_a), ("b", minutes_b))],
        # What the engine answers to `sum by (cluster_queue, replica, ...)`: one per replica.
        "pending_workloads": [({"cluster_queue": "cq-a", "replica": r}, [(m, "3") for m in ms])
                              for r, ms in (("a", minutes_a), ("b", minutes_b))],
    }
    frame, quality = _queues(fields)
    assert frame.select("ts", "cluster_queue", "flavor", "resource").is_duplicated().sum() == 0
    assert frame["ts"].to_list() == [T0 + timedelta(minutes=m) for m in range(5)]
    assert set(frame["usage"]) == {2.0} and set(frame["nominal_quota"]) == {4.0}
    assert set(frame["pending_workloads"]) == {3.0}
    # Minutes 0, 2, 3 answered by both replicas, in each of three fields.
    assert quality.counts == {("queue_samples", f, "ha_duplicate"): 3 for f in fields}
    assert "replica" in kueue_metrics.queries(timedelta(minutes=1))["pending_workloads"]


# Through a real Prometheus -------------------------------------------------------------------
MINUTES = 20
REPLICAS = ("a", "b")


def _om_lines() -> Iterator[str]:
    """Each family's series, each written once per replica, one sample a minute."""
    families: list[tuple[str, str, list[str]]] = [
        ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge",
         ['DCGM_FI_PROF_GR_ENGINE_ACTIVE{{gpu="0",UUID="GPU-x",modelName="NVIDIA H100 80GB HBM3",'
          'Hostname="n1",replica="{r}"}} 0.5 {t}']),
        ("vllm:prompt_tokens", "counter",
         ['vllm:prompt_tokens_total{{namespace="team-b",pod="serve-1",model_name="llama",replica="{r}"}} {v} {t}']),
        ("kueue_cluster_queue_resource_usage", "gauge",
         ['kueue_cluster_queue_resource_usage{{cluster_queue="cq-a",flavor="h100",'
          'resource="nvidia.com/gpu",replica="{r}"}} 2 {t}']),
        ("kueue_pending_workloads", "gauge",
         ['kueue_pending_workloads{{cluster_queue="cq-a",status="active",replica="{r}"}} 2 {t}',
          'kueue_pending_workloads{{cluster_queue="cq-a",status="inadmissible",replica="{r}"}} 1 {t}']),
    ]
    start = int(T0.timestamp())
    for name, kind, templates in families:
        yield f"# TYPE {name} {kind}"
        for template in templates:
            for r in REPLICAS:
                yield from (template.format(r=r, v=10 * m, t=start + 60 * m) for m in range(MINUTES))


@pytest.mark.prometheus
def test_engine_counts_queue_and_token_copies_once(metrics_servers: ServerPool, tmp_path: Path) -> None:
    path = tmp_path / "ha.om"
    path.write_text("\n".join([*_om_lines(), "# EOF"]) + "\n")
    server = metrics_servers.prometheus(path)
    window = Window(T0, T0 + timedelta(minutes=MINUTES))
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        report = collect_window(wh, tiny_settings(chunk="1h"), server.url, window,
                                now=lambda: window.end + timedelta(minutes=5))
        queues = wh.query("SELECT ts, usage, pending_workloads FROM queue_samples ORDER BY ts")
        tokens = wh.query("SELECT ts, prompt_tokens_total FROM token_samples ORDER BY ts")
    assert queues.height == tokens.height == MINUTES
    assert set(queues["usage"]) == {2.0} and set(queues["pending_workloads"]) == {3.0}
    assert tokens["prompt_tokens_total"].to_list() == [10.0 * m for m in range(MINUTES)]
    assert report.quality is not None
    by_table: dict[tuple[str, str], int] = {}
    for (table, _, reason), n in report.quality.counts.items():
        by_table[(table, reason)] = by_table.get((table, reason), 0) + n
    # One copy per instant of: usage, pending workloads (token: prompt only).
    assert by_table == {("gpu_samples", "ha_duplicate"): MINUTES, ("token_samples", "ha_duplicate"): MINUTES,
                        ("queue_samples", "ha_duplicate"): 2 * MINUTES}
