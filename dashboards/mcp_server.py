"""The MCP server (`gpuledger mcp`): the read-only API's answers as tools an AI assistant calls.

Why it answers through the API and not beside it: an assistant must read exactly what the
caller could read over `/api/v1` — the same numbers, the same roles, the same refusals. So each
tool is a call of the API's own route (`dashboards.api`, found by its URL in the Flask app's
URL map) inside a request context that carries the caller's `Principal`: the same read model
(`dashboards.readmodel`, snapshot-cached), the same scope rule after every handler
(`analytics.exports.scope_document`), the same 400/403/503 mapping, which become tool errors here.
Nothing in this module decides what a lead may see.

Who is calling (docs/decisions/0192):
- stdio (an assistant launched `gpuledger mcp` on the user's machine): the operating-system
  account of the process (`core.access.os_identity`), as the CLI's plan verbs without a cluster;
- streamable HTTP (a shared server): the user and groups the authenticating proxy sends, believed
  only from `access.proxy_addresses` (`dashboards.access.AccessPolicy.principal_for`, the
  dashboard's own rule), or `--dev-user` on loopback. Roles come from `access.roles` either way.

Tools (all read-only, `readOnlyHint`): bill, idle, recommendations, budgets, plans, each
answered by its `/api/v1` route. `capacity` and `why` join as one `ToolSpec` row each (`TOOLS`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import flask
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

from gpuledger.core.access import Principal
from gpuledger.dashboards.access import AccessPolicy
from gpuledger.dashboards.wiring import DashboardApp

INSTRUCTIONS = (
    "gpuledger answers what GPU teams spent, where the idle time is, and what to change. "
    "Periods are months (YYYY-MM; default: the newest month with data). Amounts are in the "
    "bill's currency. A team lead sees only the teams they lead."
)


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool: its name, the API route it answers from, and what it is for."""

    name: str
    route: str
    description: str


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec("bill", "/api/v1/bill",
             "The month's GPU bill per team (and `by` other dimensions, e.g. team,model): card-hours, "
             "idle, cost; the document of `gpuledger bill --format json`."),
    ToolSpec("idle", "/api/v1/idle",
             "Idle GPU-hours and their cost per workload (by owner, pod or label:<key>)."),
    ToolSpec("recommendations", "/api/v1/recommendations",
             "Right-sizing and reclaim recommendations per workload, with the monthly saving."),
    ToolSpec("budgets", "/api/v1/budgets",
             "Each team's monthly budget: used, left, month-end forecast, thresholds crossed."),
    ToolSpec("plans", "/api/v1/plans",
             "Stored optimization plans (MIG layouts, Kueue quotas): id, kind, status (admins and viewers)."),
)
"""The tools, in the order they are listed. `capacity` is added here (one row) when the API
serves `/api/v1/capacity`."""

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                            open_world_hint=False)

Identify = Callable[[Context], Principal | None]


def call_api(app: DashboardApp, principal: Principal, route: str, args: Mapping[str, Any]) -> Any:
    """The API's answer to `GET route?args` for `principal` (its JSON document); a refusal or a
    bad argument raises `ToolError` with the API's one-line message."""

    if not principal.known:
        raise ToolError(f"user {principal.user!r} has no role in gpuledger (access.roles)")
    query = {k: ("true" if v is True else "false" if v is False else str(v))
             for k, v in args.items() if v is not None}
    with app.server.test_request_context(route, query_string=query, method="GET"):
        flask.g.principal = principal
        # the route the context matched, without the app's before-request hooks (authentication
        # is `identify` and the check above; `_guarded` still runs inside the route)
        response = flask.make_response(app.server.dispatch_request())
    body = json.loads(response.get_data(as_text=True))
    if response.status_code != 200:
        raise ToolError(str(body.get("error") if isinstance(body, dict) else body))
    return body


def build_server(app: DashboardApp, identify: Identify) -> MCPServer:
    """The MCP server over `app` (its read model and API routes); `identify` says who calls."""
    server: MCPServer = MCPServer("gpuledger", instructions=INSTRUCTIONS)
    specs = {spec.name: spec for spec in TOOLS}

    async def answer(ctx: Context, name: str, args: dict[str, Any]) -> Any:
        principal = identify(ctx)
        if principal is None:
            raise ToolError("not authenticated: no user header from a trusted proxy (access.proxy_addresses)")
        # The handlers are synchronous (DuckDB, Polars): off the event loop, one thread each.
        return await anyio.to_thread.run_sync(lambda: call_api(app, principal, specs[name].route, args))

    async def bill(ctx: Context, *, period: str | None = None, team: str | None = None, by: str = "team",
                   as_computed: bool = False) -> Any:
        return await answer(ctx, "bill", {"period": period, "team": team, "by": by,
                                          "as_computed": as_computed})

    async def idle(ctx: Context, *, period: str | None = None, team: str | None = None, by: str = "owner",
                   namespace: str | None = None, top: int = 100) -> Any:
        return await answer(ctx, "idle", {"period": period, "team": team, "by": by,
                                          "namespace": namespace, "top": top})

    async def recommendations(ctx: Context, *, period: str | None = None, team: str | None = None,
                              namespace: str | None = None) -> Any:
        return await answer(ctx, "recommendations", {"period": period, "team": team, "namespace": namespace})

    async def budgets(ctx: Context, *, period: str | None = None, team: str | None = None) -> Any:
        return await answer(ctx, "budgets", {"period": period, "team": team})

    async def plans(ctx: Context) -> Any:
        return await answer(ctx, "plans", {})

    functions: dict[str, Callable[..., Any]] = {
        "bill": bill, "idle": idle, "recommendations": recommendations, "budgets": budgets, "plans": plans}
    for spec in TOOLS:
        server.add_tool(functions[spec.name], name=spec.name, description=spec.description,
                        annotations=READ_ONLY, structured_output=False)
    return server


def fixed_identity(principal: Principal) -> Identify:
    """stdio: every call is the account that started the process."""
    return lambda _ctx: principal


def proxy_identity(policy: AccessPolicy) -> Identify:
    """Streamable HTTP: the proxy's user headers from a trusted peer (or the dev user), per call,
    by the dashboard's own rule (`AccessPolicy.principal_for`)."""

    def identify(ctx: Context) -> Principal | None:
        request = ctx.request_context.request
        client = getattr(request, "client", None)
        headers = getattr(request, "headers", None) or {}
        return policy.principal_for(getattr(client, "host", None), headers)

    return identify
