"""The fleet statement's "Fleet advice" section: the top advice rows of each kind.

The rows come from `analytics.advice.run.run_advice`, the call `gpuledger recommend --kind`
makes, so the statement and the CLI never disagree on what is proposed. Only the top
`PER_KIND` rows of each row kind are shown, of the rows the CLI lists (the floor and the order
of `analytics.advice.actionable`): the statement points at the proposals worth reading, the CLI
has them all with their evidence.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from gpuledger.analytics.advice import FLEET_SHAPING_KINDS, KINDS
from gpuledger.analytics.advice.actionable import floor_of, priced, saving, split
from gpuledger.analytics.advice.run import Advice, run_advice
from gpuledger.analytics.billing.bill import Bill
from gpuledger.core.config import Settings
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.day_parts import kept_day_parts

STATEMENT_KINDS = FLEET_SHAPING_KINDS
PER_KIND = 3


@dataclass(frozen=True)
class FleetAdvice:
    """One proposal on the fleet statement."""

    kind: str            # the advice row's kind (`overcommit_ratio`, `profile_catalog`, ...)
    subject: str         # the model, pool, node or deployment the proposal is about
    proposal: str        # "current -> recommended"
    monthly_saving: float | None  # None: not priced (a risk row), never shown as 0


def top_rows(rows: list[dict[str, object]], floor: float, per_kind: int = PER_KIND) -> list[FleetAdvice]:
    """At most `per_kind` of the actionable rows per kind (`analytics.advice.actionable`: the
    floor and the order every surface uses), in that order."""
    grouped: dict[str, list[dict[str, object]]] = defaultdict(list)
    for row in split(rows, floor).rows:
        grouped[str(row["kind"])].append(row)
    return [FleetAdvice(kind, str(r["scope"]), f"{r['current']} -> {r['recommended']}",
                        saving(r) if priced(r) else None)
            for kind, found in grouped.items() for r in found[:per_kind]]


def fleet_advice(wh: Warehouse, window: Window, settings: Settings,
                 computed: Sequence[Advice] | None = None, *, bill: Bill | None = None,
                 usage: pl.DataFrame | None = None) -> list[FleetAdvice]:
    """The statement's advice rows for `window` (empty when no kind proposes anything).

    `computed`: the kinds a caller already ran for this same window and warehouse state (the
    demo prints every kind just before it issues the report); the statement then takes its
    kinds from them instead of running the analyses again (at 256 GPUs a month, minutes).
    `bill`: the report's bill, which the kinds that price from a bill read (`run_advice`), so
    the statement's advice carries the report's rules (`--as-computed` too); `usage`: that
    bill's per-allocation usage, read once for the report (`run_advice`). The kinds run
    through the warehouse's day parts: after the chart's refreshes a report reads only the days
    whose inputs moved since (`warehouse.day_parts`)."""
    have = {advice.kind: advice for advice in computed or () if advice.kind in STATEMENT_KINDS}
    missing = tuple(kind for kind in STATEMENT_KINDS if kind not in have)
    if missing:  # (run_advice of no kinds would run them all)
        with kept_day_parts(wh.path) as days:
            ran = run_advice(wh, window, settings, missing, bill=bill, usage=usage, days=days)
        have.update((advice.kind, advice) for advice in ran)
    found = [have[kind] for kind in KINDS.names() if kind in have]  # registry order, as run_advice gives
    return top_rows([row for advice in found for row in advice.rows], floor_of(settings))
