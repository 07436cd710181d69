"""One colour per team and one per GPU model, the same on every chart and every page.

Why not "the i-th colour of the names on this chart" (what the figures did): the same team was
blue on one chart and orange on the next, since each chart saw a different set of names. Here
a name's colour depends on the name: known GPU models have fixed colours; any other name
hashes (CRC-32, stable across processes, unlike `hash()`) into a 20-colour palette. Two names
of one chart that hash alike are told apart by probing to the next free colour, in sorted
order, so a chart never shows two teams in one colour while a name keeps its colour wherever
it does not collide.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable

PALETTE: tuple[str, ...] = (
    "#F3C300", "#875692", "#F38400", "#A1CAF1", "#BE0032", "#C2B280", "#00A3A3", "#008856",
    "#E68FAC", "#0067A5", "#F99379", "#604E97", "#F6A600", "#B3446C", "#DCD300", "#882D17",
    "#8DB600", "#654522", "#E25822", "#2B3D26",
)
"""Kelly's colours of maximum contrast (K. L. Kelly, "Twenty-two colors of maximum contrast",
1965), white and black left out and the grey swapped for a teal (grey is `unallocated`'s): 20
hues that stay apart when 18 teams stack on one chart (issue 32: the old 24 held four purples)."""
MODEL_COLOURS: dict[str, str] = {
    "H200-141GB": "#7c3aed", "H100-80GB": "#2563eb", "A100-80GB": "#16a34a",
    "A100-SXM4-40GB": "#f97316", "B200-180GB": "#dc2626", "L40S-48GB": "#0891b2",
}
SPECIAL_COLOURS: dict[str, str] = {
    "unallocated": "#9ca3af", "unattributed": "#d6d3d1", "sharing_discount": "#e5e7eb",
}


def _slot(name: str) -> int:
    return zlib.crc32(name.encode()) % len(PALETTE)


def colours_for(names: Iterable[str], fixed: dict[str, str] | None = None) -> dict[str, str]:
    """Distinct colours for `names` (see module docstring); `fixed` colours win."""
    fixed = {**SPECIAL_COLOURS, **(fixed or {})}
    out: dict[str, str] = {}
    used: set[str] = set()
    for name in sorted(set(names)):
        if name in fixed:
            out[name] = fixed[name]
            used.add(fixed[name])
    for name in sorted(set(names) - set(out)):
        slot = _slot(name)
        for step in range(len(PALETTE)):
            colour = PALETTE[(slot + step) % len(PALETTE)]
            if colour not in used:
                break
        out[name] = colour
        used.add(colour)
    return out


def team_colours(teams: Iterable[str]) -> dict[str, str]:
    return colours_for(teams)


def model_colours(models: Iterable[str]) -> dict[str, str]:
    return colours_for(models, MODEL_COLOURS)
