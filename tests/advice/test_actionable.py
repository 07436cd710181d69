"""Advice worth reading (issue 32): `analytics.advice.actionable.split`.

Cases:
- rows saving at least the floor are listed, largest first; a risk row (`overcommit_past_knee`)
  is listed whatever it saves; the rest are counted per kind with their summed saving, and read
  "N Deployments already right-sized" for autoscaling;
- listed + counted rows are every row, and listed + counted savings are every row's saving
  (sums computed here);
- floor 0 lists every row;
- one order whatever the input order: workload rows of equal saving (no scope) are ordered by
  kind, team, namespace, workload, so two runs that build their frames in another order (a
  table, then `-o json`) list the same top N (issue 32);
- the stated total is the listed rows' saving only: a below-floor row's negative catalog saving
  is not in it, a risk row's unknown saving (`None`) is listed last, adds nothing, never 0;
- an unpriced row of any kind (a `dra_profile` row: which DeviceClasses to offer, no price) is
  listed "not priced", never counted as saving too little (decision 0213);
- a counted line reads singular for one row ("1 MIG model whose catalog saves too little", "1
  shared pool already at its best ratio"), plural for more, for every counted kind;
- `floor_of`: the settings' floor, 0 for "every row".
"""

from __future__ import annotations

import pytest

from gpuledger.analytics.advice.actionable import floor_of, split


def _row(kind: str, scope: str, saving: float | None) -> dict[str, object]:
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
    nothing = split([r for r in ROWS if r["monthly_saving"] != 0.4], 1.0).quiet[0]
    assert nothing.line("USD") == "2 Deployments already right-sized"  # not "(USD 0.00/month …)"
    assert len(shown.rows) + shown.hidden == len(ROWS)
    listed = sum(float(str(r["monthly_saving"])) for r in shown.rows)
    assert listed + quiet.monthly_saving == pytest.approx(4185.84 - 120.0 + 1106.51 + 3170.29 + 0.4)


def test_floor_zero_lists_everything() -> None:
    shown = split(ROWS, 0.0)
    assert len(shown.rows) == len(ROWS) and shown.quiet == []


def _workload(team: str, workload: str, saving: float) -> dict[str, object]:
    return {"kind": "scale_down_when_idle", "team": team, "namespace": team, "workload": workload,
            "monthly_saving": saving}


def test_one_order_whatever_the_input_order() -> None:
    rows = [_workload("nlp", "b", 74.3), _workload("ads", "z", 74.3), _workload("nlp", "a", 74.3),
            _workload("vision", "q", 90.0)]
    first = [(r["team"], r["workload"]) for r in split(rows, 1.0).rows]
    again = [(r["team"], r["workload"]) for r in split(list(reversed(rows)), 1.0).rows]
    assert first == again == [("vision", "q"), ("ads", "z"), ("nlp", "a"), ("nlp", "b")]


def test_total_is_the_listed_rows_and_unknown_is_not_zero() -> None:
    rows = [*ROWS, _row("profile_catalog", "A100", -84.1), _row("overcommit_past_knee", "pool-c", None)]
    shown = split(rows, 1.0)
    assert shown.total == pytest.approx(4185.84 - 120.0 + 1106.51 + 3170.29)  # listed, priced rows
    assert shown.rows[-1]["scope"] == "pool-c" and shown.rows[-1]["monthly_saving"] is None
    assert sum(q.count for q in shown.quiet) == 4  # three autoscaling rows and the costly catalog
    catalog = next(q for q in shown.quiet if q.kind == "profile_catalog")
    assert catalog.line("USD").endswith("(USD -84.10/month; acting on it would cost money)")


def test_unpriced_rows_are_listed_not_counted_as_too_little() -> None:
    rows = [*ROWS, _row("dra_profile", "3g.40gb", None), _row("dra_profile", "1g.10gb", None)]
    shown = split(rows, 1.0)
    assert [r["scope"] for r in shown.rows[-2:]] == ["1g.10gb", "3g.40gb"]  # unknown last, by scope
    assert all(q.kind != "dra_profile" for q in shown.quiet)
    assert shown.total == pytest.approx(4185.84 - 120.0 + 1106.51 + 3170.29)
    from gpuledger.analytics.advice.actionable import unpriced_lines

    lines = unpriced_lines([*shown.rows, _row("overcommit_past_knee", "pool-c", None)])
    assert lines == [
        '2 DRA device classes listed not priced (saving "-"): which DeviceClasses to offer DRA MIG '
        "claims; offering one has no saving to price",
        '1 risk listed not priced (saving "-"): a pool past its overcommit knee loses work; shedding '
        "replicas has no saving to show"]


def test_counted_line_singular_and_plural() -> None:
    one = split([_row("profile_catalog", "H100", 3.0), _row("overcommit_ratio", "p", 0.0),
                 _row("odd_kind", "x", 0.0)], 25.0)
    assert [q.line("USD") for q in one.quiet] == [
        "1 odd_kind row under the floor",
        "1 shared pool already at its best ratio",
        "1 MIG model whose catalog saves too little (USD 3.00/month)"]
    two = split([_row("profile_catalog", "H100", 3.0), _row("profile_catalog", "A100", 4.0)], 25.0)
    assert two.quiet[0].line("USD") == "2 MIG models whose catalog saves too little (USD 7.00/month together)"
    costly = split([_row("profile_catalog", "H100", -84.1)], 25.0).quiet[0].line("USD")
    assert costly.endswith("(USD -84.10/month; acting on it would cost money)")
    from gpuledger.analytics.advice.actionable import QUIET

    for kind, (single, many) in QUIET.items():  # every kind has both forms, and they differ
        assert single != many, kind
        assert split([_row(kind, "s", 0.0)], 25.0).quiet[0].label == single


def test_floor_of() -> None:
    from gpuledger.core.config import Settings

    settings = Settings.model_validate({"advice": {"min_monthly_saving": 25.0}})
    assert (floor_of(settings), floor_of(settings, every=True)) == (25.0, 0.0)
