"""Pure parts of the Prometheus collector.

Cases:
- chunks are aligned to the step, hold at most `max_points` points, are contiguous and
  end-exclusive (the union covers the window once; no instant is in two chunks);
- daily chunks start at UTC midnight;
- PromQL selectors escape node names; shards respect the sample budget and add a shard for
  series without a node label;
- a Prometheus matrix parses into series + samples, empty labels become NULL, "NaN" stays NaN;
- the fast byte-level reader and the JSON fallback give the same frames (odd label values too);
- an error answer raises SourceError with Prometheus' message;
- screening counts NaN, negative, out-of-range and clock-skewed samples;
- team resolution: label, KSM-sanitized label, fallback rules, none; kube-state-metrics'
  label names (sanitize, then snake case: a team key `teamName` is `label_team_name`), and
  keys that collide in KSM (`_conflictN`): their value is taken only when they agree, since
  which suffix is ours depends on keys the reader never sees;
- KSM resource names are restored (`nvidia_com_mig_3g_40gb` → `nvidia.com/mig-3g.40gb`);
- counter_increase survives resets.
"""

from __future__ import annotations

import itertools
import json
import math
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from gpuledger.collectors.chunks import plan_chunks
from gpuledger.collectors.ksm import resource_name
from gpuledger.collectors.prom_parse import _split_matrix, parse_matrix
from gpuledger.collectors.promql import Shard, make_shards, quote, regex_any
from gpuledger.collectors.screen import screen
from gpuledger.collectors.vllm import counter_increase
from gpuledger.core.config import FallbackRule, TeamSettings
from gpuledger.core.errors import SourceError
from gpuledger.core.teams import ksm_label, resolve_team
from gpuledger.core.window import Window

T = datetime(2026, 3, 1, tzinfo=UTC)


def test_chunks_cover_window_once_and_respect_point_limit() -> None:
    step = timedelta(seconds=60)
    window = Window(T + timedelta(seconds=30), T + timedelta(days=9, seconds=10), step)
    chunks = list(plan_chunks(window, timedelta(days=30), max_points=11_000))
    assert chunks[0].start == T  # floored to the step
    assert chunks[-1].end == T + timedelta(days=9, minutes=1)  # ceiled to the step
    instants: list[datetime] = []
    for a, b in itertools.pairwise(chunks):
        assert a.end == b.start
    for c in chunks:
        assert c.points <= 11_000
        assert (c.start - T) % step == timedelta(0)
        assert c.last_point == c.end - step
        instants += [c.start + i * step for i in range(c.points)]
    assert len(instants) == len(set(instants)) == 9 * 1440 + 1


def test_daily_chunks_start_at_midnight() -> None:
    window = Window(T + timedelta(hours=5), T + timedelta(days=2, hours=1), timedelta(seconds=60))
    starts = [c.start for c in plan_chunks(window, timedelta(days=1))]
    assert starts == [T + timedelta(hours=5), T + timedelta(days=1), T + timedelta(days=2)]


def test_selectors_escape_and_shards_fit_budget() -> None:
    assert quote('a"b\\c') == '"a\\"b\\\\c"'
    assert regex_any(["n.1", "n-2"]) == "n\\-2|n\\.1"
    shards = make_shards({"Hostname": [f"n{i}" for i in range(10)], "hostname": ["x"]},
                         series_per_node=8, points=1000, max_samples=30_000)
    named = [s for s in shards if s.label]
    assert all(len(s.nodes) * 8 * 1000 <= 30_000 for s in named)
    assert sorted(n for s in named if s.label == "Hostname" for n in s.nodes) == sorted(f"n{i}" for i in range(10))
    assert shards[-1] == Shard(None)
    assert shards[-1].matcher() == 'Hostname="",hostname=""'


def test_matrix_parses_into_series_and_samples() -> None:
    body = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"UUID": "GPU-1", "pod": "", "other": "x"}, "values": [[1772323200, "0.5"], [1772323260, "NaN"]]},
        {"metric": {"UUID": "GPU-2", "pod": "p"}, "values": [[1772323200.5, "+Inf"]]},
    ]}}).encode()
    m = parse_matrix(body, ["UUID", "pod"], "q")
    assert m.series.rows() == [(0, "GPU-1", None), (1, "GPU-2", "p")]
    assert m.samples["sid"].to_list() == [0, 0, 1]
    assert m.samples["ts"].to_list()[0] == T
    assert m.samples["ts"].to_list()[2] == T + timedelta(milliseconds=500)
    values = m.samples["value"].to_list()
    assert values[0] == 0.5 and math.isnan(values[1]) and values[2] == math.inf


def test_fast_and_fallback_readers_agree() -> None:
    result = [
        {"metric": {"UUID": "GPU-1", "pod": "", "odd": 'x},"values":'}, "values": [[1772323200, "0.5"], [1772323260, "NaN"]]},
        {"metric": {}, "values": []},
        {"metric": {"UUID": "GPU-2", "pod": "p"}, "values": [[1772323200.5, "+Inf"], [1772323201, "-1e-05"]]},
    ]
    compact = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}},
                         separators=(",", ":")).encode()
    fast = _split_matrix(compact, ["UUID", "pod"])
    assert fast is not None  # the compact shape engines write takes the fast path
    spaced = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}}).encode()
    assert _split_matrix(spaced, ["UUID", "pod"]) is None  # any other shape falls back
    slow = parse_matrix(spaced, ["UUID", "pod"], "q")
    assert fast.series.equals(slow.series)
    assert fast.samples.select("sid", "ts").equals(slow.samples.select("sid", "ts"))
    assert fast.samples["value"].to_list()[2:] == [math.inf, -1e-05]
    assert fast.series["pod"].to_list() == [None, None, "p"]


def test_error_answer_names_the_problem() -> None:
    with pytest.raises(SourceError, match="parse error at char 3"):
        parse_matrix(b'{"status":"error","errorType":"bad_data","error":"parse error at char 3"}',
                     ["UUID"], "query 'x{'")


def test_screen_counts_each_reason() -> None:
    chunk = next(plan_chunks(Window(T, T + timedelta(minutes=10)), timedelta(hours=1)))
    ts = [T, T + timedelta(minutes=1), T + timedelta(minutes=2), T + timedelta(minutes=3),
          T + timedelta(minutes=3, seconds=7), T + timedelta(minutes=10), T + timedelta(minutes=4)]
    frame = pl.DataFrame({"field": ["r"] * 7, "ts": ts, "value": [0.5, math.nan, -1.0, 2.0, 0.1, 0.1, 0.9]},
                         schema_overrides={"ts": pl.Datetime("us", "UTC")})
    kept, counts = screen(frame, chunk, T + timedelta(days=1), {"r": (0.0, 1.0)})
    got = dict(zip(counts["reason"], counts["n"], strict=True))
    assert got == {"nan": 1, "negative": 1, "out_of_range": 1, "clock_skew": 2}
    assert kept.height == 5
    assert kept["value"].to_list() == [0.5, None, None, None, 0.9]
    # a sample later than the collector's clock (+ tolerance) is skewed too
    _, future = screen(frame.head(1), chunk, T - timedelta(hours=1), {"r": (0.0, 1.0)})
    assert future["reason"].to_list() == ["clock_skew"]


def test_team_resolution() -> None:
    teams = TeamSettings(label_key="example.com/team",
                         fallback=(FallbackRule(namespace_regex="ml-(.*)", team=r"ml-\1"),))
    assert ksm_label("example.com/team") == "label_example_com_team"
    assert resolve_team("x", {"example.com/team": "alpha"}, teams) == "alpha"
    assert resolve_team("x", {"example_com_team": "beta"}, teams) == "beta"
    assert resolve_team("ml-vision", {}, teams) == "ml-vision"
    assert resolve_team("other", {"team": "ignored"}, teams) is None


def test_team_key_as_kube_state_metrics_names_it() -> None:
    from gpuledger.collectors.ksm import namespaces_from_vector

    # kube-state-metrics internal/store/utils.go: labelName = toSnakeCase(SanitizeLabelName(k)),
    # toSnakeCase puts `_` between [a-z0-9] and [A-Z], then lower-cases.
    expected = {"teamName": "label_team_name", "team": "label_team",
                "example.com/costCenter": "label_example_com_cost_center",
                "HTTPServer": "label_httpserver", "a1B2C": "label_a1_b2_c",
                "kueue.x-k8s.io/queue-name": "label_kueue_x_k8s_io_queue_name"}
    assert {k: ksm_label(k) for k in expected} == expected
    teams = TeamSettings(label_key="teamName")
    series = [{"metric": {"namespace": "ml-a", "label_team_name": "alpha"}},
              {"metric": {"namespace": "ml-b", "label_team_name_conflict1": "beta",
                          "label_team_name_conflict2": "beta"}},
              {"metric": {"namespace": "ml-c", "label_team_name_conflict1": "gamma",
                          "label_team_name_conflict2": "delta"}}]
    rows = namespaces_from_vector(series, teams, T)
    assert dict(zip(rows["namespace"].to_list(), rows["team"].to_list(), strict=True)) == {
        "ml-a": "alpha", "ml-b": "beta", "ml-c": None}
    assert resolve_team("x", {"teamName": "raw"}, teams) == "raw"  # the API's raw key first


def test_ksm_resource_names() -> None:
    assert resource_name("nvidia_com_gpu") == "nvidia.com/gpu"
    assert resource_name("nvidia_com_mig_3g_40gb") == "nvidia.com/mig-3g.40gb"
    assert resource_name("nvidia_com_mig_1g_10gb_me") == "nvidia.com/mig-1g.10gb+me"
    assert resource_name("nvidia_com_gpumem") == "nvidia.com/gpumem"


def test_counter_increase_survives_resets() -> None:
    assert counter_increase([0, 10, 20, 5, 15, None, 25]) == 20 + 5 + 10 + 10
    assert counter_increase([]) == 0
