"""Kubernetes resource quantities ("8", "500m", "64Gi", "1e3") as exact numbers and back.

Why exact (`Fraction`): a quota is compared with the plan's recorded old value before it is
overwritten; float parsing of "0.1" or "100m" must not make equal values look different.
"""

from __future__ import annotations

import re
from fractions import Fraction

from gpuledger.core.errors import InputError

_SUFFIX = {
    "": Fraction(1), "m": Fraction(1, 1000), "k": Fraction(10**3), "M": Fraction(10**6),
    "G": Fraction(10**9), "T": Fraction(10**12), "P": Fraction(10**15), "E": Fraction(10**18),
    "Ki": Fraction(2**10), "Mi": Fraction(2**20), "Gi": Fraction(2**30), "Ti": Fraction(2**40),
    "Pi": Fraction(2**50), "Ei": Fraction(2**60),
}
_PATTERN = re.compile(
    r"^(?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+))(?:(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[mkMGTPE])|[eE](?P<exp>[+-]?\d+))?$"
)


def parse_quantity(value: str | int | float, *, where: str = "quantity") -> Fraction:
    """The exact value of a quantity; `InputError` naming `where` when it is not one."""
    if isinstance(value, bool):
        raise InputError(f"{where}: expected a quantity, got {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(str(value))
    match = _PATTERN.match(value.strip())
    if not match:
        raise InputError(f"{where}: {value!r} is not a Kubernetes quantity (e.g. 8, 500m, 64Gi)")
    number = Fraction(match["num"])
    if match["exp"] is not None:
        return number * Fraction(10) ** int(match["exp"])
    return number * _SUFFIX[match["suffix"] or ""]


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
