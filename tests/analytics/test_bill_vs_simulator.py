"""The bill against the simulator's ground truth (`Simulation.ground_truth()`).

A 40-card default fleet (H100 exclusive, A100 MIG, A100-40GB time-sliced, H100 HAMi vGPU, H200
inference) over two days of 1-minute samples, loaded straight from `sim.inventory()` and
`sim.batches()` into a real warehouse file.

Cases:
- no scrape gaps, a MIG reconfiguration mid-hour: per-team card-hours within 0.5 % and idle
  card-hours within 2 % of the truth; unallocated + stranded capacity matches the truth's;
  fleet card-hours are exactly cards x hours; conservation to the cent;
- 2 % of node x 10-minute blocks not scraped (one day): per-team card-hours still within 0.5 %, fleet
  idle card-hours within 2 %;
- the exporter without `--kubernetes-virtual-gpus` (one series per shared card): time-sliced
  and vGPU card-hours come from the pods' requests, per team and mode within 0.5 %;
- the bill from the stored hourly roll-up (loaded day by day) equals the bill from raw samples
  to the cent on every line, at the device grain and at the lines-only grain, and a window
  mixing both sources too.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from gpuledger.analytics.billing.bill import Bill, compute_bill
from gpuledger.analytics.usage.daily import coarse_usage_from_rollup
from gpuledger.analytics.usage.rollup import rollup_batch
from gpuledger.core.config import Settings
from gpuledger.core.window import Window
from gpuledger.simulator.engine import Simulation
from gpuledger.simulator.fleet import FleetSpec
from gpuledger.warehouse import LoadBatch, Warehouse
from tests.analytics.conftest import assert_conserved

WINDOW = Window(datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 3, tzinfo=UTC))
ONE_DAY = Window(WINDOW.start, WINDOW.start + timedelta(days=1))
GPUS = 40


def _build(
    path: Path, gaps: float, window: Window = WINDOW, virtual_gpus: bool = True
) -> tuple[Path, pl.DataFrame]:
    spec = FleetSpec.default(
        gpus=GPUS, scenario={"scrape_gaps": gaps, "mig_reconfigure": True},
        exporter={"virtual_gpus": virtual_gpus},
    )
    sim = Simulation(spec, window, seed=7)
    inventory = sim.inventory()
    instances = inventory.pop("mig_instances")
    with Warehouse.open(path) as wh:
        wh.load(LoadBatch(frames=inventory))
        # A MIG instance recreated by the reconfiguration (same uuid, id and profile) comes as
        # two rows; within one batch the warehouse keeps only the last, across batches it
        # merges the spans, so load them one occurrence at a time.
        numbered = instances.with_columns(
            pl.int_range(pl.len()).over("uuid", "gpu_i_id", "profile").alias("_n")
        )
        for n in range(numbered["_n"].n_unique()):
            part = numbered.filter(pl.col("_n") == n).drop("_n")
            wh.load(LoadBatch(frames={"mig_instances": part}))
        for chunk, frames in sim.batches():
            wh.load(LoadBatch(frames=frames, window=chunk))
    return path, sim.ground_truth()


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pl.DataFrame]:
    return _build(tmp_path_factory.mktemp("sim") / "clean.duckdb", 0.0)


@pytest.fixture(scope="module")
def gappy(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pl.DataFrame]:
    return _build(tmp_path_factory.mktemp("sim") / "gappy.duckdb", 0.02, ONE_DAY)


@pytest.fixture(scope="module")
def unlabeled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pl.DataFrame]:
    return _build(tmp_path_factory.mktemp("sim") / "unlabeled.duckdb", 0.0, ONE_DAY, virtual_gpus=False)


def _bill(path: Path, window: Window = WINDOW, **kw: object) -> Bill:
    with Warehouse.open(path, read_only=True) as wh:
        bill = compute_bill(wh, window, Settings(), **kw)  # type: ignore[arg-type]
    assert_conserved(bill)
    return bill


def _truth_by_team(truth: pl.DataFrame) -> dict[str, tuple[float, float]]:
    held = truth.filter(pl.col("allocation_state") == "allocated").with_columns(
        pl.col("team").fill_null("unattributed")
    )
    rows = held.group_by("team").agg(pl.col("card_hours").sum(), pl.col("idle_card_hours").sum())
    return {r[0]: (r[1], r[2]) for r in rows.iter_rows()}


def test_clean_run_matches_truth_per_team(clean):
    path, truth = clean
    bill = _bill(path)
    expected = _truth_by_team(truth)
    lines = {r["team"]: r for r in bill.lines.iter_rows(named=True)}
    assert set(expected) <= set(lines)
    assert len(expected) >= 10
    for team, (card_hours, idle) in expected.items():
        assert lines[team]["card_hours"] == pytest.approx(card_hours, rel=0.005), team
        assert lines[team]["idle_card_hours"] == pytest.approx(idle, rel=0.02, abs=1e-9), team
    assert bill.fleet_card_hours == pytest.approx(GPUS * WINDOW.hours)
    free = truth.filter(pl.col("allocation_state") != "allocated")["card_hours"].sum()
    assert lines["unallocated"]["card_hours"] == pytest.approx(free, rel=0.005)
    stranded = truth.filter(pl.col("allocation_state") == "stranded")["card_hours"].sum()
    assert stranded > 0
    assert bill.unallocated["stranded_card_hours"].sum() == pytest.approx(stranded, rel=0.005)
    assert bill.unattributed_namespaces  # the default fleet has unlabeled namespaces


def test_scrape_gaps_keep_card_hours_within_half_a_percent(gappy):
    path, truth = gappy
    bill = _bill(path, ONE_DAY)
    expected = _truth_by_team(truth)
    lines = {r["team"]: r for r in bill.lines.iter_rows(named=True)}
    for team, (card_hours, _) in expected.items():
        assert lines[team]["card_hours"] == pytest.approx(card_hours, rel=0.005), team
    idle_truth = sum(idle for _, idle in expected.values())
    idle_billed = sum(r["idle_card_hours"] for t, r in lines.items() if t in expected)
    assert idle_billed == pytest.approx(idle_truth, rel=0.02)


def test_shared_cards_without_vgpu_labels_bill_from_pod_requests(unlabeled):
    path, truth = unlabeled
    bill = _bill(path, ONE_DAY, by=("team", "sharing_mode"))
    billed = {(r["team"], r["sharing_mode"]): r["card_hours"] for r in bill.lines.iter_rows(named=True)}
    held = truth.filter(pl.col("allocation_state") == "allocated").with_columns(
        pl.col("team").fill_null("unattributed")
    )
    expected = held.group_by("team", "sharing_mode").agg(pl.col("card_hours").sum())
    shared = expected.filter(pl.col("sharing_mode").is_in(["timeslice", "vgpu"]))
    assert shared.height >= 5
    for team, mode, card_hours in expected.iter_rows():
        assert billed[(team, mode)] == pytest.approx(card_hours, rel=0.005), (team, mode)


def test_rollup_bill_equals_raw_bill(clean, tmp_path):
    path, _ = clean
    copy = tmp_path / "rolled.duckdb"
    copy.write_bytes(path.read_bytes())
    with Warehouse.open(copy) as wh:
        for day in WINDOW.days():
            wh.load(rollup_batch(wh, day, Settings()))
    by = ("team", "model", "sharing_mode", "pool")
    raw = _bill(copy, by=by, source="raw")
    rolled = _bill(copy, by=by, source="rollup")
    auto = _bill(copy, by=by)
    assert auto.source == "rollup"
    for other in (rolled, auto):
        assert other.fleet_cost == raw.fleet_cost
        assert other.lines.select(*by, "cost").rows() == raw.lines.select(*by, "cost").rows()
        assert other.lines["idle_card_hours"].to_list() == pytest.approx(raw.lines["idle_card_hours"].to_list())
    # The lines-only grain (roll-up summed by day and the line dimensions) gives the same money.
    coarse = _bill(copy, by=by, grain="lines")
    money = [*by, "list_cost", "sharing_discount", "cost", "idle_cost"]
    assert coarse.lines.select(money).rows() == raw.lines.select(money).rows()
    assert coarse.detail.height < raw.detail.height
    # A window reaching past the roll-up (the watermark) mixes roll-up and raw samples.
    wider = Window(WINDOW.start + timedelta(hours=12), WINDOW.end + timedelta(hours=6))
    with Warehouse.open(copy) as wh:
        wh.load(LoadBatch(frames={}, watermarks={"card_hours_hourly": WINDOW.start + timedelta(days=1)}))
    mixed = _bill(copy, wider, by=by)
    assert mixed.source == "mixed"
    plain = _bill(copy, wider, by=by, source="raw")
    assert mixed.lines.select(*by, "cost").rows() == plain.lines.select(*by, "cost").rows()


ALL_DIMS = ("team", "namespace", "queue", "node", "pool", "model", "sharing_mode")
MONEY = ["list_cost", "sharing_discount", "utilization_adjustment", "redistributed_cost", "cost", "idle_cost"]


def _grains_agree(path: Path, settings: Settings, by: tuple[str, ...]) -> tuple[Bill, Bill]:
    """The lines grain (per price period) and the device grain (per day x device x holder)
    of the same roll-up: same lines, every money column to the cent."""
    with Warehouse.open(path, read_only=True) as wh:
        device = compute_bill(wh, WINDOW, settings, by, source="rollup")
        coarse = compute_bill(wh, WINDOW, settings, by, grain="lines")
    for bill in (device, coarse):
        assert_conserved(bill)
    assert coarse.source == "rollup"
    assert coarse.lines.select(*by, *MONEY).rows() == device.lines.select(*by, *MONEY).rows()
    for col in ("card_hours", "idle_card_hours", "held_idle_card_hours", "activity_unknown_card_hours"):
        assert coarse.lines[col].to_list() == pytest.approx(device.lines[col].to_list(), abs=1e-9)
    return device, coarse


def test_lines_grain_sums_per_price_period(clean, tmp_path):
    """Decision 0133: with one price all window the lines grain sums the roll-up into one period;
    a price change at 00:00 of day 2 cuts it in two, priced at each side's price; by day it
    keeps the days. Each time the same lines as the device grain, to the cent."""
    from gpuledger.core.config import PriceEntry

    path, _ = clean
    copy = tmp_path / "periods.duckdb"
    copy.write_bytes(path.read_bytes())
    with Warehouse.open(copy) as wh:
        for day in WINDOW.days():
            wh.load(rollup_batch(wh, day, Settings()))
        models = sorted(wh.query("SELECT DISTINCT model FROM gpus")["model"].to_list())
    cut = WINDOW.start + timedelta(days=1)
    changed = Settings(price_book=tuple(
        entry for i, m in enumerate(models) for entry in (
            PriceEntry(model=m, unit_price=1.0 + i),
            PriceEntry(model=m, unit_price=2.5 + i, effective_from=cut.date()),
        )
    ))
    _, one = _grains_agree(copy, Settings(), ALL_DIMS)
    assert one.detail.filter(pl.col("kind") == "allocated")["day"].unique().to_list() == [WINDOW.start.date()]
    device, two = _grains_agree(copy, changed, ALL_DIMS)
    assert sorted(two.detail.filter(pl.col("kind") == "allocated")["day"].unique().to_list()) == [
        WINDOW.start.date(), cut.date()
    ]
    # The change is priced: day 2's card-hours at the second price (independently: card-hours x price).
    second = device.detail.filter((pl.col("kind") == "allocated") & (pl.col("day") == cut.date()))
    price = {m: 2.5 + i for i, m in enumerate(models)}
    expected = sum(h * price[m] for h, m in second.select("card_hours", "model").iter_rows())
    billed = two.detail.filter((pl.col("kind") == "allocated") & (pl.col("day") == cut.date()))
    assert float(billed["list_cost"].sum()) == pytest.approx(expected, rel=1e-9)
    _grains_agree(copy, changed, ("team", "day", "model"))


def test_lines_grain_names_a_card_the_inventory_lacks(clean, tmp_path):
    """A card in the roll-up but not in `gpus` (a stale inventory) keeps its roll-up node, model
    and pool on the unallocated line at the lines grain as at the device grain."""
    path, _ = clean
    copy = tmp_path / "orphan.duckdb"
    copy.write_bytes(path.read_bytes())
    with Warehouse.open(copy) as wh:
        for day in WINDOW.days():
            wh.load(rollup_batch(wh, day, Settings()))
        uuid, node = wh.query(
            "SELECT uuid, any_value(node) FROM card_hours_hourly WHERE sharing_mode = 'exclusive' "
            "GROUP BY uuid ORDER BY uuid LIMIT 1"
        ).row(0)
        wh.execute("DELETE FROM gpus WHERE uuid = ?", [uuid])
    _grains_agree(copy, Settings(), ("team", "node", "pool", "model"))
    with Warehouse.open(copy, read_only=True) as wh:
        _, held = coarse_usage_from_rollup(wh, WINDOW, ["namespace", "model", "pool", "sharing_mode"])
    named = held.filter(pl.col("uuid") == uuid)
    assert named.height == 2 and named["_u_node"].to_list() == [node, node]
    assert held.filter(pl.col("uuid") != uuid)["_u_node"].null_count() == held.height - 2
