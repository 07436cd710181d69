"""Advice worth reading (issue 32): `analytics.advice.actionable.split`.

Cases:
- rows saving at least the floor are listed, largest first; a risk row (`overcommit_past_knee`)
  is listed whatever it saves; the rest are counted per kind with their summed saving, and read
  "N Deployments already right-sized" for autoscaling;
- listed + counted rows are every row, and listed + counted savings are every row's saving
  (sums computed here);
- floor 0 lists every row.
"""

from __future__ import annotations

import pytest

from gpuledger.analytics.advice.actionable import split


def _row(kind: str, scope: str, saving: float) -> dict[str, object]:
    return {"kind": kind, "scope": scope, "current": "-", "recommended": "-", "monthly_saving": saving,
            "reason": "because"}


ROWS = [
    _row("autoscaling", "a/x", 0.0), _row("autoscaling", "a/y", 0.0), _row("autoscaling", "a/z", 0.4),
    _row("overcommit_ratio", "pool-a", 4185.84), _row("overcommit_past_knee", "pool-b", -120.0),
    _row("profile_catalog", "H100", 1106.51), _row("fragmentation_rebuild", "node-1", 3170.29),
]


def test_lists_money_and_risk_counts_the_rest() -> None:
    shown = split(ROWS, 1.0)
    assert [r["scope"] for r in shown.rows] == ["pool-a", "node-1", "H100", "pool-b"]  # by money; risk kept
    [quiet] = shown.quiet
    assert (quiet.kind, quiet.count) == ("autoscaling", 3)
    assert quiet.monthly_saving == pytest.approx(0.4)
    assert quiet.line("USD") == "3 Deployments already right-sized (USD 0.40/month together)"
    assert len(shown.rows) + shown.hidden == len(ROWS)
    listed = sum(float(str(r["monthly_saving"])) for r in shown.rows)
    assert listed + quiet.monthly_saving == pytest.approx(4185.84 - 120.0 + 1106.51 + 3170.29 + 0.4)


def test_floor_zero_lists_everything() -> None:
    shown = split(ROWS, 0.0)
    assert len(shown.rows) == len(ROWS) and shown.quiet == []
