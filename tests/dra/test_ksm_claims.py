"""The pod-claim join from kube-state-metrics' `kube_pod_resourceclaim_info`, through a real
Prometheus, where the API's join (`status.reservedFor` + the pods' resourceClaimStatuses) was
not collected: the pool's claims and slices are loaded from the simulator's snapshots but its
`dra_reservations` are dropped, and the pods' claim references come only from KSM series (one
per pod and claim, every minute the pod exists), as a Prometheus-only history would give them.

Known answers from the plan (`simulator.dra.CLAIMS`), minute by minute, independent of the
billing code: each claim-minute goes to the pods existing in it, split evenly (the shared claim
`shared-c`: c-serve-0 alone for 0-120 and 240-360, with c-serve-1 for 120-240, so 5 h and 1 h);
the bill per team (card-hours and idle) equals the pool's truth. Control: without the KSM series
no pod holds any claim row (the join is what the series gave).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from gpuledger.analytics.billing.bill import compute_bill
from gpuledger.analytics.devices.dra_rows import claim_rows
from gpuledger.collect_pipeline import collect_window
from gpuledger.collectors.dra import DraObjects, frames_from_history
from gpuledger.simulator.dra import CLAIMS
from gpuledger.simulator.dra_metrics import write_openmetrics
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.store import LoadBatch
from tests.dra.test_bill_e2e import POOL, SETTINGS, TEAMS, WINDOW
from tools.metrics_servers import ServerPool

pytestmark = pytest.mark.prometheus


def _expected_pod_hours() -> dict[str, float]:
    hours: dict[str, float] = defaultdict(float)
    for claim in CLAIMS:
        for minute in range(claim.start, claim.end):
            holders = [p.name for p in claim.pods if p.start <= minute < p.end]
            for pod in holders:
                hours[pod] += 1 / len(holders) / 60
    return dict(hours)


def _warehouse(root: Path, servers: ServerPool, *, ksm: bool) -> Warehouse:
    om = root / "dra.om"
    write_openmetrics([POOL], om, ksm=ksm)
    frames = frames_from_history((at, DraObjects(**objs)) for at, objs in POOL.snapshots())
    del frames["dra_reservations"]  # the API's join is not available
    namespaces = pl.DataFrame([{"namespace": n, "team": t, "labels": json.dumps({"team": t}),
                                "observed_at": WINDOW.end} for n, t in TEAMS.items()])
    store = Warehouse.open(root / "w.duckdb")
    store.load(LoadBatch(frames={**frames, "namespaces": namespaces}))
    collect_window(store, SETTINGS, servers.prometheus(om).url, WINDOW, now=lambda: WINDOW.end)
    return store


@pytest.fixture(scope="module")
def wh(metrics_servers: ServerPool, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Warehouse]:
    with _warehouse(tmp_path_factory.mktemp("dra-ksm"), metrics_servers, ksm=True) as store:
        yield store


def test_the_references_are_stored_per_pod_and_claim(wh: Warehouse) -> None:
    api = wh.scalar("SELECT count(*) FROM dra_reservations WHERE NOT starts_with(claim_uid, 'prometheus:')")
    assert api == 0  # only the claims rebuilt from the series have reservations (their own UIDs)
    refs = wh.query("SELECT pod, claim, start_ts, end_ts FROM dra_pod_claims ORDER BY pod")
    by_pod = {r["pod"]: r for r in refs.iter_rows(named=True)}
    assert by_pod["c-serve-1"]["claim"] == "shared-c"
    assert by_pod["c-serve-1"]["start_ts"] == POOL.at(120) and by_pod["c-serve-1"]["end_ts"] == POOL.at(240)
    assert refs.height == sum(len(c.pods) for c in CLAIMS)


def test_each_pod_holds_its_claims_minutes(wh: Warehouse) -> None:
    rows = claim_rows(wh, WINDOW)
    held = {str(p): h for p, h in rows.group_by("pod").agg(pl.col("held_hours").sum()).iter_rows()}
    expected = _expected_pod_hours()
    assert held.keys() == expected.keys()  # no claim-minute is left without its pod
    for pod, hours in expected.items():
        assert held[pod] == pytest.approx(hours, abs=1e-9), pod
    assert expected["c-serve-0"] == pytest.approx(5.0) and expected["c-serve-1"] == pytest.approx(1.0)


def test_the_bill_equals_the_truth(wh: Warehouse) -> None:
    bill = compute_bill(wh, WINDOW, SETTINGS, by=("team",), source="raw")
    lines = {r["team"]: (r["card_hours"], r["idle_card_hours"]) for r in bill.lines.iter_rows(named=True)}
    for team, truth in POOL.truth().items():
        assert lines[team][0] == pytest.approx(truth["card_hours"], abs=1e-6), team
        assert lines[team][1] == pytest.approx(truth["idle_card_hours"], rel=0.01), team


def test_without_the_series_no_pod_holds_a_claim(metrics_servers: ServerPool, tmp_path: Path) -> None:
    with _warehouse(tmp_path, metrics_servers, ksm=False) as store:
        rows = claim_rows(store, WINDOW)
        assert store.count("dra_pod_claims") == 0
    assert rows.height > 0 and rows["pod"].null_count() == rows.height
