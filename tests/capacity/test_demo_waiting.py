"""The demo's capacity-now table and top pending reasons (`gpuledger.commands._demo_waiting`).

Cases, on a simulated fleet (the dashboards' small demo warehouse):
- the simulator's pending scenario lands in a team namespace, parsed by the collector's code;
  every added workload is classified, and the printed counts per reason sum to the added ones;
- the capacity table prints, and its whole-GPU `ready` equals the nodes' allocatable minus the
  running pods' requests, summed here from the stored inventory; HAMi memory and cores left are,
  per card, its memory (100 % cores) minus the allocations alive on it at the newest
  observation, and `ready` is the largest card's (never the sum: a pod takes both from one card);
- the bill's inputs are untouched (no node, queue or pod added);
- the team page's Pending panel lists the team's waiting workloads (another team's: none).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpuledger.analytics.waiting.fleet import why_document
from gpuledger.commands._demo_waiting import add_waiting, print_waiting
from gpuledger.dashboards.capacity_data import fleet_now
from gpuledger.simulator import pending as scenario
from gpuledger.warehouse import Warehouse
from tests.actuator.conftest import make_settings
from tests.capacity.free_now import hami_left, whole_gpus_free
from tests.dashboards.conftest import build_demo_warehouse


class _Echo:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def echo(self, text: str = "") -> None:
        self.lines.extend(str(text).splitlines())  # what `Context.echo` prints


def test_demo_prints_capacity_and_top_reasons(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")  # the example details wrap at spaces, never cut
    path = build_demo_warehouse(tmp_path / "demo.duckdb", gpus=32)
    settings = make_settings()
    echo = _Echo()
    echo.settings = settings  # type: ignore[attr-defined]
    with Warehouse.open(path) as wh:
        counts = {t: wh.count(t) for t in ("nodes", "pods", "queues", "gpus")}
        print_waiting(wh, echo)  # type: ignore[arg-type]
        assert {t: wh.count(t) for t in counts} == counts
        fleet = fleet_now(wh, settings)
        whole = whole_gpus_free(wh)
        mem_left, cores_left = hami_left(wh)
        alive = wh.count("vgpu_allocations")
    assert mem_left and alive  # the fixture really shares HAMi cards
    # per card, never summed: a HAMi pod takes its memory and cores from one card
    hami = {r.shape: r for r in fleet.capacity if r.shape.startswith("hami gpu")}
    for shape, left in (("hami gpumem MiB", mem_left), ("hami gpucores %", cores_left)):
        assert hami[shape].ready == max(left.values())
        assert {card.split("/")[-1]: free for card, free in hami[shape].per_card} == {
            u: f for u, f in left.items() if f > 0}
    assert len(mem_left) > 1 and hami["hami gpumem MiB"].ready < sum(mem_left.values())
    text = "\n".join(echo.lines)
    assert "Capacity now" in text and "Top pending reasons" in text
    waiting = fleet.waiting()
    assert len(waiting) == len([k for k in scenario.EXPECTED])
    assert max(len(line) for line in echo.lines) <= 80
    flat = " ".join(text.split())
    doc = why_document(fleet, fleet.at, basis=settings.sharing.mig_share_basis)
    shown = [r for r in doc["waiting"] if f"e.g. {r['name']}: " in flat]
    assert shown and all(" ".join(r["detail"].split()) in flat for r in shown)
    printed = [int(m.group(1)) for line in echo.lines if (m := re.match(r"\s+(\d+)\s{2}\S", line))]
    assert sum(printed) == len(waiting)
    assert sum(r.ready for r in fleet.capacity if r.shape == "whole GPU") == whole


def _ids(node: object) -> dict[str, object]:
    """Every component of a Dash tree by id."""
    found: dict[str, object] = {}
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, (list, tuple)):
            stack.extend(item)
            continue
        if getattr(item, "id", None):
            found[str(item.id)] = item  # type: ignore[attr-defined]
        children = getattr(item, "children", None)
        if children is not None:
            stack.append(children)
    return found


def test_team_page_shows_its_pending_workloads(tmp_path: Path) -> None:
    """The lead's team page lists the team's waiting workloads with their reasons (the scenario
    lands in the first team namespace, labelled with that team); another team's page has none."""
    from gpuledger.dashboards.app import create_app
    from gpuledger.dashboards.pages import team
    from gpuledger.dashboards.pages.common import PageContext
    from gpuledger.dashboards.state import ViewState
    from tests.dashboards.conftest import settings_with_roles, store_results
    from tests.dashboards.test_pages import ADMIN_P, PERIOD

    path = build_demo_warehouse(tmp_path / "demo.duckdb", gpus=32)
    with Warehouse.open(path) as wh:
        added = add_waiting(wh)
        first_team = wh.query("SELECT team FROM namespaces WHERE team IS NOT NULL AND team <> '' "
                              "ORDER BY namespace LIMIT 1")["team"][0]
    assert added == len(scenario.EXPECTED)
    app = create_app(settings_with_roles(), store_results(path), background=False, cache_dir=tmp_path / "c")
    try:
        for name, expect in ((first_team, added), (next(t for t in ("nlp", "vision", "research")
                                                        if t != first_team), 0)):
            page = team.show(PageContext(ADMIN_P, ViewState(period=PERIOD, team=name), app.data, app.settings))
            ids = _ids(page)
            assert "team-pending" in ids and "pending-line" in ids
            assert str(ids["pending-line"].children).startswith(f"{expect} waiting")  # type: ignore[attr-defined]
    finally:
        app.close()
