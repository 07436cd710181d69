"""`gpuledger simulate`: generate a deterministic fleet's history, or serve it live.

Outputs (any combination): Parquet inventory and samples, an OpenMetrics file for promtool
backfill, Kubernetes manifests, ground truth as Parquet, and a load into the warehouse.
`--serve` instead answers `/metrics` for the simulated fleet at the current time.
"""

from __future__ import annotations

import argparse
import time
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import click

from gpuledger.command_context import Context
from gpuledger.commands import runs
from gpuledger.core.config import utcnow
from gpuledger.core.errors import InputError
from gpuledger.core.window import DAY, Window, floor_time, parse_duration, parse_instant

if TYPE_CHECKING:
    from gpuledger.simulator.engine import Simulation
    from gpuledger.simulator.field import FieldEffects


def _window(args: argparse.Namespace) -> Window:
    step = parse_duration(args.step)
    today = floor_time(utcnow(), DAY)
    if args.serve and not args.start and not args.end:
        return Window(today - DAY, today + 2 * DAY, step)
    end = parse_instant(args.end) if args.end else today
    start = parse_instant(args.start) if args.start else end - timedelta(days=args.days)
    return Window(start, end, step)


def build_simulation(args: argparse.Namespace) -> Simulation:
    from gpuledger.simulator.engine import Simulation
    from gpuledger.simulator.fleet import FleetSpec

    spec = FleetSpec.load(args.fleet) if args.fleet else FleetSpec.default(gpus=args.gpus)
    if args.field or args.field_effect:
        spec = spec.model_copy(update={"field": _field_effects(args.field, list(args.field_effect))})
    return Simulation(spec, _window(args), seed=args.seed)


def _field_effects(every: bool, only: list[str]) -> FieldEffects:
    """`--field` turns every effect on at its realistic level; `--field-effect NAME` (repeated)
    just those. Either replaces the fleet file's `field:` section."""
    from dataclasses import replace

    from gpuledger.simulator.field import FieldEffects

    if every:
        return FieldEffects.all()
    effects = FieldEffects.none()
    for name in only:
        effects = replace(effects, **{name: getattr(FieldEffects.only(name), name)})
    return effects


def _run(args: argparse.Namespace, ctx: Context) -> int:
    if args.serve:
        return _serve(args, ctx)
    wants_files = args.openmetrics or args.manifests or args.ground_truth or args.parquet
    if wants_files and args.out is None:
        raise InputError("simulate: --openmetrics, --manifests, --ground-truth and --parquet need --out DIR")
    if not wants_files and not args.load:
        raise InputError("simulate: nothing to do; give --out DIR with outputs, --load, or --serve")
    chunk = parse_duration(args.chunk)
    sim = build_simulation(args)
    ctx.echo(f"simulating {sim.gpu_count} GPUs, {sim.pod_count} pods over {sim.window} (seed {sim.seed})")
    out: Path | None = args.out
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    if args.manifests and out is not None:
        _write_manifests(sim, out)
        ctx.echo(f"wrote {out / 'manifests.yaml'} and {out / 'kueue.yaml'}")
    if args.parquet and out is not None:
        _write_parquet(sim, out, chunk, ctx)
    if args.ground_truth and out is not None:
        started = time.perf_counter()
        truth = sim.ground_truth(chunk)
        truth.write_parquet(out / "ground_truth.parquet")
        ctx.echo(f"wrote {out / 'ground_truth.parquet'}: {truth.height} rows, "
                 f"{truth['card_hours'].sum():,.1f} GPU-hours ({time.perf_counter() - started:.1f}s)")
    if args.openmetrics and out is not None:
        started = time.perf_counter()
        path = out / "metrics.om"
        counts = sim.write_openmetrics(
            path, hostname_label=args.hostname_label, exported=args.exported_labels,
            step=parse_duration(args.metrics_step) if args.metrics_step else None,
        )
        ctx.echo(f"wrote {path}: {sum(counts.values()):,} samples in {len(counts)} families "
                 f"({time.perf_counter() - started:.1f}s)")
    if args.load:
        from gpuledger.pipeline import load_simulation

        started = time.perf_counter()
        with ctx.open_warehouse() as wh:
            rows = load_simulation(wh, sim)
        ctx.echo(f"loaded {rows:,} rows into {ctx.warehouse_path} ({time.perf_counter() - started:.1f}s)")
    return 0


def _write_manifests(sim: Simulation, out: Path) -> None:
    import yaml

    (out / "manifests.yaml").write_text(yaml.safe_dump_all(sim.kube_manifests(), sort_keys=False))
    (out / "kueue.yaml").write_text(yaml.safe_dump_all(sim.kueue_manifests(), sort_keys=False))


def _write_parquet(sim: Simulation, out: Path, chunk: timedelta, ctx: Context) -> None:
    """Inventory as one file per table; samples as `<table>/<chunk start>.parquet`."""
    base = out / "parquet"
    base.mkdir(exist_ok=True)
    for table, frame in sim.inventory().items():
        frame.write_parquet(base / f"{table}.parquet")
    rows = 0
    for window, frames in sim.batches(chunk):
        for table, frame in frames.items():
            (base / table).mkdir(exist_ok=True)
            frame.write_parquet(base / table / f"{window.start:%Y%m%dT%H%M}.parquet")
            rows += frame.height
        ctx.echo(f"  generated {window.start:%Y-%m-%d %H:%M}")
    ctx.echo(f"wrote {base}: {rows:,} sample rows")


def _serve(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.simulator.serve import make_server

    sim = build_simulation(args)
    server = make_server(sim, args.host, args.port, hostname_label=args.hostname_label,
                         exported=args.exported_labels)
    ctx.echo(f"serving {sim.gpu_count} simulated GPUs at {server.url} for {sim.window} (Ctrl-C stops)")
    try:
        if args.serve_seconds:
            server.timeout = 0.5
            deadline = time.monotonic() + args.serve_seconds
            while time.monotonic() < deadline:
                server.handle_request()
        else:
            server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


@click.command("simulate", help="generate a deterministic GPU fleet's history, or serve it live")
@click.option("--fleet", type=click.Path(path_type=Path),
              help="fleet spec YAML (default: the built-in demo fleet)")
@click.option("--gpus", type=int, default=256, help="size of the built-in fleet (default 256)")
@click.option("--start", help="window start, ISO-8601 (default: --days before --end)")
@click.option("--end", help="window end, ISO-8601 (default: today 00:00 UTC)")
@click.option("--days", type=float, default=7, help="window length when --start is not given")
@click.option("--step", default="60s", help="sample interval (default 60s)")
@click.option("--seed", type=int, default=7, help="random seed (default 7)")
@click.option("--chunk", default="1d",
              help="generate file outputs in chunks of this size (default 1d; --load goes by day)")
@click.option("--out", type=click.Path(path_type=Path), help="directory for file outputs")
@click.option("--parquet", is_flag=True, help="inventory and sample frames as Parquet")
@click.option("--openmetrics", is_flag=True, help="metrics.om for promtool backfill")
@click.option("--metrics-step", help="thin the OpenMetrics file to this interval (e.g. 5m)")
@click.option("--manifests", is_flag=True, help="manifests.yaml (Nodes, Namespaces, Pods) and kueue.yaml")
@click.option("--ground-truth", is_flag=True, help="ground_truth.parquet (GPU-hours per hour and holder)")
@click.option("--load", is_flag=True, help="load inventory and samples into the warehouse")
@click.option("--hostname-label", type=click.Choice(("Hostname", "hostname")), default="Hostname")
@click.option("--exported-labels", is_flag=True,
              help="workload labels as exported_pod/... (ServiceMonitor honorLabels false)")
@click.option("--field", is_flag=True,
              help="every field effect at its realistic level (see docs/guide/simulator.md)")
@click.option("--field-effect", multiple=True, metavar="NAME",
              help="one field effect at its realistic level (repeatable), e.g. jitter_s")
@click.option("--serve", is_flag=True, help="serve /metrics for the current time")
@click.option("--host", default="127.0.0.1", help="listen address (default 127.0.0.1)")
@click.option("--port", type=int, default=9400, help="listen port (default 9400)")
@click.option("--serve-seconds", type=float, help="stop serving after this many seconds")
@runs
def command(args: argparse.Namespace, ctx: Context) -> int:
    return _run(args, ctx)
