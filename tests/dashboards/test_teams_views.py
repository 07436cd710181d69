"""The views behind Teams, the budget tile, the Fleet headline and the Queues page (no browser).

Cases:
- Teams rows: one per billed line, each team's cost its bill line, total = fleet cost; a
  team's saving is the sum of its recommendations; a lead gets only their row and no total;
  an empty month says where data exists;
- the Team selector shows the team on display when the URL names none (a lead's own team);
- an admin has no team of their own: "My team" without a team opens the fleet view (page
  `/fleet`, its nav link points there, no team chosen for them), not the alphabetically first
  team (issue 32); with a team in the URL it shows that team;
- the team page's budget tile: used, left and the month-end forecast of `budget_status`,
  and the daily chart carries the cumulative and the budget line;
- Fleet's waste headline = unallocated cost + teams' idle cost, as a share of the fleet cost,
  computed here from the bill's lines independently;
- Queues explains its units;
- one colour per team: the same name has the same colour in any chart's set of names.
"""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest

from gpuledger.analytics.billing.special_lines import SPECIAL_LINES
from gpuledger.core.access import resolve_roles
from gpuledger.dashboards.colours import team_colours
from gpuledger.dashboards.pages import fleet, queues, team, teams
from gpuledger.dashboards.pages.common import PageContext
from gpuledger.dashboards.shell import sync
from gpuledger.dashboards.state import ViewState
from tests.dashboards.conftest import ADMIN, LEAD, LEAD_TEAM, PERIOD, settings_with_roles

SETTINGS = settings_with_roles()
ADMIN_P = resolve_roles(ADMIN, ("platform-admins",), SETTINGS.access)
LEAD_P = resolve_roles(LEAD, (), SETTINGS.access)


def ctx(app: Any, principal: Any, period: str = PERIOD, **state: Any) -> PageContext:
    return PageContext(principal, ViewState(period=period, **state), app.data, app.settings)


def test_teams_rows(shared_app: Any, reference_bills: dict) -> None:
    bill = reference_bills[(PERIOD, ("team",))]
    v = teams.view(ctx(shared_app, ADMIN_P))
    expected = dict(bill.lines.group_by("team").agg(pl.col("cost").sum()).iter_rows())
    got = dict(v.rows.select("team", "cost").iter_rows())
    assert got.keys() == expected.keys()
    assert all(round(got[t], 2) == round(expected[t], 2) for t in expected)
    assert round(float(v.rows["cost"].sum()), 2) == round(bill.fleet_cost, 2) == round(v.fleet_cost or 0, 2)
    recs = shared_app.data.recommendations(PERIOD)
    saving = float(recs.filter(pl.col("team") == LEAD_TEAM)["monthly_saving"].sum())
    assert v.rows.filter(pl.col("team") == LEAD_TEAM)["saving"].item() == pytest.approx(saving)
    assert v.rows.filter(pl.col("special"))["team"].to_list() == [t for t in SPECIAL_LINES if t in expected]
    mine = teams.view(ctx(shared_app, LEAD_P))
    assert mine.rows["team"].to_list() == [LEAD_TEAM] and mine.fleet_cost is None
    assert teams.overview_csv(ctx(shared_app, LEAD_P)).count("\n") == 2  # header + one row


def test_empty_month_says_where_data_is(shared_app: Any) -> None:
    v = teams.view(ctx(shared_app, ADMIN_P, period="2026-08"))
    assert v.empty_note is not None and "2026-10 to 2026-11" in v.empty_note


def test_team_selector_shows_the_team_on_display(shared_app: Any) -> None:
    result = sync(shared_app.data, LEAD_P, "/team", f"?period={PERIOD}", trigger="url",
                  controls=(None, None, None))
    shown = team.view(ctx(shared_app, LEAD_P)).team
    assert result.state.team == shown == LEAD_TEAM


def test_admin_my_team_is_the_fleet(shared_app: Any) -> None:
    from gpuledger.dashboards.registry import PAGES

    result = sync(shared_app.data, ADMIN_P, "/team", f"?period={PERIOD}", trigger="url",
                  controls=(None, None, None))
    assert (result.page, result.state.team) == ("/fleet", None)
    my_team = [p.path for p in PAGES].index("/team")
    assert result.hrefs[my_team] == f"/fleet?period={PERIOD}"
    chosen = sync(shared_app.data, ADMIN_P, "/team", f"?period={PERIOD}&team={LEAD_TEAM}", trigger="url",
                  controls=(None, None, None))
    assert (chosen.page, chosen.state.team) == ("/team", LEAD_TEAM)
    assert chosen.hrefs[my_team].startswith("/team?")


def test_budget_tile_and_line(shared_app: Any, reference_bills: dict) -> None:
    v = team.view(ctx(shared_app, LEAD_P, team=LEAD_TEAM))
    cost = float(reference_bills[(PERIOD, ("team",))].lines.filter(pl.col("team") == LEAD_TEAM)["cost"].sum())
    b = v.budget_state
    assert b is not None and b["budget"] == 400.0
    assert b["used"] == pytest.approx(round(cost, 2)) and b["left"] == pytest.approx(400.0 - round(cost, 2))
    assert b["forecast"] >= b["used"]
    figure = team._daily_figure(v, "x")
    names = [trace.get("name", "") for trace in figure["data"]]
    assert "cumulative cost" in names and any(n.startswith("budget 400") for n in names)
    assert v.cumulative is not None and v.cumulative["cumulative"].to_list()[-1] == pytest.approx(
        float(v.daily["cost"].sum()))


def test_fleet_waste_headline(shared_app: Any, reference_bills: dict) -> None:
    lines = reference_bills[(PERIOD, ("team",))].lines
    unallocated = float(lines.filter(pl.col("team") == "unallocated")["list_cost"].sum())
    idle = float(lines.filter(pl.col("team") != "unallocated")["idle_cost"].sum())
    v = fleet.view(ctx(shared_app, ADMIN_P))
    assert v.totals["waste_waste"] == pytest.approx(unallocated + idle, abs=0.01)
    assert v.totals["waste_share"] == pytest.approx((unallocated + idle) / v.totals["fleet_cost"], rel=1e-6)
    first = fleet.render(v).children[0]
    assert first.id == "fleet-waste" and "of the fleet cost" in str(first.children)


def test_queues_explain_units(shared_app: Any) -> None:
    page = queues.render(queues.view(ctx(shared_app, ADMIN_P)))
    units = [c for c in page.children if getattr(c, "id", None) == "queue-units"]
    assert units and "GPU-equivalents" in units[0].children and "3/7" in units[0].children


def test_team_colours_are_stable() -> None:
    many = [f"team{i:02d}" for i in range(13)]
    full = team_colours(many)
    assert len(set(full.values())) == 13  # distinct within a chart
    assert team_colours(["team03"])["team03"] == team_colours(["team03", "zeta"])["team03"]


def test_eighteen_series_keep_apart() -> None:
    """18 stacked teams (issue 32: they reused purples): 18 distinct colours, at most two of
    them purple (hue 250-320 degrees, computed here with colorsys), none the special lines'."""
    import colorsys

    from gpuledger.dashboards.colours import SPECIAL_COLOURS

    colours = team_colours([f"team-{i:02d}" for i in range(18)]).values()
    assert len(set(colours)) == 18 and not set(colours) & set(SPECIAL_COLOURS.values())

    def hue(colour: str) -> float:
        r, g, b = (int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5))
        return colorsys.rgb_to_hsv(r, g, b)[0] * 360

    assert sum(250 <= hue(c) <= 320 for c in colours) <= 2, sorted(colours)
