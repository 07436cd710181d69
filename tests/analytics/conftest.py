"""Fixtures for the analytics tests: a fresh warehouse file per test, bills with conservation."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import polars as pl
import pytest

from gpuledger.analytics.billing.bill import Bill, compute_bill
from gpuledger.analytics.billing.money import to_cents
from gpuledger.core.config import Settings
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse
from tests.analytics.builders import load

BillFn = Callable[..., Bill]


def assert_conserved(bill: Bill, fleet_card_hours: float | None = None) -> None:
    """Lines add up to the fleet: cost to the cent, card-hours exactly (and to a hand figure)."""
    cents = sum(to_cents(c) for c in bill.lines["cost"].to_list())
    assert cents == to_cents(bill.fleet_cost)
    assert float(bill.lines["card_hours"].sum()) == pytest.approx(bill.fleet_card_hours, abs=1e-9)
    for row in bill.lines.iter_rows(named=True):
        parts = sum(
            sign * float(row[c]) for sign, c in (
                (1, "list_cost"), (-1, "sharing_discount"), (1, "utilization_adjustment"),
                (1, "redistributed_cost"),
            )
        )
        assert to_cents(parts) == to_cents(float(row["cost"]))
    detail_total = float(bill.detail["cost"].sum()) + float(bill.detail["sharing_discount"].sum())
    assert detail_total == pytest.approx(bill.fleet_cost, abs=0.01)
    if fleet_card_hours is not None:
        assert bill.fleet_card_hours == pytest.approx(fleet_card_hours, abs=1e-9)


def by_team(bill: Bill) -> dict[str, dict[str, float]]:
    return {row["team"]: row for row in bill.lines.iter_rows(named=True)}


@pytest.fixture
def make_bill(tmp_path: Path) -> Callable[..., Bill]:
    """Load `frames` into a new warehouse and bill `window`; conservation is always checked."""
    counter = iter(range(1000))

    def run(
        window: Window, frames: dict[str, pl.DataFrame], settings: Settings | None = None,
        by: Sequence[str] = ("team",), source: str = "auto",
    ) -> Bill:
        path = load(tmp_path / f"wh{next(counter)}.duckdb", window, frames)
        with Warehouse.open(path, read_only=True) as wh:
            bill = compute_bill(wh, window, settings or Settings(), by, source=source)  # type: ignore[arg-type]
        assert_conserved(bill)
        return bill

    return run
