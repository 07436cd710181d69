"""Money as people and spreadsheets read it: the currency's own decimals, never float noise.

Why here: a CSV cell `21318.38142857144` or `1.9000000000000001` (issue 32) is a float printed
whole; finance imports it and the statement's total no longer matches to the cent. Every CSV
that carries money writes it through `fixed` with the currency's decimals from the CLDR (ISO 4217
minor units: USD and EUR 2, JPY 0, BHD 3), read through Babel rather than a hand-kept table.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from typing import Any


@cache
def decimals(currency: str) -> int:
    """The currency's minor-unit digits (2 for an unknown code, as most currencies have)."""
    from babel.numbers import get_currency_precision

    try:
        return int(get_currency_precision(currency.upper()))
    except Exception:  # babel answers 2 for unknown codes; a broken locale data file, too
        return 2


def fixed(value: float | None, currency: str) -> str:
    """`value` as plain fixed-point text with the currency's decimals ("" for None): what a
    money cell of a CSV holds (no thousands separators, a dot for the decimals)."""
    if value is None:
        return ""
    places = decimals(currency)
    return f"{round(float(value), places) + 0.0:.{places}f}"  # + 0.0: no "-0.00"


def fixed_columns(frame: Any, columns: Iterable[str], currency: str) -> Any:
    """A polars frame with its money `columns` (those it has) as `fixed` text: what a money CSV
    writes (`frame.write_csv()` of the result)."""
    import polars as pl

    cash = [c for c in columns if c in frame.columns]
    return frame.with_columns(
        pl.col(c).map_elements(lambda v: fixed(v, currency), return_dtype=pl.String)
        for c in cash)
