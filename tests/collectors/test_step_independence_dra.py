"""The DRA claim history rebuilt from Prometheus does not depend on `prometheus.step` (issue 31
item 8, decision 0212).

kube-state-metrics' claim families as the DRA conformance fixture writes them
(tests/fixtures/planes/dra/kube-state-metrics.prom, citing kube-state-metrics' resourceclaim
collector): `kube_resourceclaim_allocation_device_info` and
`kube_resourceclaim_status_reserved_for`, replayed into a real Prometheus (promtool backfill)
every 60 s, or every 30 s, for 4 hours, each claim's series only while it is allocated:
`shared-gpu` (reserved by `nlp-a-0` and `nlp-b-0`) from minute 30 to minute 150, the MIG claim
of `infer-…` (reserved by its pod) for the whole 4 hours, `warm-pool-3g` (no pod) from minute
200 to the end. The fixture's dcgm series without `dra_*` labels are exported throughout (the
cards; a collect needs DCGM series). Collected Prometheus-only in 1 h chunks at steps 15 s,
30 s, 60 s and 120 s:
- every rebuilt claim's `dra_claims` spans and every reservation's `dra_reservations` spans
  cover exactly its life (the first scrape to the last plus the scrape interval), the
  chunk-cut ones touching, at every step;
- the bill is the same at every step, to the cent.

Before (KSM's families read on the grid, a span ending one step after its last instant) a
15 s step ended every span 45 s early and a 120 s step up to 60 s late.
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
from tests.collectors.test_hami_conformance import LINE
from tools.metrics_servers import ServerPool

pytestmark = pytest.mark.prometheus

FIXTURES = Path(__file__).parents[1] / "fixtures" / "planes" / "dra"
T0 = datetime(2026, 6, 1, tzinfo=UTC)
MINUTES = 240
END = T0 + timedelta(minutes=MINUTES)
MIG_CLAIM = "infer-6d8f7c9b5-k4t2w-mig-x7k2p"
LIVES = {"shared-gpu": (30, 150), MIG_CLAIM: (0, MINUTES), "warm-pool-3g": (200, MINUTES)}
"""claim -> [first minute, end minute) it is allocated."""
RESERVED = {("shared-gpu", "nlp-a-0"), ("shared-gpu", "nlp-b-0"), (MIG_CLAIM, "infer-6d8f7c9b5-k4t2w")}
FAMILIES = ("kube_resourceclaim_allocation_device_info", "kube_resourceclaim_status_reserved_for",
            "kube_namespace_labels")
STEPS = ("15s", "30s", "60s", "120s")


def _openmetrics(path: Path, scrape_s: int) -> Path:
    by_metric: dict[str, list[str]] = {}
    t0 = int(T0.timestamp())
    for name in ("kube-state-metrics.prom", "dcgm-exporter.prom"):
        for raw in (FIXTURES / name).read_text().splitlines():
            if not raw or raw.startswith("#"):
                continue
            match = LINE.match(raw)
            assert match, raw
            metric, labels, value = match.groups()
            if metric.startswith("DCGM_FI_"):
                if "dra_claim_name" in labels:
                    continue
                first, end = 0, MINUTES
            elif metric in FAMILIES:
                claim = next((c for c in LIVES if f'resourceclaim="{c}"' in labels), None)
                first, end = LIVES[claim] if claim else (0, MINUTES)
            else:
                continue
            by_metric.setdefault(metric, []).extend(
                f"{metric}{labels} {value} {t0 + s}" for s in range(first * 60, end * 60, scrape_s))
    return write_gauges(path, by_metric)


def _collect(url: str, tmp_path: Path, step: str) -> tuple[dict[str, list[tuple]], dict[str, float]]:
    settings = tiny_settings(chunk="1h", step=step, read_path="query_range")
    window = Window(T0, END, timedelta(seconds=int(step.removesuffix("s"))))
    with Warehouse.open(tmp_path / f"w-{step}.duckdb") as wh:
        collect_window(wh, settings, url, window, now=lambda: END + timedelta(hours=1))
        claims = wh.query("SELECT claim, start_ts, end_ts FROM dra_claims WHERE source = 'prometheus' "
                          "ORDER BY claim, start_ts").rows()
        reserved = wh.query("SELECT claim_uid, pod, start_ts, end_ts FROM dra_reservations "
                            "ORDER BY claim_uid, pod, start_ts").rows()
        bill = compute_bill(wh, Window(T0, END), settings, ("team",))
    spans: dict[str, list[tuple]] = {}
    for claim, start, end in claims:
        spans.setdefault(claim, []).append((start, end))
    for uid, pod, start, end in reserved:
        spans.setdefault(f"{uid.rsplit('/', 1)[1]}|{pod}", []).append((start, end))
    costs = {row["team"]: round(row["cost"], 2) for row in bill.lines.to_dicts()}
    return spans, costs


@pytest.mark.parametrize("scrape_s", [60, 30])
def test_dra_history_is_the_same_at_every_step(metrics_servers: ServerPool, tmp_path: Path, scrape_s: int) -> None:
    url = metrics_servers.prometheus(_openmetrics(tmp_path / f"s{scrape_s}.om", scrape_s)).url
    got = {step: _collect(url, tmp_path, step) for step in STEPS}
    lives = {**{claim: life for claim, life in LIVES.items()},
             **{f"{claim}|{pod}": LIVES[claim] for claim, pod in RESERVED}}
    for step, (spans, costs) in got.items():
        assert set(spans) == set(lives), (step, sorted(spans))
        for key, (first, end) in lives.items():
            runs = spans[key]
            assert runs[0][0] == T0 + timedelta(minutes=first), (scrape_s, step, key, runs)
            assert runs[-1][1] == T0 + timedelta(minutes=end), (scrape_s, step, key, runs)
            assert all(a[1] == b[0] for a, b in pairwise(runs)), (step, key, runs)
        assert costs == got["60s"][1], (scrape_s, step, costs)
