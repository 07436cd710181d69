"""`gpuledger mcp`: the read-only API's answers as MCP tools for AI assistants.

`--transport stdio` (default) is what an assistant launches on the user's machine; every call is
the operating-system account running it, with the roles `access.roles` grants that account.
`--transport http` serves MCP's streamable HTTP at `http://HOST:PORT/mcp` for a shared server:
behind the authenticating proxy, as the dashboard (`--dev-user` only on loopback). The tools,
the identity rules and why: `dashboards.mcp_server`, docs/guide/mcp.md, docs/decisions/0192.
Needs the `mcp` extra (`pip install 'gpuledger[mcp]'`).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import click

from gpuledger.command_context import Context
from gpuledger.commands import runs
from gpuledger.core.errors import ConfigError, InputError


def _run(args: argparse.Namespace, ctx: Context) -> int:
    try:
        from gpuledger.dashboards import mcp_server
    except ImportError as exc:
        raise ConfigError(f"gpuledger mcp needs the MCP SDK: pip install 'gpuledger[mcp]' ({exc})") from None
    from gpuledger.core.access import os_identity, resolve_roles
    from gpuledger.dashboards.access import check_dev_bind
    from gpuledger.dashboards.app import create_app

    if not 1 <= args.port <= 65535:
        raise InputError(f"--port {args.port}: expected a TCP port from 1 to 65535")
    if args.transport == "stdio" and args.dev_user:
        raise InputError("--dev-user applies to --transport http; over stdio you are your OS account")
    check_dev_bind(args.host, args.dev_user)
    if not Path(ctx.warehouse_path).exists():
        raise InputError(f"no warehouse at {ctx.warehouse_path} (--warehouse)")
    groups = tuple(g.strip() for g in (args.dev_groups or "").split(",") if g.strip())
    with tempfile.TemporaryDirectory(prefix="gpuledger-mcp-") as cache:
        app = create_app(ctx.settings, ctx.warehouse_path, dev_user=args.dev_user, dev_groups=groups,
                         refresh_s=args.refresh_s, cache_dir=Path(cache))
        try:
            if args.transport == "stdio":
                user, os_groups = os_identity()
                principal = resolve_roles(user, os_groups, ctx.settings.access)
                mcp_server.build_server(app, mcp_server.fixed_identity(principal)).run("stdio")
            else:
                server = mcp_server.build_server(app, mcp_server.proxy_identity(app.policy))
                url = f"http://{args.host}:{args.port}/mcp"
                print(f"gpuledger MCP (streamable HTTP) on {url}", file=sys.stderr, flush=True)
                server.run("streamable-http", host=args.host, port=args.port)
        finally:
            app.close()
    return 0


@click.command("mcp", help="serve bill, idle, recommendations, budgets and plans to AI assistants (MCP)")
@click.option("--transport", type=click.Choice(["stdio", "http"]), default="stdio", show_default=True,
              help="stdio (launched by the assistant) or streamable HTTP (a shared server)")
@click.option("--host", default="127.0.0.1", show_default=True, help="address to bind (http)")
@click.option("--port", type=int, default=8765, show_default=True, help="port (http)")
@click.option("--dev-user", default=None, metavar="NAME",
              help="http on loopback only: act as this user without a proxy")
@click.option("--dev-groups", default="", metavar="G1,G2", help="groups of the --dev-user")
@click.option("--refresh-s", type=float, default=120.0, metavar="SECONDS",
              help="how often to look for new data and re-snapshot the warehouse")
@runs
def command(args: argparse.Namespace, ctx: Context) -> int:
    return _run(args, ctx)
