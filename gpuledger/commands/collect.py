"""`gpuledger collect`: fill the warehouse from Prometheus (and the Kubernetes API) for a window.

Flags override the config file: `--prometheus` over `prometheus.url`, `--step` over
`prometheus.step`, `--kubeconfig` over `kubernetes.kubeconfig`. A run resumes from the
watermarks; `--reload` re-collects the whole window (loads are idempotent). `--follow` keeps
collecting every step until interrupted.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

import click

from gpuledger.command_context import Context
from gpuledger.commands import runs
from gpuledger.core.errors import InputError
from gpuledger.core.window import Window, parse_instant

if TYPE_CHECKING:
    from gpuledger.collect_pipeline import CollectReport
    from gpuledger.collectors.prometheus import ChunkData


def _record_dropped(ctx: Context, report: CollectReport) -> None:
    """Add the run's dropped samples, by reason, to the totals `gpuledger serve` exports as
    `gpuledger_collect_dropped_samples_total` (`core.collect_stats`, beside the warehouse)."""
    from gpuledger.collectors.quality import DROPPED
    from gpuledger.core import collect_stats

    if report.quality is not None:
        dropped = {r: n for r, n in report.quality.by_reason().items() if r in DROPPED}
        collect_stats.add(ctx.warehouse_path, dropped)


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

    def progress(data: ChunkData) -> None:
        print(f"gpuledger: loaded chunk {data.chunk.start.isoformat()} .. {data.chunk.end.isoformat()} "
              f"({data.samples} gpu samples)", file=sys.stderr, flush=True)

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

            pipeline.follow(wh, settings, url, start, step, kubernetes=kube, on_report=show)
            return 0
        if not args.start or not args.end:
            raise InputError("collect: pass --start and --end (ISO-8601, UTC), or --follow")
        window = Window(parse_instant(args.start), parse_instant(args.end), step)
        report = pipeline.collect_window(wh, settings, url, window, reload=args.reload,
                                         kubernetes=kube, on_chunk=progress)
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
@runs
def command(args: argparse.Namespace, ctx: Context) -> int:
    return _run(args, ctx)
