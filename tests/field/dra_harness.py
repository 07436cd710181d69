"""The DRA field harness: the simulator's DRA pool (`simulator.dra_fleet`) with telemetry holes,
written as dcgm-exporter and kube-state-metrics write it (`simulator.dra_metrics`), through a
real Prometheus (promtool backfill) or VictoriaMetrics (import API), collected by the collect
pipeline with its roll-up, billed by the default bill (the roll-up where it covers the window),
and set beside the pool's truth (`DraPool.truth`, from the plan itself).

Kept apart from `tests/field/harness.py` (the device-plugin fleet's) so each stays one fleet.
Two sources:
- `prometheus`: Prometheus only; the claims are rebuilt from the series. A claim whose device no
  series ever names cannot be placed on a card (`unplaceable`): the bill names it, the truth
  compared leaves it out (and its card-hours are on the unallocated line);
- `api+prometheus`: a collect run every hour, each with a live API list at its end (what the
  collect CronJob does with a kubeconfig); claims the hourly lists miss come from Prometheus.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from gpuledger.analytics.billing.bill import compute_bill
from gpuledger.collect_pipeline import collect_window
from gpuledger.collect_rollup import RollupPlan
from gpuledger.collectors.dra import DraObjects, frames_from_objects
from gpuledger.core.config import Settings
from gpuledger.core.window import HOUR, Window
from gpuledger.simulator.dra import CLAIMS, TEAMS, ClaimPlan, DraField, DraPool, share
from gpuledger.simulator.dra_fleet import DraFleet
from gpuledger.warehouse import Warehouse
from tools.metrics_servers import ServerPool

WINDOW = Window(datetime(2026, 11, 2, tzinfo=UTC), datetime(2026, 11, 2, 12, tzinfo=UTC))
SETTINGS = Settings(prometheus={"chunk": "2h", "retries": 1})
SOURCES = ("prometheus", "api+prometheus")


def unplaceable(pool: DraPool, claim: ClaimPlan) -> bool:
    """No series ever names the claim's device, nor another device of its card: from
    Prometheus alone the claim cannot be placed on a card."""
    return not any(pool.shown(c) for c in CLAIMS if c.card == claim.card)


def truth(fleet: DraFleet, source: str) -> pl.DataFrame:
    """Per team the pool's truth (`card_hours`, `idle_card_hours`, `unknown_card_hours`), less
    the unplaceable claims' card-hours for the Prometheus-only source."""
    rows = {team: dict(figures) for team, figures in fleet.truth().items()}
    if source == "prometheus":
        for pool in fleet.pools:
            span = fleet.minutes(pool)
            for claim in (c for c in CLAIMS if unplaceable(pool, c)):
                hours = share(claim) * len(range(claim.start, min(claim.end, len(span)))) / 60
                rows[TEAMS[claim.namespace]]["card_hours"] -= hours
                rows[TEAMS[claim.namespace]]["unknown_card_hours"] -= hours
    return pl.DataFrame([{"team": t, **f} for t, f in rows.items()])


class ApiLists:
    """The live API's list at each collect run's end (`Snapshotter`): the pool's objects at that
    minute, its namespaces with their team labels."""

    def __init__(self, fleet: DraFleet) -> None:
        self.fleet = fleet
        self.at = fleet.window.start

    def snapshot(self) -> Mapping[str, pl.DataFrame]:
        objects: dict[str, list[dict[str, Any]]] = {}
        for pool in self.fleet.pools:
            minute = int((self.at - pool.start) / timedelta(minutes=1))
            if 0 <= minute <= len(self.fleet.minutes(pool)) + 10:
                for kind, items in pool.objects(minute).items():
                    known = objects.setdefault(kind, [])
                    known.extend(i for i in items if kind in ("claims", "pods") or i not in known)
        frames = frames_from_objects(DraObjects(**objects), self.at)
        namespaces = pl.DataFrame([{"namespace": n, "team": t, "labels": json.dumps({"team": t}),
                                    "observed_at": self.at} for n, t in TEAMS.items()])
        return {**frames, "namespaces": namespaces}


@dataclass(frozen=True)
class DraRun:
    """One DRA fleet through one engine and source: the default bill, the truth, what was stored."""

    source: str
    engine: str
    lines: pl.DataFrame
    """Bill lines: team, card_hours, idle_card_hours, activity_unknown_card_hours, cost."""
    truth: pl.DataFrame
    bill_source: str
    warnings: tuple[str, ...]
    claim_sources: dict[str, int]
    """`dra_claims` rows per `source`."""
    row_sources: dict[str, float]
    """Claim rows' held hours per `dra_source` (the bill's claims, by where they came from)."""
    rerolled_days: int
    fleet_cost: float = 0.0

    def errors(self) -> pl.DataFrame:
        """Per team: truth, billed and the relative errors of card-hours, idle and unknown."""
        joined = self.truth.join(self.lines, on="team", how="left", suffix="_bill")
        rel = [("card_hours", "card_hours_bill"), ("idle_card_hours", "idle_card_hours_bill"),
               ("unknown_card_hours", "activity_unknown_card_hours")]
        return joined.with_columns(*(((pl.col(b) - pl.col(t)) / pl.col(t)).alias(f"{t}_err") for t, b in rel))


def dra_run(source: str, engine: str, root: Path, *, field: DraField | None = None,
            window: Window = WINDOW, claim_families: bool = False) -> DraRun:
    """Simulate, write, serve, collect (with the roll-up), bill (module docstring)."""
    from gpuledger.analytics.devices.dra_rows import claim_rows

    fleet = DraFleet(window, field if field is not None else DraField.holes())
    path = root / "dra.om"
    fleet.write_openmetrics(path, ksm=True, claim_families=claim_families)
    servers = ServerPool(root)
    try:
        server = servers.prometheus(path) if engine == "prometheus" else servers.victoriametrics(path)
        with Warehouse.open(root / "w.duckdb") as wh:
            rerolled = _collect(wh, server.url, fleet, source)
            servers.stop_all()
            bill = compute_bill(wh, window, SETTINGS, by=("team",))
            counts = wh.query("SELECT coalesce(source, 'api') AS s, count(*) AS n FROM dra_claims GROUP BY s")
            rows = claim_rows(wh, window).group_by("dra_source").agg(pl.col("held_hours").sum())
    finally:
        servers.stop_all()
        path.unlink(missing_ok=True)
    return DraRun(
        source=source, engine=engine,
        lines=bill.lines.select("team", "card_hours", "idle_card_hours", "activity_unknown_card_hours", "cost"),
        truth=truth(fleet, source), bill_source=bill.source, warnings=bill.warnings,
        claim_sources=dict(counts.iter_rows()), row_sources=dict(rows.iter_rows()), rerolled_days=rerolled,
        fleet_cost=float(bill.fleet_cost),
    )


def _collect(wh: Warehouse, url: str, fleet: DraFleet, source: str) -> int:
    """Collect the window: once (Prometheus only), or every hour with the API's list at the
    run's end (the roll-up by the hour, as `collect --follow` does, to the end at the last)."""
    window = fleet.window
    if source == "prometheus":
        report = collect_window(wh, SETTINGS, url, window, now=lambda: window.end + timedelta(minutes=5),
                                rollup=RollupPlan())
        return report.rerolled_days
    lists, rerolled = ApiLists(fleet), 0
    end = window.start + HOUR
    while end <= window.end:
        lists.at = end
        last = end == window.end
        plan = RollupPlan() if last else RollupPlan(grain=HOUR, to_end=False, origin=window.start)
        report = collect_window(wh, SETTINGS, url, Window(window.start, end), kubernetes=lists,
                                now=lambda at=end: at, rollup=plan)  # type: ignore[misc]
        rerolled += report.rerolled_days
        end += HOUR
    return rerolled
