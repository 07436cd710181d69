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

Tools (all read-only, `readOnlyHint`): one per `/api/v1` document of the API's endpoint table
(`api_params.ENDPOINTS`, which also writes the OpenAPI): bill, idle, recommendations, plans,
budgets, capacity, why, each answered by its route and taking its parameters. A new endpoint is
a new tool, never a second list to keep in step (docs/decisions/0217).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

import anyio
import flask
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from gpuledger.core.access import Principal
from gpuledger.dashboards.access import AccessPolicy
from gpuledger.dashboards.api_params import ENDPOINTS, Param
from gpuledger.dashboards.wiring import DashboardApp

INSTRUCTIONS = (
    "gpuledger answers what GPU teams spent, where the idle time is, what to change, what is "
    "free now in each GPU shape (capacity) and why a workload waits (why). "
    "Time is a month (period=YYYY-MM or last), start/end (ISO-8601) or window (7d, 30d, "
    "month-to-date); default: the newest month with data. Amounts are in the "
    "bill's currency. A team lead sees only the teams they lead."
)


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool: its name, the API route it answers from, what it is for and what it takes."""

    name: str
    route: str
    description: str
    params: tuple[Param, ...] = ()


NOT_TOOLS = frozenset({"/openapi.json"})
"""API documents that are no answer: the description of the API itself."""


def tools() -> tuple[ToolSpec, ...]:
    """One tool per `/api/v1` document of `api_params.ENDPOINTS`, named by its path, described
    by its summary, taking its parameters (all optional strings, as the query string takes
    them): an endpoint added to the table is a tool, with the same role scoping."""
    return tuple(ToolSpec(e.path.strip("/"), f"/api/v1{e.path}", e.summary, e.params)
                 for e in ENDPOINTS if e.path not in NOT_TOOLS)


TOOLS: tuple[ToolSpec, ...] = tools()

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
    for spec in TOOLS:
        server.add_tool(_tool(app, identify, spec), name=spec.name, description=spec.description,
                        annotations=READ_ONLY, structured_output=False)
    return server


def _tool(app: DashboardApp, identify: Identify, spec: ToolSpec) -> Callable[..., Any]:
    """The tool function of `spec`: its signature (what the SDK builds the input schema from)
    is the endpoint's parameters, each an optional string described as in the OpenAPI."""

    async def tool(ctx: Context, **args: Any) -> Any:
        principal = identify(ctx)
        if principal is None:
            raise ToolError("not authenticated: no user header from a trusted proxy (access.proxy_addresses)")
        # The handlers are synchronous (DuckDB, Polars): off the event loop, one thread each.
        return await anyio.to_thread.run_sync(lambda: call_api(app, principal, spec.route, args))

    params = [inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Context)]
    annotations: dict[str, Any] = {"ctx": Context, "return": Any}
    for p in spec.params:
        kind = Annotated[str | None, Field(description=p.description, examples=[p.example])]
        params.append(inspect.Parameter(p.name, inspect.Parameter.KEYWORD_ONLY, default=None,
                                        annotation=kind))
        annotations[p.name] = kind
    tool.__signature__ = inspect.Signature(params, return_annotation=Any)  # type: ignore[attr-defined]
    tool.__annotations__ = annotations
    tool.__name__ = tool.__qualname__ = spec.name
    return tool


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
