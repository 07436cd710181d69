"""The fleet statement's "Fleet advice" section: the top advice rows of each kind.

The rows come from `analytics.advice.run.run_advice`, the call `gpuledger recommend --kind`
makes, so the statement and the CLI never disagree on what is proposed. Only the top
`PER_KIND` rows of each row kind (largest monthly saving first) are shown: the statement
points at the proposals worth reading, the CLI has them all with their evidence.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from gpuledger.analytics.advice.run import run_advice
from gpuledger.core.config import Settings
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse

STATEMENT_KINDS = ("profile-catalog", "fragmentation", "overcommit", "autoscaling")
"""The issue's four fleet-shaping kinds (the DRA kinds stay on the CLI and the dashboard)."""
PER_KIND = 3


@dataclass(frozen=True)
class FleetAdvice:
    """One proposal on the fleet statement."""

    kind: str            # the advice row's kind (`overcommit_ratio`, `profile_catalog`, ...)
    subject: str         # the model, pool, node or deployment the proposal is about
    proposal: str        # "current -> recommended"
    monthly_saving: float


def top_rows(rows: list[dict[str, object]], per_kind: int = PER_KIND) -> list[FleetAdvice]:
    """At most `per_kind` rows per kind, largest saving first (ties by subject: stable)."""
    grouped: dict[str, list[dict[str, object]]] = defaultdict(list)
    for row in rows:
        grouped[str(row["kind"])].append(row)
    out = []
    for kind, found in grouped.items():
        found.sort(key=lambda r: (-float(str(r["monthly_saving"])), str(r["scope"])))
        out += [FleetAdvice(kind, str(r["scope"]), f"{r['current']} -> {r['recommended']}",
                            float(str(r["monthly_saving"]))) for r in found[:per_kind]]
    return out


def fleet_advice(wh: Warehouse, window: Window, settings: Settings) -> list[FleetAdvice]:
    """The statement's advice rows for `window` (empty when no kind proposes anything)."""
    found = run_advice(wh, window, settings, STATEMENT_KINDS)
    return top_rows([row for advice in found for row in advice.rows])
