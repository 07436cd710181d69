"""Under `sharing.mig_share_basis: memory`, every number a page shows equals the bill.

The bill is computed apart, with `analytics.billing.bill.compute_bill` on the prepared file (not via the
app), under the same settings. Each case runs twice: on raw samples only, and on a warehouse
whose first six hours of November are in the stored roll-up (rolled up under the memory basis)
and the rest raw.

Cases:
- the basis matters on this fleet: the MIG profiles' shares in the memory bill are memory
  slices / 8, not compute slices / 7 (otherwise nothing below could fail);
- My team: the lead's cost, card-hours, idle cost and idle card-hours are the team's bill line;
- Fleet: fleet cost and allocated + unallocated card-hours are the bill's; the heatmap cell
  times the node's cards, summed over the month, is the bill's card-hours × active ratio of
  that node (every node, the MIG node included); the drill-down does the same per GPU;
- Queues: a MIG resource weighs the bill's share of that profile: the hourly GPU-equivalents
  in use, recomputed from the raw Kueue samples with the bill's shares, are the page's, for
  every ClusterQueue (admin) and for the lead's.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from gpuledger.core.access import resolve_roles
from gpuledger.core.config import Settings, SharingSettings
from gpuledger.core.mig import COMPUTE_SLICES, MEMORY_SLICES, catalog
from gpuledger.core.period import Period
from gpuledger.core.window import Window
from gpuledger.dashboards.pages import fleet, queues, team
from gpuledger.dashboards.pages.common import PageContext
from gpuledger.dashboards.state import ViewState
from tests.dashboards.conftest import (
    ADMIN,
    LEAD,
    LEAD_TEAM,
    PERIOD,
    lead_team_queues,
    settings_with_roles,
)

MIG_NODE = "a100-mig-000"
ROLLED_UP = Window(datetime(2026, 11, 1, 0, tzinfo=UTC), datetime(2026, 11, 1, 6, tzinfo=UTC))


def memory_settings() -> Settings:
    return settings_with_roles().model_copy(update={"sharing": SharingSettings(mig_share_basis="memory")})


SETTINGS = memory_settings()
ADMIN_P = resolve_roles(ADMIN, ("platform-admins",), SETTINGS.access)
LEAD_P = resolve_roles(LEAD, (), SETTINGS.access)


@pytest.fixture(scope="module", params=["raw", "rollup"])
def case(request: pytest.FixtureRequest, demo_source: Path,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any, Path]]:
    """(app, the bill computed apart, the prepared warehouse file)."""
    from gpuledger.analytics.billing.bill import compute_bill
    from gpuledger.analytics.usage.rollup import rollup_batch
    from gpuledger.dashboards.app import create_app
    from gpuledger.warehouse import Warehouse

    folder = tmp_path_factory.mktemp(f"basis-{request.param}")
    prepared = folder / "prepared.duckdb"
    shutil.copyfile(demo_source, prepared)
    if request.param == "rollup":
        with Warehouse.open(prepared) as wh:
            wh.load(rollup_batch(wh, ROLLED_UP, SETTINGS))
    with Warehouse.open(prepared, read_only=True) as wh:
        bill = compute_bill(wh, Period.exact(PERIOD).window, SETTINGS)
    if request.param == "rollup":
        assert bill.source == "mixed"  # the bill itself read the roll-up for those hours
    served = folder / "served.duckdb"
    shutil.copyfile(prepared, served)
    app = create_app(SETTINGS, served, background=False, cache_dir=folder / "cache")
    yield app, bill, prepared
    app.close()


def ctx(app: Any, principal: Any) -> PageContext:
    return PageContext(principal, ViewState(period=PERIOD), app.data, app.settings)


def active_card_hours(bill: Any, key: str) -> dict[str, float]:
    held = bill.detail.filter(pl.col("kind") == "allocated")
    sums = held.group_by(key).agg((pl.col("card_hours") * pl.col("active_ratio").fill_null(0.0)).sum())
    return dict(sums.iter_rows())


def bill_shares(bill: Any) -> dict[str, float]:
    """MIG profile → the share the bill charged for it (one share per profile)."""
    mig = bill.detail.filter((pl.col("kind") == "allocated") & (pl.col("sharing_mode") == "mig"))
    mig = mig.select("profile", "share").unique()
    assert mig["profile"].n_unique() == mig.height, "one share per profile"
    return dict(mig.iter_rows())


def test_the_basis_matters(case: tuple[Any, Any, Path]) -> None:
    _, bill, _ = case
    shares = bill_shares(bill)
    a100 = catalog()["A100-80GB"].profiles
    assert {"1g.10gb", "2g.20gb", "3g.40gb"} <= set(shares)
    for profile, share in shares.items():
        assert share == pytest.approx(a100[profile].memory / MEMORY_SLICES)
        assert share != pytest.approx(a100[profile].compute / COMPUTE_SLICES)


def test_team_page_is_the_bill(case: tuple[Any, Any, Path]) -> None:
    app, bill, _ = case
    v = team.view(ctx(app, LEAD_P))
    ref = bill.lines.filter(pl.col("team") == LEAD_TEAM).row(0, named=True)
    for key in ("cost", "card_hours", "idle_cost", "idle_card_hours"):
        assert v.line[key] == pytest.approx(ref[key], abs=0.005), key


def test_fleet_page_and_heatmap_are_the_bill(case: tuple[Any, Any, Path]) -> None:
    app, bill, _ = case
    v = fleet.view(ctx(app, ADMIN_P))
    assert v.totals["fleet_cost"] == pytest.approx(bill.fleet_cost, abs=0.005)
    assert v.totals["allocated"] + v.totals["unallocated"] == pytest.approx(bill.fleet_card_hours, rel=1e-9)
    cards = dict(app.data.gpus().group_by("node").agg(pl.len()).iter_rows())
    shown = v.heat.group_by("node").agg(pl.col("activity").sum())
    expected = active_card_hours(bill, "node")
    assert MIG_NODE in expected and set(dict(shown.iter_rows())) == set(cards)
    for node, activity in shown.iter_rows():
        assert activity * cards[node] == pytest.approx(expected.get(node, 0.0), rel=1e-9, abs=1e-9), node


def test_heatmap_drill_down_is_the_bill(case: tuple[Any, Any, Path]) -> None:
    app, bill, _ = case
    per_gpu = app.data.gpu_heat(PERIOD, MIG_NODE).group_by("uuid").agg(pl.col("activity").sum())
    held = bill.detail.filter((pl.col("kind") == "allocated") & (pl.col("node") == MIG_NODE))
    expected = dict(
        held.group_by("uuid").agg((pl.col("card_hours") * pl.col("active_ratio").fill_null(0.0)).sum())
        .iter_rows()
    )
    assert per_gpu.height == 8 and expected
    for uuid, activity in per_gpu.iter_rows():
        assert activity == pytest.approx(expected.get(uuid, 0.0), rel=1e-9, abs=1e-9), uuid


@pytest.mark.parametrize("who", ["admin", "lead"])
def test_queue_views_weigh_mig_like_the_bill(case: tuple[Any, Any, Path], who: str) -> None:
    from gpuledger.warehouse import Warehouse

    app, bill, prepared = case
    weights = {"nvidia.com/gpu": 1.0, **{f"nvidia.com/mig-{p}": s for p, s in bill_shares(bill).items()}}
    v = queues.view(ctx(app, ADMIN_P if who == "admin" else LEAD_P))
    if who == "lead":
        assert v.queues == lead_team_queues(prepared, LEAD_TEAM)
    else:
        assert len(v.queues) > 5
    with Warehouse.open(prepared, read_only=True) as wh:
        raw = wh.query(
            "SELECT ts, cluster_queue, resource, usage FROM queue_samples WHERE ts >= ? AND ts < ?",
            [Period.exact(PERIOD).window.start, Period.exact(PERIOD).window.end],
        )
    assert raw["resource"].str.starts_with("nvidia.com/mig-").any()
    expected = (
        raw.filter(pl.col("resource").is_in(list(weights)))
        .with_columns((pl.col("usage") * pl.col("resource").replace_strict(weights, return_dtype=pl.Float64))
                      .alias("u"))
        .group_by("ts", "cluster_queue").agg(pl.col("u").sum())
        .group_by("cluster_queue", pl.col("ts").dt.truncate("1h").alias("hour")).agg(pl.col("u").mean())
    )
    joined = v.series.join(expected, on=["cluster_queue", "hour"], how="left")
    assert joined.height == v.series.height and joined["u"].null_count() == 0
    for row in joined.iter_rows(named=True):
        assert row["usage"] == pytest.approx(row["u"], rel=1e-9), (row["cluster_queue"], row["hour"])
