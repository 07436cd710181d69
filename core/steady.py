"""Figures summed in no set order, made the same double on every run.

Why: the bill's detail comes in no set order and DuckDB aggregates in parallel, so a sum (held
hours, activity per level) differs between runs in its last bits. A reason that rounds it for
people then read "idle 67% of 29.0 held hours" on one run and "... 29.1 ..." on the next, at a
boundary (29.05 h = 1,743 minutes; issue 32), and an order by it could swap equal rows. Rounded
to `STEADY_DECIMALS`, far below any figure people read and far above that noise, the sum is the
same double every run, and so is every figure, reason and order built on it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

STEADY_DECIMALS = 9
"""Decimals kept of a sum taken in no set order (the noise is ~1e-16 relative; people read 3)."""


def steady(frame: pl.DataFrame) -> pl.DataFrame:
    """Every float column of `frame` rounded to `STEADY_DECIMALS` (module docstring)."""
    import polars as pl

    floats = [c for c, t in frame.schema.items() if t.is_float()]
    return frame.with_columns(pl.col(c).round(STEADY_DECIMALS) for c in floats)
