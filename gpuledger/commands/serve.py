"""`gpuledger serve`: the dashboard for team leads and platform admins.

Behind an authenticating proxy the app trusts the user/groups headers only from
`access.proxy_addresses`; `--dev-user` stands in for the proxy on a laptop and is refused
unless the server binds a loopback address. `--schedule` also issues each completed month's
report in a background thread (`reports.schedule`).
"""

from __future__ import annotations

import argparse
import os
import threading
from pathlib import Path
from typing import Any

import click

from gpuledger.command_context import Context
from gpuledger.commands import runs


def _cluster_factory(args: argparse.Namespace, ctx: Context) -> Any:
    """A gateway factory for preview/apply when a cluster is configured (or we run in one)."""
    kubeconfig = args.kubeconfig or ctx.settings.kubernetes.kubeconfig
    if not kubeconfig and not os.environ.get("KUBERNETES_SERVICE_HOST"):
        return None

    def connect() -> Any:
        from gpuledger.actuator.workflow import connect as connect_cluster

        return connect_cluster(ctx.settings, kubeconfig)

    return connect


def _start_schedule(ctx: Context, stop: threading.Event) -> threading.Thread:
    from gpuledger.reports.schedule import run_forever

    out_dir = Path(ctx.settings.reports.out_dir)
    thread = threading.Thread(
        target=run_forever, args=(ctx.settings, ctx.warehouse_path, out_dir, stop),
        name="gpuledger-report-schedule", daemon=True,
    )
    thread.start()
    return thread


def _check_flags(args: argparse.Namespace) -> None:
    """Refuse a port outside 1-65535 and a refresh that is not a positive, finite interval
    before anything starts (they ended in a socket traceback or a busy loop)."""
    from gpuledger.core.errors import InputError

    if not 1 <= args.port <= 65535:
        raise InputError(f"--port {args.port}: expected a TCP port from 1 to 65535")
    if not 1 <= args.refresh_s <= 86_400:  # NaN fails too
        raise InputError(f"--refresh-s {args.refresh_s:g}: expected seconds from 1 to 86400")


def _run(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.dashboards.access import check_dev_bind
    from gpuledger.dashboards.app import serve

    _check_flags(args)
    check_dev_bind(args.host, args.dev_user)
    groups = tuple(g.strip() for g in (args.dev_groups or "").split(",") if g.strip())
    stop = threading.Event()
    schedule = _start_schedule(ctx, stop) if args.schedule else None
    try:
        serve(
            ctx.settings, ctx.warehouse_path, args.host, args.port, args.dev_user, groups,
            cluster_factory=_cluster_factory(args, ctx),
            on_start=lambda url: ctx.echo(f"gpuledger dashboard on {url} (Ctrl-C to stop)"),
            refresh_s=args.refresh_s,
        )
    finally:
        stop.set()
        if schedule is not None:
            schedule.join(timeout=30)
    return 0


@click.command("serve", help="serve the dashboards (team, fleet, queues, plans)")
@click.option("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
@click.option("--port", type=int, default=8050, help="port (default 8050)")
@click.option("--dev-user", default=None, metavar="NAME",
              help="act as this user without a proxy (loopback only; admin when no roles are configured)")
@click.option("--dev-groups", default="", metavar="G1,G2", help="groups of the --dev-user")
@click.option("--kubeconfig", default=None, help="cluster for plan preview/apply")
@click.option("--refresh-s", type=float, default=120.0, metavar="SECONDS",
              help="how often to look for new data and re-snapshot the warehouse (default 120)")
@click.option("--schedule", is_flag=True,
              help="also issue each completed month's report in the background (reports.schedule)")
@runs
def command(args: argparse.Namespace, ctx: Context) -> int:
    return _run(args, ctx)
