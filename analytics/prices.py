"""Prices laid out per model and UTC day, and the per-row factors the bill applies.

Price-book entries take effect at 00:00 UTC of their date, so one price holds for a whole day:
pricing per day splits a period exactly at a price change.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date

import polars as pl

from gpuledger.core.config import Settings
from gpuledger.core.pricing import PriceBook
from gpuledger.core.window import Window


def price_table(book: PriceBook, models: Iterable[str], window: Window) -> pl.DataFrame:
    """`model`, `day`, `unit_price` for every day of `window` (ConfigError when unpriced)."""
    rows: list[tuple[str, date, float]] = []
    for model in sorted(set(models)):
        for span in book.spans(model, window):
            assert span.end is not None
            for day in Window(span.start, span.end).days():
                rows.append((model, day.start.date(), span.unit_price))
    return pl.DataFrame(
        rows, schema={"model": pl.String, "day": pl.Date, "unit_price": pl.Float64}, orient="row"
    )


def discount_factor_expr(settings: Settings) -> pl.Expr:
    """The sharing discount factor of each row's `sharing_mode` (1 for modes not configured)."""
    factors = settings.sharing.discounts
    expr: pl.Expr = pl.lit(1.0)
    for mode, factor in factors.items():
        expr = pl.when(pl.col("sharing_mode") == mode).then(pl.lit(float(factor))).otherwise(expr)
    return expr


def utilization_basis_expr(settings: Settings) -> pl.Expr:
    """True where a row's pool is billed utilization-weighted rather than by allocation."""
    default = settings.sharing.billing_basis == "utilization"
    utilization = [p for p, b in settings.sharing.pool_billing_basis.items() if b == "utilization"]
    allocation = [p for p, b in settings.sharing.pool_billing_basis.items() if b == "allocation"]
    return (
        pl.when(pl.col("pool").is_in(utilization)).then(pl.lit(True))
        .when(pl.col("pool").is_in(allocation)).then(pl.lit(False))
        .otherwise(pl.lit(default))
    )
