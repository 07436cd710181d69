"""`gpuledger mcp` through the official SDK's own client (`mcp.Client`), over both transports.

The server is the real command (`python -m gpuledger mcp`) on a small simulated warehouse
(the dashboard tests' demo fleet), with the dashboard tests' role map. Cases:
- streamable HTTP behind the proxy headers: the tools listed are bill, idle, recommendations,
  budgets and plans, every one read-only; an admin's bill has every team, and its team costs are
  `compute_bill`'s on the same file (computed here, not through the server); a lead's bill holds
  only their team and no fleet total; a lead's call for another team, and for plans, is refused
  with the reason; budgets for a lead are their team's only; no user header: refused;
- the tools are the API's endpoint table (`api_params.ENDPOINTS`, less the OpenAPI document),
  each taking that endpoint's parameters: capacity and why among them; capacity's whole-GPU
  `ready` is the exclusive nodes' allocatable minus the running pods' requests, summed here from
  the file; why lists the waiting workloads stored in the file (an admin: all of them; a lead:
  their team's only, another team's refused);
- stdio, as the operating-system account running it: bound to admin in `access.roles`, it lists
  the tools and bills every team; bound to a lead, another team's bill is refused.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from tests.dashboards.conftest import (
    ADMIN,
    LEAD,
    LEAD_TEAM,
    OTHER_TEAM,
    PERIOD,
    admin_headers,
    build_demo_warehouse,
    lead_headers,
    settings_with_roles,
    store_results,
)

TOOLS = {"bill", "idle", "recommendations", "budgets", "plans", "capacity", "why"}
ENV = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", str(Path.cwd()))}


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from gpuledger.commands._demo_waiting import add_waiting
    from gpuledger.warehouse import Warehouse

    path = build_demo_warehouse(tmp_path_factory.mktemp("mcp") / "warehouse.duckdb")
    with Warehouse.open(path) as wh:
        assert add_waiting(wh) > 0  # waiting workloads for `why` (the bill's inputs untouched)
    return store_results(path)


def _config(folder: Path, extra: list[dict[str, Any]]) -> Path:
    """The dashboard tests' role map (admins by group, `leo` leads nlp) plus `extra` bindings."""
    access = settings_with_roles().access
    roles = [{"subject": b.subject, "kind": b.kind, "role": b.role, **({"team": b.team} if b.team else {})}
             for b in access.roles]
    doc = {"access": {"proxy_addresses": list(access.proxy_addresses), "roles": roles + extra},
           "teams": {"budgets": {LEAD_TEAM: 400.0}}}
    path = folder / f"gpuledger-{len(list(folder.glob('*.yaml')))}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _team_costs(warehouse: Path) -> dict[str, float]:
    """Each team's cost, billed here on the file (not by the server under test)."""
    from gpuledger.analytics.billing.bill import compute_bill
    from gpuledger.core.period import Period
    from gpuledger.warehouse import Warehouse

    with Warehouse.open(warehouse, read_only=True) as wh:
        bill = compute_bill(wh, Period.exact(PERIOD).window, settings_with_roles())
    return {str(r["team"]): float(r["cost"]) for r in bill.lines.iter_rows(named=True)}


def _doc(result: Any) -> Any:
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


def _refusal(result: Any) -> str:
    assert result.is_error
    return str(result.content[0].text)


@pytest.fixture(scope="module")
def http_url(warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`gpuledger mcp --transport http` on a free loopback port; ready when uvicorn says so."""
    import socket

    folder = tmp_path_factory.mktemp("mcp-http")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpuledger", "--config", str(_config(folder, [])), "--warehouse", str(warehouse),
         "mcp", "--transport", "http", "--port", str(port)],
        env=ENV, cwd=folder, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
    )
    try:
        assert proc.stderr is not None
        seen = []
        for line in proc.stderr:  # uvicorn logs this line once the socket listens
            seen.append(line)
            if "Uvicorn running on" in line:
                break
        else:
            pytest.fail("gpuledger mcp exited before listening:\n" + "".join(seen))
        # Keep reading its log (request lines), or a full pipe would block the server.
        threading.Thread(target=lambda: seen.extend(proc.stderr or ()), daemon=True).start()
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def _http(url: str, headers: dict[str, str], calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async with (httpx2.AsyncClient(headers=headers, timeout=300) as http,
                Client(streamable_http_client(url, http_client=http)) as client):
        out: list[Any] = [await client.list_tools()]
        for name, args in calls:
            out.append(await client.call_tool(name, args))
        return out


def test_http_tools_admin_bill(http_url: str, warehouse: Path) -> None:
    tools, bill = anyio.run(_http, http_url, admin_headers(), [("bill", {"period": PERIOD})])
    assert {t.name for t in tools.tools} == TOOLS
    assert all(t.annotations is not None and t.annotations.read_only_hint for t in tools.tools)
    doc = _doc(bill)
    assert doc["schema"] == "gpuledger.bill/v1" and doc["scope"] == "fleet"
    expected = _team_costs(warehouse)
    got = {line["team"]: line["cost"] for line in doc["lines"]}
    assert got.keys() == expected.keys() and len(expected) > 2
    assert all(abs(got[t] - expected[t]) < 0.01 for t in expected), (got, expected)


def _free_now(warehouse: Path) -> tuple[float, float]:
    """(whole GPUs, HAMi MiB on the best card) free now, from the file (`tests.capacity.free_now`)."""
    from gpuledger.warehouse import Warehouse
    from tests.capacity.free_now import hami_left, whole_gpus_free

    with Warehouse.open(warehouse, read_only=True) as wh:
        return whole_gpus_free(wh), max(hami_left(wh)[0].values())


def _waiting(warehouse: Path) -> dict[str, str]:
    """Workload name → team of every pending row seen at the newest snapshot, from the file."""
    from gpuledger.warehouse import Warehouse

    with Warehouse.open(warehouse, read_only=True) as wh:
        rows = wh.query("SELECT p.name, n.team FROM pending_workloads p LEFT JOIN namespaces n "
                        "USING (namespace) WHERE p.last_seen = (SELECT max(last_seen) FROM pending_workloads)")
    return {str(name): str(team) for name, team in rows.rows()}


def test_http_capacity_and_why_are_tools_of_the_endpoint_table(http_url: str, warehouse: Path) -> None:
    from gpuledger.dashboards.api_params import ENDPOINTS

    tools, capacity, why = anyio.run(_http, http_url, admin_headers(), [("capacity", {}), ("why", {})])
    listed = {t.name: set(t.input_schema["properties"]) for t in tools.tools}
    assert listed == {e.path.strip("/"): set(e.names()) for e in ENDPOINTS if e.path != "/openapi.json"}
    doc = _doc(capacity)
    whole = sum(r["ready"] for r in doc["capacity"] if r["shape"] == "whole GPU")
    hami = max(r["ready"] for r in doc["capacity"] if r["shape"] == "hami gpumem MiB")
    assert doc["schema"] == "gpuledger.capacity/v1" and (whole, hami) == _free_now(warehouse)
    assert hami > 0
    waiting = _waiting(warehouse)
    assert {r["name"]: r["team"] for r in _doc(why)["waiting"]} == waiting and len(waiting) > 3
    own, other = anyio.run(_http, http_url, lead_headers(), [
        ("why", {}), ("why", {"team": OTHER_TEAM})])[1:]
    assert {r["name"] for r in _doc(own)["waiting"]} == {n for n, t in waiting.items() if t == LEAD_TEAM}
    assert OTHER_TEAM in _refusal(other)


def test_http_lead_is_scoped_and_refused(http_url: str) -> None:
    own, other, plans, budgets = anyio.run(_http, http_url, lead_headers(), [
        ("bill", {"period": PERIOD}), ("bill", {"period": PERIOD, "team": OTHER_TEAM}),
        ("plans", {}), ("budgets", {"period": PERIOD})])[1:]
    doc = _doc(own)
    assert doc["scope"] == [LEAD_TEAM] and {line["team"] for line in doc["lines"]} == {LEAD_TEAM}
    assert doc["fleet_cost"] is None
    refused = _refusal(other)
    assert OTHER_TEAM in refused and LEAD in refused
    assert "admins and viewers" in _refusal(plans)
    teams = _doc(budgets)["teams"]
    assert [row["team"] for row in teams] == [LEAD_TEAM] and teams[0]["budget"] == 400.0


def test_http_without_user_is_refused(http_url: str) -> None:
    result = anyio.run(_http, http_url, {}, [("bill", {"period": PERIOD})])[1]
    assert "not authenticated" in _refusal(result)


async def _stdio(config: Path, warehouse: Path, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable, env=ENV, cwd=str(config.parent),
        args=["-m", "gpuledger", "--config", str(config), "--warehouse", str(warehouse), "mcp"])
    async with Client(params, read_timeout_seconds=300) as client:
        out: list[Any] = [await client.list_tools()]
        for name, args in calls:
            out.append(await client.call_tool(name, args))
        return out


def test_stdio_as_the_os_account(warehouse: Path, tmp_path: Path) -> None:
    from gpuledger.core.access import os_identity

    me = os_identity()[0]
    assert me not in (ADMIN, LEAD)
    admin_cfg = _config(tmp_path, [{"subject": me, "kind": "user", "role": "admin"}])
    tools, bill = anyio.run(_stdio, admin_cfg, warehouse, [("bill", {"period": PERIOD})])
    assert {t.name for t in tools.tools} == TOOLS
    assert {line["team"] for line in _doc(bill)["lines"]} == set(_team_costs(warehouse))
    lead_cfg = _config(tmp_path, [{"subject": me, "kind": "user", "role": "lead", "team": LEAD_TEAM}])
    own, other = anyio.run(_stdio, lead_cfg, warehouse, [
        ("bill", {"period": PERIOD}), ("bill", {"period": PERIOD, "team": OTHER_TEAM})])[1:]
    assert {line["team"] for line in _doc(own)["lines"]} == {LEAD_TEAM}
    assert OTHER_TEAM in _refusal(other)
