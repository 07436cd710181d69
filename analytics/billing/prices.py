"""Prices laid out per model and UTC day, and the per-row factors the bill applies.

Price-book entries take effect at 00:00 UTC of their date, so one price holds for a whole day:
pricing per day splits a period exactly at a price change. Where a price comes from (the
configured book, else the default catalog, else nowhere) is `core.pricing`.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, date, datetime, time

import polars as pl

from gpuledger.core.config import Settings
from gpuledger.core.pricing import PriceBook
from gpuledger.core.window import Window


def price_table(
    book: PriceBook, models: Iterable[str], window: Window, *, strict: bool = False
) -> pl.DataFrame:
    """`model`, `day`, `unit_price`, `unpriced` for every day of `window`.

    A model with no price anywhere (neither `price_book` nor the default catalog) is priced at
    zero with `unpriced` set, so one unknown card never blocks a bill; with `strict` it raises
    the `ConfigError` instead. A configured model with a gap in its dates always raises: that
    is a mistake in the operator's own price book, not a model nobody priced.
    """
    rows: list[tuple[str, date, float, bool]] = []
    for model in sorted({m for m in models if m is not None}):
        if book.source(model) is None and not strict:
            rows.extend((model, day.start.date(), 0.0, True) for day in window.days())
            continue
        for span in book.spans(model, window):
            assert span.end is not None
            for day in Window(span.start, span.end).days():
                rows.append((model, day.start.date(), span.unit_price, False))
    schema = {"model": pl.String, "day": pl.Date, "unit_price": pl.Float64, "unpriced": pl.Boolean}
    return pl.DataFrame(rows, schema=schema, orient="row")


def price_sources(book: PriceBook, models: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """The models priced from the default catalog and those with no price at all (sorted)."""
    known = sorted({m for m in models if m is not None})
    return {
        "catalog": tuple(m for m in known if book.source(m) == "catalog"),
        "unpriced": tuple(m for m in known if book.source(m) is None),
    }


def price_changes(settings: Settings, window: Window) -> list[datetime]:
    """The moments inside `window` where some model's price may change: every configured
    `effective_from` (00:00 UTC). Catalog prices and unpriced models never change inside a
    bill, so between two of these moments every model has one price (the lines grain sums the
    roll-up per such period rather than per day, docs/decisions/0133)."""
    moments = {datetime.combine(e.effective_from, time(), tzinfo=UTC) for e in settings.price_book}
    return sorted(m for m in moments if window.start < m < window.end)


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
