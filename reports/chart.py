"""A daily-cost bar chart drawn as plain inline SVG.

Why hand-drawn: WeasyPrint renders inline SVG natively, so the statement needs no plotting
library, no browser and no image files; the same markup shows in the HTML statement.
Each bar is one UTC day: the busy part of the cost below, the idle part stacked on top.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from html import escape

BUSY_COLOR = "#2f6fb3"
IDLE_COLOR = "#f0a04b"


@dataclass(frozen=True, slots=True)
class DayCost:
    day: date
    cost: float
    idle_cost: float


def nice_ticks(top: float, count: int = 4) -> list[float]:
    """Round axis ticks from 0 to at least `top` (1-2-5 steps), e.g. 0, 50, 100, 150."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    ticks = [0.0]
    while ticks[-1] < top - 1e-12:
        ticks.append(round(ticks[-1] + step, 10))
    return ticks


def _label(value: float) -> str:
    if value >= 10_000:
        return f"{value / 1000:,.0f}k"
    if value >= 1000:
        return f"{value / 1000:,.1f}k"
    return f"{value:,.0f}" if value >= 10 or value == 0 else f"{value:,.2f}"


def daily_cost_svg(
    days: Sequence[DayCost], currency: str, width: int = 640, height: int = 130
) -> str:
    """SVG markup for the bars; an empty sequence draws the axes with a 'no usage' note."""
    # 1. Plot area inside margins for the axis labels and legend.
    left, right, top, bottom = 46, 8, 18, 22
    plot_w, plot_h = width - left - right, height - top - bottom
    peak = max((d.cost for d in days), default=0.0)
    ticks = nice_ticks(peak)
    scale = plot_h / ticks[-1]
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="DejaVu Sans, sans-serif" font-size="9" '
        f'role="img" aria-label="Daily cost in {escape(currency)}">'
    ]
    # 2. Horizontal grid lines with their values.
    for tick in ticks:
        y = top + plot_h - tick * scale
        parts.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}" '
            f'stroke="#d9dde3" stroke-width="0.6"/>'
            f'<text x="{left - 4}" y="{y + 3:.1f}" text-anchor="end" fill="#555">{_label(tick)}</text>'
        )
    # 3. One stacked bar per day; label every few days so labels never collide.
    slot = plot_w / max(len(days), 1)
    bar = max(slot * 0.72, 1.0)
    every = max(1, math.ceil(len(days) / 16))
    for i, d in enumerate(days):
        x = left + i * slot + (slot - bar) / 2
        idle = min(max(d.idle_cost, 0.0), max(d.cost, 0.0))
        busy = max(d.cost, 0.0) - idle
        y_busy = top + plot_h - busy * scale
        y_idle = y_busy - idle * scale
        title = escape(f"{d.day.isoformat()}: {d.cost:,.2f} {currency} ({idle:,.2f} idle)")
        parts.append(
            f'<g><title>{title}</title>'
            f'<rect x="{x:.2f}" y="{y_busy:.2f}" width="{bar:.2f}" height="{busy * scale:.2f}" '
            f'fill="{BUSY_COLOR}"/>'
            f'<rect x="{x:.2f}" y="{y_idle:.2f}" width="{bar:.2f}" height="{idle * scale:.2f}" '
            f'fill="{IDLE_COLOR}"/></g>'
        )
        if i % every == 0:
            parts.append(
                f'<text x="{x + bar / 2:.2f}" y="{height - bottom + 11}" text-anchor="middle" '
                f'fill="#555">{d.day.day}</text>'
            )
    if not days:
        parts.append(
            f'<text x="{left + plot_w / 2}" y="{top + plot_h / 2}" text-anchor="middle" '
            f'fill="#777">no usage this period</text>'
        )
    # 4. Baseline and legend.
    parts.append(_baseline_and_legend(currency, left, width - right, top + plot_h))
    return "".join(parts)


def _baseline_and_legend(currency: str, left: int, right_x: int, base_y: int) -> str:
    """The x axis line at `base_y`, the busy/idle legend and the unit, closing the SVG."""
    return (
        f'<line x1="{left}" y1="{base_y}" x2="{right_x}" y2="{base_y}" stroke="#888"/>'
        f'<rect x="{left}" y="2" width="9" height="9" fill="{BUSY_COLOR}"/>'
        f'<text x="{left + 13}" y="10" fill="#333">busy</text>'
        f'<rect x="{left + 48}" y="2" width="9" height="9" fill="{IDLE_COLOR}"/>'
        f'<text x="{left + 61}" y="10" fill="#333">idle (allocated, unused)</text>'
        f'<text x="{right_x}" y="10" text-anchor="end" fill="#333">'
        f"{escape(currency)} per UTC day</text>"
        "</svg>"
    )
