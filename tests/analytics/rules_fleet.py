"""A hand-built two-card fleet whose bill is known by arithmetic under every rule set, for the
tests of stored facts and their rules (docs/decisions/0147).

Three days of 1-minute samples (2026-11-01..03), the same each day:

- `GPU-A`, a whole H100-80GB, held all day by `alpha-ns/a1` (team alpha), framebuffer in use.
  GR_ENGINE_ACTIVE is 0.5 but for four dips, and GPU_UTIL tells another story in two of them:

  | dip           | minutes | GR_ENGINE_ACTIVE | GPU_UTIL |
  |---------------|---------|------------------|----------|
  | 04:00-04:45   | 45      | 0.10             | 10 %     |
  | 08:00-08:40   | 40      | 0.02             | 2 %      |
  | 12:00-13:30   | 90      | 0.03             | 90 %     |
  | 16:00-17:00   | 60      | 0.50             | 1 %      |

  (elsewhere GPU_UTIL is 50 %). So the idle minutes of a day are, by rule set:
  default (activity < 5 % for >= 30 min, GR_ENGINE_ACTIVE): 40 + 90 = 130;
  threshold 15 %: 45 + 40 + 90 = 175; minimum run 60 min: 90;
  activity GPU_UTIL only: 40 + 60 = 100.
- `GPU-M`, an H100-80GB in MIG mode with one 3g.40gb instance (the whole time, in
  `mig_instances`) held by `beta-ns/b1` (team beta), always busy. Its share of the card is
  3 of 7 compute slices (basis `compute`) or 40 of 80 GB, 4 of 8 memory slices (`memory`);
  the rest of the card is unallocated, all of it stranded (no instance can hold it).

Prices: H100-80GB 3.00 per card-hour; discounts as configured (mig 0.9 by default).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from gpuledger.analytics.billing.bill import Bill
from gpuledger.analytics.usage.rollup import rollup_batch
from gpuledger.core.config import Settings
from gpuledger.core.window import Window
from gpuledger.warehouse import LoadBatch, Warehouse
from tests.analytics.builders import T0, Seg, gpus, mig_instances, namespaces, samples

DAYS = 3
WHOLE = Window(T0, T0 + timedelta(days=DAYS))
BILLED = Window(T0, T0 + timedelta(days=2))
"""The window the tests bill: two whole days (48 hours)."""
HOURS = 48
PRICE = 3.0
SHARE = {"compute": 3 / 7, "memory": 4 / 8}
"""3g.40gb on an H100-80GB: 3 of 7 compute slices, 4 of 8 memory slices."""
DIPS = (  # start minute, minutes, GR_ENGINE_ACTIVE, GPU_UTIL
    (4 * 60, 45, 0.10, 10.0), (8 * 60, 40, 0.02, 2.0), (12 * 60, 90, 0.03, 90.0), (16 * 60, 60, 0.50, 1.0),
)
IDLE_MINUTES = {"default": 40 + 90, "threshold": 45 + 40 + 90, "min_run": 90, "activity": 40 + 60}
"""Idle minutes of GPU-A per day by rule set (module docstring)."""


def settings(**changes: Any) -> Settings:
    """The fleet's settings: the price, plus `idle=` / `sharing=` changes."""
    return Settings.model_validate({"price_book": [{"model": "H100-80GB", "unit_price": PRICE}], **changes})


RULE_CHANGES: dict[str, dict[str, Any]] = {
    "threshold": {"idle": {"threshold": 0.15}},
    "min_run": {"idle": {"min_minutes": 60}},
    "activity": {"idle": {"activity": "gpu_util"}},
    "share_basis": {"sharing": {"mig_share_basis": "memory"}},
}
"""A change of each rule the roll-up depends on (the issue's user's settings among them)."""


def _card_a() -> list[Seg]:
    segs: list[Seg] = []
    for day in range(DAYS):
        cursor = T0 + timedelta(days=day)
        for start, minutes, act, util in DIPS:
            dip = T0 + timedelta(days=day, minutes=start)
            segs.append(Seg("GPU-A", cursor, dip, "alpha-ns", "a1", act=0.5, util=50.0))
            segs.append(Seg("GPU-A", dip, dip + timedelta(minutes=minutes), "alpha-ns", "a1", act=act, util=util))
            cursor = dip + timedelta(minutes=minutes)
        segs.append(Seg("GPU-A", cursor, T0 + timedelta(days=day + 1), "alpha-ns", "a1", act=0.5, util=50.0))
    return segs


def frames() -> dict[str, Any]:
    mig = Seg("GPU-M", T0, WHOLE.end, "beta-ns", "b1", act=0.5, util=50.0, gpu_i_id=1, profile="3g.40gb")
    return {
        "gpus": gpus({"uuid": "GPU-A"}, {"uuid": "GPU-M", "gpu_index": 1, "sharing_mode": "mig"}),
        "gpu_samples": samples([*_card_a(), mig]),
        "namespaces": namespaces({"alpha-ns": "alpha", "beta-ns": "beta"}),
        "mig_instances": mig_instances(("GPU-M", 1, "3g.40gb", T0, WHOLE.end)),
    }


def build(path: Path, rolled_under: Settings) -> Path:
    """The fleet in a warehouse at `path`, rolled up day by day under `rolled_under`."""
    with Warehouse.open(path) as wh:
        wh.load(LoadBatch(frames=frames(), window=WHOLE))
        for day in WHOLE.days():
            wh.load(rollup_batch(wh, day, rolled_under))
    return path


@pytest.fixture(scope="session")
def rolled_fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fleet rolled up under the default rules (copy it before writing)."""
    return build(tmp_path_factory.mktemp("rules-fleet") / "fleet.duckdb", settings())


@pytest.fixture
def fleet(rolled_fleet: Path, tmp_path: Path) -> Path:
    """A private copy of `rolled_fleet`."""
    return Path(shutil.copy(rolled_fleet, tmp_path / "fleet.duckdb"))


@dataclass(frozen=True)
class Expected:
    """The bill of `BILLED` computed by hand (module docstring) under one rule set."""

    idle_minutes_per_day: int
    basis: str
    mig_factor: float = 0.9

    @property
    def alpha_idle(self) -> float:
        return 2 * self.idle_minutes_per_day / 60

    @property
    def beta_card_hours(self) -> float:
        return HOURS * SHARE[self.basis]

    @property
    def beta_cost(self) -> float:
        return round(self.beta_card_hours * PRICE * self.mig_factor, 2)

    @property
    def stranded(self) -> float:
        return HOURS * (1 - SHARE[self.basis])


def lines(bill: Bill) -> dict[str, dict[str, Any]]:
    return {row["team"]: row for row in bill.lines.iter_rows(named=True)}


def assert_bill(bill: Bill, expected: Expected) -> None:
    """`bill` equals the hand computation, and its label is the basis its numbers used."""
    by_team = lines(bill)
    assert by_team["alpha"]["card_hours"] == pytest.approx(HOURS, abs=1e-9)
    assert by_team["alpha"]["cost"] == HOURS * PRICE
    assert by_team["alpha"]["idle_card_hours"] == pytest.approx(expected.alpha_idle, abs=1e-9)
    assert by_team["alpha"]["idle_cost"] == round(expected.alpha_idle * PRICE, 2)
    assert by_team["beta"]["card_hours"] == pytest.approx(expected.beta_card_hours, abs=1e-9)
    assert by_team["beta"]["idle_card_hours"] == 0
    assert by_team["beta"]["cost"] == pytest.approx(expected.beta_cost, abs=0.011)
    assert by_team["unallocated"]["card_hours"] == pytest.approx(expected.stranded, abs=1e-9)
    assert float(bill.unallocated["stranded_card_hours"].sum()) == pytest.approx(expected.stranded, abs=1e-9)
    assert bill.fleet_card_hours == pytest.approx(2 * HOURS, abs=1e-9)
    assert bill.fleet_cost == 2 * HOURS * PRICE
    assert_labelled_honestly(bill)


def assert_labelled_honestly(bill: Bill) -> None:
    """The basis a bill names is the one its MIG card-hours and stranded capacity were computed
    under (by the hand shares above), and it is the basis of the rules it carries."""
    basis = bill.mig_share_basis
    assert basis in SHARE, basis
    assert bill.rules is not None and bill.rules.shares.mig_share_basis == basis
    assert lines(bill)["beta"]["card_hours"] == pytest.approx(HOURS * SHARE[basis], abs=1e-9)
    stranded = float(bill.unallocated["stranded_card_hours"].sum())
    assert stranded == pytest.approx(HOURS * (1 - SHARE[basis]), abs=1e-9)
    assert bill.to_dict()["rules"]["mig_share_basis"] == bill.to_dict()["mig_share_basis"] == basis
