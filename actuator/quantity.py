"""Kubernetes resource quantities ("8", "500m", "64Gi", "1e3") as exact numbers and back.

Why exact (`Fraction`): a quota is compared with the plan's recorded old value before it is
overwritten; float parsing of "0.1" or "100m" must not make equal values look different.
Parsing is the Kubernetes client's own (`kubernetes.utils.parse_quantity`: every suffix the API
server accepts, `n` and `u` included, as an exact `Decimal`); this module adds only what the
client lets through and a quota must not hold (spaces inside, `1_000`, NaN and infinities) and
the one-line `InputError` naming where the value came from.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

from gpuledger.core.errors import InputError


def parse_quantity(value: str | int | float, *, where: str = "quantity") -> Fraction:
    """The exact value of a quantity; `InputError` naming `where` when it is not one."""
    from kubernetes.utils import parse_quantity as client_parse

    if isinstance(value, bool):
        raise InputError(f"{where}: expected a quantity, got {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(str(value))
    text = value.strip()
    number: Decimal | None = None
    # Python's Decimal (under the client) takes "5 ", "1_000" and "NaN"; Kubernetes does not.
    if text and not any(c.isspace() or c == "_" for c in text):
        try:
            number = client_parse(text)
        except (ValueError, ArithmeticError):
            number = None
    if number is None or not number.is_finite():
        raise InputError(f"{where}: {value!r} is not a Kubernetes quantity (e.g. 8, 500m, 64Gi)")
    return Fraction(number)


def same_quantity(a: str | int | float | None, b: str | int | float | None) -> bool:
    """Equal as quantities; None (unset) equals only None."""
    if a is None or b is None:
        return a is None and b is None
    return parse_quantity(a) == parse_quantity(b)


def format_quantity(value: float | Fraction) -> int | str:
    """The form to write: an int when whole, else milli-units ("1500m"), else a decimal string."""
    exact = Fraction(str(value)) if isinstance(value, float) else value
    if exact.denominator == 1:
        return int(exact)
    milli = exact * 1000
    if milli.denominator == 1:
        return f"{int(milli)}m"
    return str(float(exact))
