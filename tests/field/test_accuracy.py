"""Accuracy under every field effect, through the real path: simulator (field mode) →
OpenMetrics → real Prometheus (promtool backfill) or real VictoriaMetrics (import API) →
`collect_window` into a real DuckDB file → `compute_bill`, against the simulator's truth
(`Simulation.truth_by_team`, from the generator's own intervals).

The fleet: the 40-card default fleet (one node per pool: exclusive H100, MIG A100,
time-sliced A100, HAMi vGPU H100, H200) over 12 hours. Runs: no effect (the floor), each
effect of `FieldEffects.names()` alone at its `all()` level, every effect together; all through
Prometheus, and every effect together through VictoriaMetrics too. These take the Kubernetes
facts from the API (the harness's snapshot; source `api`). Every effect together also runs with
the engine as the only source (`prometheus`: kube-state-metrics and HAMi's scheduler series,
no API), and on a HAMi-only fleet (16 cards) from both sources.

Cases, for each run:
- card-hours per team (unattributed included) within 0.5 % of the truth;
- allocated-but-idle card-hours per team within 1 % of the truth (zero where the truth is zero);
- HAMi's cards billed per card: every team holding a `vgpu` card in the truth is billed
  card-hours on `vgpu` cards, within 0.5 % of its truth there (not zero, not spread);
- costs conserved: the lines' costs add up to the fleet's cost to the cent;
- no sample counted twice: the fleet's card-hours never exceed card slots x hours and equal
  the truth's capacity (a replaced card or an absent node is no extra capacity) within 0.5 %,
  and the held card-hours stay within 0.5 % of the truth's (two HA replicas would double them);
- every dropped sample counted by reason: per dcgm field, the reads the engine answers (each
  replica's copy included) equal the values stored plus the samples the collect report counts
  under some reason; the `nan`, `negative` and `ha_duplicate` counts equal those computed from
  the OpenMetrics file itself.
"""

from __future__ import annotations

import polars as pl
import pytest

from gpuledger.analytics.billing.money import to_cents
from gpuledger.collectors.quality import REASONS
from gpuledger.simulator.field import FieldEffects
from tests.field.conftest import FieldRuns
from tests.field.harness import FieldRun, hours

pytestmark = [pytest.mark.prometheus, pytest.mark.slow]

CASES = [
    *[pytest.param((n, "prometheus", "api", "default"), id=n) for n in ("none", *FieldEffects.names())],
    pytest.param(("all", "prometheus", "api", "default"), id="all-prometheus"),
    pytest.param(("all", "victoriametrics", "api", "default"), id="all-victoriametrics"),
    pytest.param(("all", "prometheus", "prometheus", "default"), id="all-prometheus-only"),
    pytest.param(("all", "prometheus", "api", "hami"), id="hami-all-api"),
    pytest.param(("all", "prometheus", "prometheus", "hami"), id="hami-all-prometheus-only"),
]
CARD_HOURS_REL = 0.005
IDLE_REL = 0.01
NOT_TEAMS = ("unallocated", "sharing_discount")


@pytest.fixture(params=CASES)
def run(request: pytest.FixtureRequest, field_runs: FieldRuns) -> FieldRun:
    name, engine, source, fleet = request.param
    return field_runs.get(name, engine, source, fleet)


def _id(run: FieldRun) -> str:
    return f"{run.name}/{run.engine}/{run.source}/{run.fleet}"


def _table(frame: pl.DataFrame) -> str:
    with pl.Config(tbl_rows=40, tbl_cols=12, tbl_width_chars=200):
        return str(frame)


def test_card_hours_per_team(run: FieldRun) -> None:
    errors = run.team_errors()
    bad = errors.filter(pl.col("card_hours_err").abs().fill_null(1.0) > CARD_HOURS_REL)
    assert bad.height == 0, f"{_id(run)}:\n{_table(errors)}"


def test_hami_cards_billed_per_card(run: FieldRun) -> None:
    vgpu = run.vgpu.with_columns((pl.col("card_hours_bill") / pl.col("card_hours") - 1).alias("err"))
    assert vgpu.height > 0, _id(run)
    bad = vgpu.filter(pl.col("err").abs().fill_null(1.0) > CARD_HOURS_REL)
    assert bad.height == 0, f"{_id(run)}:\n{_table(vgpu)}"


def test_costs_conserved_to_the_cent(run: FieldRun) -> None:
    cents = sum(to_cents(float(c)) for c in run.lines["cost"].to_list())
    assert cents == to_cents(run.fleet_cost), (cents, run.fleet_cost)


def test_idle_card_hours_per_team(run: FieldRun) -> None:
    errors = run.team_errors()
    off = (pl.col("idle_card_hours_bill") - pl.col("idle_card_hours")).abs()
    bad = errors.filter(off.fill_null(1.0) > IDLE_REL * pl.col("idle_card_hours") + 1e-9)
    assert bad.height == 0, f"{_id(run)}:\n{_table(errors)}"


def test_no_sample_counted_twice(run: FieldRun) -> None:
    assert run.fleet_card_hours <= run.gpu_count * hours(run.window) + 1e-6, run.fleet_card_hours
    assert run.fleet_card_hours == pytest.approx(run.capacity_truth, rel=CARD_HOURS_REL)
    held = float(run.lines.filter(~pl.col("team").is_in(NOT_TEAMS))["card_hours"].sum())
    truth = float(run.truth["card_hours"].sum())
    assert held == pytest.approx(truth, rel=CARD_HOURS_REL), (held, truth)


def test_every_dropped_sample_counted(run: FieldRun) -> None:
    counted: dict[tuple[str, str], int] = {}
    for (table, field, reason), n in run.quality.counts.items():
        if table == "gpu_samples":
            counted[(field, reason)] = counted.get((field, reason), 0) + n
    for row in run.reads.iter_rows(named=True):
        field = row["field"]
        reasons = {r: counted.get((field, r), 0) for r in REASONS}
        assert row["reads"] == run.stored[field] + sum(reasons.values()), (field, row, reasons)
        for reason in ("nan", "negative", "ha_duplicate"):
            assert reasons[reason] == row[reason], (field, reason, reasons[reason], row[reason])
