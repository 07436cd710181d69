"""`gpuledger collect`: fill the warehouse from Prometheus (and the Kubernetes API) for a window.

Flags override the config file: `--prometheus` over `prometheus.url`, `--step` over
`prometheus.step`, `--kubeconfig` over `kubernetes.kubeconfig`. A run resumes from the
watermarks; `--reload` re-collects the whole window (loads are idempotent). `--follow` keeps
collecting every step until interrupted.

The hours the loaded samples complete are rolled up as the chunks arrive (whole days in a
backfill, each hour in `--follow`; rules in `gpuledger.collect_rollup`); `--no-rollup` leaves
the roll-up to a later run. Progress goes to stderr: a bar with chunks, rows, rows/s and an ETA
on a terminal, a plain line at most every 10 s otherwise, nothing with `-q`.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

import click

from gpuledger.command_context import Context
from gpuledger.commands import runs
from gpuledger.core.errors import InputError
from gpuledger.core.window import Window, parse_instant

if TYPE_CHECKING:
    from gpuledger.collect_pipeline import CollectReport, Snapshotter
    from gpuledger.core.config import Settings
    from gpuledger.warehouse import Warehouse


def _record_dropped(ctx: Context, report: CollectReport) -> None:
    """Add the run's dropped samples, by reason, to the totals `gpuledger serve` exports as
    `gpuledger_collect_dropped_samples_total` (`core.collect_stats`, beside the warehouse)."""
    from gpuledger.collectors.quality import DROPPED
    from gpuledger.core import collect_stats

    if report.quality is not None:
        dropped = {r: n for r, n in report.quality.by_reason().items() if r in DROPPED}
        collect_stats.add(ctx.warehouse_path, dropped)


def _backfill(wh: Warehouse, settings: Settings, url: str, window: Window, *,
              args: argparse.Namespace, kube: Snapshotter | None) -> CollectReport:
    """`collect --start --end`: the chunks with their roll-up, and the progress on stderr."""
    from gpuledger import collect_pipeline as pipeline
    from gpuledger.collect_rollup import RollupPlan
    from gpuledger.terminal_progress import RateProgress

    plan = None if args.no_rollup else RollupPlan()
    if args.quiet:
        return pipeline.collect_window(wh, settings, url, window, reload=args.reload,
                                       kubernetes=kube, rollup=plan)
    with RateProgress("collect", total=0, unit="chunks") as bar:
        seen = {"chunks": 0, "rows": 0}

        def progress(r: CollectReport) -> None:
            """Total from the chunk plan (it can grow once the first chunk sized the rest)."""
            bar.set_total(max(r.planned_chunks, r.chunks))
            if r.chunks == seen["chunks"]:
                return
            rows = r.rows.get("gpu_samples", 0)
            rolled = f", rolled up to {r.rolled_to:%Y-%m-%dT%H:%MZ}" if r.rolled_to else ""
            mark = f"at {r.loaded_to:%Y-%m-%dT%H:%MZ}" if r.loaded_to else ""
            bar.advance(r.chunks - seen["chunks"], rows=rows - seen["rows"], note=mark + rolled)
            seen.update(chunks=r.chunks, rows=rows)

        return pipeline.collect_window(wh, settings, url, window, reload=args.reload,
                                       kubernetes=kube, rollup=plan, on_progress=progress)


def _run(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger import collect_pipeline as pipeline

    settings = ctx.settings
    url = args.prometheus or settings.prometheus.url
    if not url:
        raise InputError("collect: no Prometheus URL; pass --prometheus URL or set prometheus.url")
    step = pipeline.parse_step(args.step, settings)
    if args.step:
        settings = settings.model_copy(
            update={"prometheus": settings.prometheus.model_copy(update={"step": args.step})})
    kubeconfig = args.kubeconfig or settings.kubernetes.kubeconfig
    kube = None
    if kubeconfig:
        from gpuledger.collectors.kubernetes import KubernetesCollector

        kube = KubernetesCollector.from_kubeconfig(kubeconfig, settings)

    from gpuledger.core.redact import Redactor

    with ctx.open_warehouse() as wh:
        if args.follow:
            start = parse_instant(args.start) if args.start else None
            if start is None:
                raise InputError("collect --follow: pass --start (where to begin when no watermark exists)")
            ctx.echo(f"following {Redactor.of(ctx.settings).url(url)} every {step} (Ctrl-C stops)")
            def show(r: pipeline.CollectReport) -> None:
                _record_dropped(ctx, r)
                for line in r.lines():
                    ctx.echo(line)
                ctx.publish(wh)  # the dashboard's serving store, after each round's commit

            pipeline.follow(wh, settings, url, start, step, kubernetes=kube, on_report=show,
                            rollup=not args.no_rollup)
            return 0
        if not args.start or not args.end:
            raise InputError("collect: pass --start and --end (ISO-8601, UTC), or --follow")
        window = Window(parse_instant(args.start), parse_instant(args.end), step)
        report = _backfill(wh, settings, url, window, args=args, kube=kube)
    _record_dropped(ctx, report)
    for line in report.lines():
        ctx.echo(line)
    return 0


@click.command("collect", help="collect DCGM, Kueue, token and kube metrics into the warehouse")
@click.option("--prometheus", metavar="URL", help="Prometheus-compatible API root")
@click.option("--start", metavar="ISO", help="window start (UTC), e.g. 2026-11-01T00:00:00Z")
@click.option("--end", metavar="ISO", help="window end, exclusive")
@click.option("--step", metavar="DURATION", help="sample step (default prometheus.step, 60s)")
@click.option("--kubeconfig", metavar="FILE", help="also snapshot the Kubernetes API")
@click.option("--reload", is_flag=True, help="ignore watermarks; re-collect the window")
@click.option("--follow", is_flag=True, help="keep collecting every step")
@click.option("--no-rollup", is_flag=True, help="load samples only; roll up the hours in a later run")
@click.option("-q", "--quiet", is_flag=True, help="no progress on stderr")
@runs
def command(args: argparse.Namespace, ctx: Context) -> int:
    return _run(args, ctx)
