"""HAMi's allocation spans do not depend on `prometheus.step` (issue 31 item 8, decision 0212).

The HAMi conformance node (tests/fixtures/planes/hami/, each file citing its upstream source:
dcgm-exporter, kube-state-metrics and the HAMi scheduler's `.prom` exports) replayed into a real
Prometheus (promtool backfill) every 60 s, or every 30 s, for 4 hours, with the pods' lives cut
inside it: `llm-a-0` for the whole 4 hours, `nb-b-0` from minute 30 to minute 150, `batch-c-0`
from minute 200 to the end; every series that names a pod (KSM's pod families, HAMi's
`hami_vgpu_*`) is exported only while the pod lives. Collected Prometheus-only (1 h chunks,
so two lives start and one ends inside a chunk) at steps 15 s, 30 s, 60 s and 120 s over the
same scrapes:
- the bill is the same at every step, to the cent, and each team's card-hours are the truth
  computed here: a pod holds max(cores / 100, MiB / card) of its card (SOURCES.md's max basis)
  for its life, the rest of the 2 cards x 4 hours is unallocated;
- each pod's `vgpu_allocations` spans cover exactly its life, the chunk-cut ones touching.

Before (the grid read, runs of instants exactly one step apart, each ending one step after its
last instant) a 15 s step over 60 s scrapes cut every scrape into its own 15 s span and billed
`vision` 0.496875 card-hours instead of 0.5, `nlp` 1.725833 instead of 1.733333.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path

import pytest

from gpuledger.analytics.billing.bill import compute_bill
from gpuledger.collect_pipeline import collect_window
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse
from tests.collectors.conftest import tiny_settings
from tests.collectors.gauges import write_gauges
from tests.collectors.test_hami_conformance import CARD_MIB, LINE, TRUTH, _share
from tools.metrics_servers import ServerPool

pytestmark = pytest.mark.prometheus

FIXTURES = Path(__file__).parents[1] / "fixtures" / "planes" / "hami"
T0 = datetime(2026, 6, 1, tzinfo=UTC)
MINUTES = 240
END = T0 + timedelta(minutes=MINUTES)
LIVES = {"llm-a-0": (0, MINUTES), "nb-b-0": (30, 150), "batch-c-0": (200, MINUTES)}
"""pod -> [first minute, end minute) of its life."""
STEPS = ("15s", "30s", "60s", "120s")


def _pod_of(labels: str) -> str | None:
    return next((pod for pod in LIVES if f'pod="{pod}"' in labels), None)


def _openmetrics(path: Path, scrape_s: int) -> Path:
    """Every fixture sample at every scrape; a sample naming a pod only within its life."""
    by_metric: dict[str, list[str]] = {}
    for name in ("dcgm-exporter.prom", "kube-state-metrics.prom", "hami-scheduler.prom"):
        for raw in (FIXTURES / name).read_text().splitlines():
            if not raw or raw.startswith("#"):
                continue
            match = LINE.match(raw)
            assert match, raw
            metric, labels, value = match.groups()
            pod = _pod_of(labels)
            first, end = LIVES[pod] if pod else (0, MINUTES)
            by_metric.setdefault(metric, []).extend(
                f"{metric}{labels} {value} {int(T0.timestamp()) + s}"
                for s in range(first * 60, end * 60, scrape_s))
    return write_gauges(path, by_metric)


def _collect(url: str, tmp_path: Path, step: str) -> tuple[dict[str, float], dict[str, float], list[tuple]]:
    settings = tiny_settings(chunk="1h", step=step, read_path="query_range")
    window = Window(T0, END, timedelta(seconds=int(step.removesuffix("s"))))
    with Warehouse.open(tmp_path / f"w-{step}.duckdb") as wh:
        collect_window(wh, settings, url, window, now=lambda: END + timedelta(hours=1))
        bill = compute_bill(wh, Window(T0, END), settings, ("team",))
        spans = wh.query("SELECT pod, start_ts, end_ts FROM vgpu_allocations ORDER BY pod, start_ts").rows()
    hours = {row["team"]: round(row["card_hours"], 6) for row in bill.lines.to_dicts() if row["card_hours"]}
    costs = {row["team"]: round(row["cost"], 2) for row in bill.lines.to_dicts()}
    return hours, costs, spans


def _truth_hours() -> dict[str, float]:
    hours = {"nlp": 0.0, "vision": 0.0}
    for pod, (ns, _, mem, cores) in TRUTH.items():
        first, end = LIVES[pod]
        hours[ns.removeprefix("team-")] += _share(mem, cores) * (end - first) / 60
    hours["unallocated"] = 2 * MINUTES / 60 - sum(hours.values())
    return {team: round(value, 6) for team, value in hours.items()}


@pytest.mark.parametrize("scrape_s", [60, 30])
def test_hami_bill_is_the_same_at_every_step(metrics_servers: ServerPool, tmp_path: Path, scrape_s: int) -> None:
    assert CARD_MIB == 81920.0  # the fixture's card, which the shares above are of
    url = metrics_servers.prometheus(_openmetrics(tmp_path / f"s{scrape_s}.om", scrape_s)).url
    got = {step: _collect(url, tmp_path, step) for step in STEPS}
    truth = _truth_hours()
    for step, (hours, costs, spans) in got.items():
        assert hours == truth, (scrape_s, step, hours)
        assert costs == got["60s"][1], (scrape_s, step, costs)
        per_pod: dict[str, list[tuple]] = {}
        for pod, start, end in spans:
            per_pod.setdefault(pod, []).append((start, end))
        for pod, (first, end) in LIVES.items():
            runs = per_pod[pod]
            assert runs[0][0] == T0 + timedelta(minutes=first) and runs[-1][1] == T0 + timedelta(minutes=end), \
                (step, pod, runs)
            assert all(a[1] == b[0] for a, b in pairwise(runs)), (step, pod, runs)
