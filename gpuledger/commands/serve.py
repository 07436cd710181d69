"""`gpuledger serve`: the dashboard for team leads and platform admins, on gunicorn.

Behind an authenticating proxy the app trusts the user/groups headers only from
`access.proxy_addresses`; `--dev-user` stands in for the proxy on a laptop and is refused
unless the server binds a loopback address. `--metrics-port` adds the ops port (at
`--metrics-host`: the pod's address `$POD_IP` when set, else loopback; docs/decisions/0177):
`/healthz`, `/readyz` and `/metrics` only, unauthenticated, for the kubelet's probes and
Prometheus. `--log-format json` writes one JSON object per log line, secrets masked
(`--log-level debug` adds a line as each request starts).
`--schedule` also issues each completed month's report in a background thread of the server
(`reports.schedule`). SIGTERM finishes the requests in flight, then deletes every private
snapshot (`dashboards.server`, docs/decisions/0066).
`--lake URI` serves the org's Teams and Fleet pages by cluster from an org lake instead,
read-only, with no warehouse (`dashboards.lake_app`, docs/decisions/0116).
"""

from __future__ import annotations

import argparse
import logging
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


def _schedule(ctx: Context, connect: Any = None) -> Any:
    """The report schedule, run in the server's worker until it stops; with `connect` (a cluster
    factory: `--apply-approved`) each tick also applies the approved MIG plans whose pools are
    inside their maintenance window (`actuator.scheduled_apply`)."""
    from gpuledger.reports.schedule import run_forever

    out_dir = Path(ctx.settings.reports.out_dir)

    def apply_due(now: Any) -> None:
        from gpuledger.actuator.scheduled_apply import apply_due as apply_now
        from gpuledger.warehouse import Warehouse

        with Warehouse.open(ctx.warehouse_path, limits=ctx.settings.warehouse) as wh:
            apply_now(wh, ctx.settings, connect(), now)

    def run(stop: threading.Event) -> None:
        run_forever(ctx.settings, ctx.warehouse_path, out_dir, stop, also=apply_due if connect else None)

    return run


def _check_flags(args: argparse.Namespace) -> None:
    """Refuse a port outside 1-65535 and a refresh that is not a positive, finite interval
    before anything starts (they ended in a socket traceback or a busy loop)."""
    from gpuledger.core.errors import InputError

    for flag, port in (("--port", args.port), ("--metrics-port", args.metrics_port)):
        if port is not None and not 1 <= port <= 65535:
            raise InputError(f"{flag} {port}: expected a TCP port from 1 to 65535")
    if not 1 <= args.refresh_s <= 86_400:  # NaN fails too
        raise InputError(f"--refresh-s {args.refresh_s:g}: expected seconds from 1 to 86400")
    if not 1 <= args.header_timeout_s <= 300:
        raise InputError(f"--header-timeout-s {args.header_timeout_s:g}: expected seconds from 1 to 300")


def _run(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.core import logs
    from gpuledger.core.redact import Redactor
    from gpuledger.dashboards.server import ServeOptions, check, serve_production

    _check_flags(args)
    cluster = _cluster_factory(args, ctx)
    if args.apply_approved and (not args.schedule or cluster is None):
        from gpuledger.core.errors import InputError

        raise InputError("--apply-approved needs --schedule and a cluster (--kubeconfig or in-cluster)")
    groups = tuple(g.strip() for g in (args.dev_groups or "").split(",") if g.strip())
    ops = {"ops_host": args.metrics_host} if args.metrics_host else {}
    opts = ServeOptions(host=args.host, port=args.port, ops_port=args.metrics_port,
                        dev_user=args.dev_user, dev_groups=groups, refresh_s=args.refresh_s,
                        header_timeout_s=args.header_timeout_s, **ops)
    check(opts)
    fmt = logs.parse_format(args.log_format)
    logs.configure(fmt, level=getattr(logging, args.log_level.upper()), redactor=Redactor.of(ctx.settings))

    factory = _lake_factory(args, ctx, opts, groups) if args.lake_uri else None

    def started(url: str) -> None:  # in JSON mode every line of output is a JSON record
        if fmt == "json":
            logging.getLogger("gpuledger.serve").info("listening on %s", url, extra={"url": url})
        else:
            ctx.echo(f"gpuledger dashboard on {url} (Ctrl-C to stop)")

    return serve_production(
        ctx.settings, ctx.warehouse_path, opts, cluster_factory=cluster,
        background=_schedule(ctx, cluster if args.apply_approved else None) if args.schedule else None,
        on_start=started, app_factory=factory,
    )


def _lake_factory(args: argparse.Namespace, ctx: Context, opts: Any, groups: tuple[str, ...]) -> Any:
    """Lake mode: the read-only org dashboard; the warehouse-only flags say they do not apply."""
    from gpuledger.core.errors import InputError

    for flag, value in (("--schedule", args.schedule), ("--kubeconfig", args.kubeconfig),
                        ("--metrics-port", args.metrics_port)):
        if value:
            raise InputError(f"serve --lake: {flag} needs a cluster's warehouse (lake mode is read-only)")

    def build() -> Any:
        from gpuledger.dashboards.lake_app import create_lake_app

        return create_lake_app(ctx.settings, args.lake_uri, dev_user=opts.dev_user, dev_groups=groups,
                               refresh_s=opts.refresh_s)

    return build


@click.command("serve", help="serve the dashboards (team, fleet, queues, plans) on gunicorn")
@click.option("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
@click.option("--port", type=int, default=8050, help="port (default 8050)")
@click.option("--metrics-port", type=int, default=None, metavar="PORT",
              help="also serve /healthz, /readyz and /metrics, unauthenticated, on this port "
                   "(at --metrics-host)")
@click.option("--metrics-host", default=None, metavar="ADDRESS",
              help="address of the --metrics-port (default: $POD_IP when set, else 127.0.0.1; "
                   "0.0.0.0 for every interface)")
@click.option("--log-format", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="log lines as text or one JSON object per line (secrets masked)")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info",
              show_default=True, help="the lowest level logged (debug: each request as it starts)")
@click.option("--dev-user", default=None, metavar="NAME",
              help="act as this user without a proxy (loopback only; admin when no roles are configured)")
@click.option("--dev-groups", default="", metavar="G1,G2", help="groups of the --dev-user")
@click.option("--kubeconfig", default=None, help="cluster for plan preview/apply")
@click.option("--refresh-s", type=float, default=120.0, metavar="SECONDS",
              help="how often to look for new data and re-snapshot the warehouse (default 120)")
@click.option("--header-timeout-s", type=float, default=30.0, metavar="SECONDS",
              help="close a connection whose request header is not complete this long after it "
                   "opened (or its previous answer ended), however slowly it trickles (default 30)")
@click.option("--lake", "lake_uri", metavar="URI",
              help="serve the org's Teams and Fleet pages by cluster from this lake (path or "
                   "s3://bucket/prefix), read-only, without a warehouse")
@click.option("--schedule", is_flag=True,
              help="also issue each completed month's report in the background (reports.schedule)")
@click.option("--apply-approved", is_flag=True,
              help="with --schedule: apply approved MIG plans, only inside their pools' "
                   "advice.maintenance_windows (actuator.scheduled_apply)")
@runs
def command(args: argparse.Namespace, ctx: Context) -> int:
    return _run(args, ctx)
