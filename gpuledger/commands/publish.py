"""`gpuledger publish --lake URI --cluster NAME --period YYYY-MM`: this cluster's month, as one
partition of the org lake (docs/guide/lake.md), and its capacity now (`reports.lake_capacity`,
`--capacity-only`: that alone, cheap enough to run every few minutes). Re-running is a no-op; a
final period refuses different numbers unless `--reissue`."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

import click

from gpuledger.command_context import Context
from gpuledger.commands import output_option, runs
from gpuledger.core.errors import InputError

if TYPE_CHECKING:
    from gpuledger.warehouse import Warehouse
    from gpuledger.warehouse.lake.location import Lake


def lake_of(args: argparse.Namespace, ctx: Context) -> Lake:
    """`--lake`, else `lake.uri` from the settings; one line when neither is given."""
    from gpuledger.warehouse.lake.location import Lake

    uri = args.lake_uri or ctx.settings.lake.uri
    if not uri:
        raise InputError("no lake: pass --lake PATH|s3://bucket/prefix or set lake.uri")
    from gpuledger.core.signing import signing_key

    return Lake.open(uri, ctx.settings.lake, signing_key(ctx.settings))  # signs and checks manifests


def _run(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.commands._output import emit
    from gpuledger.core.period import Period
    from gpuledger.reports.lake_publish import publish_month

    cluster = args.cluster or ctx.settings.lake.cluster
    if not cluster:
        raise InputError("publish: pass --cluster NAME or set lake.cluster")
    lake = lake_of(args, ctx)
    if args.capacity_only:
        with ctx.open_warehouse(read_only=True) as wh:
            capacity = _capacity(wh, ctx, lake, cluster)
        row = {"cluster": cluster, "capacity": capacity}
        emit(ctx, args.format, rows=[row], document=row, title=f"{cluster} capacity now: {capacity}")
        return 0
    period = str(Period.parse(args.period or "last"))
    with ctx.open_warehouse(read_only=True) as wh:
        result = publish_month(wh, ctx.settings, lake, cluster, period,
                               finalize=args.finalize, reissue=args.reissue)
        capacity = _capacity(wh, ctx, lake, cluster)
    m = result.manifest
    row = {"cluster": cluster, "period": period, "status": result.status, "state": m.status,
           "issue": m.issue, "files_written": result.files_written,
           "fleet_cost": m.bill["fleet_cost"], "watermark": m.watermark, "partition": result.uri,
           "capacity": capacity}
    emit(ctx, args.format, rows=[row], document={**row, "manifest": m.model_dump(mode="json")},
         money=("fleet_cost",),
         title=f"{cluster} {period}: {result.status}")
    return 0


def _capacity(wh: Warehouse, ctx: Context, lake: Lake, cluster: str) -> str:
    """Publish capacity now (`reports.lake_capacity`); its status, or `no inventory`."""
    from gpuledger.dashboards.capacity_data import fleet_now
    from gpuledger.reports.lake_capacity import publish_capacity

    result = publish_capacity(lake, cluster, fleet_now(wh, ctx.settings, pending=False))
    return result.status if result is not None else "no inventory"


@click.command("publish", help="publish this cluster's month to the org lake (manifest last; idempotent)")
@click.option("--lake", "lake_uri", metavar="URI", help="a path or s3://bucket/prefix (default: lake.uri)")
@click.option("--cluster", help="this cluster's name in the lake (default: lake.cluster)")
@click.option("--period", metavar="YYYY-MM|last", help="UTC month (default: the last complete month)")
@click.option("--finalize", is_flag=True, help="mark the period final (after the month is over)")
@click.option("--reissue", is_flag=True, help="replace a final period with different numbers (issue + 1)")
@click.option("--capacity-only", is_flag=True,
              help="publish only capacity now (what is free by shape, queue headroom): run it often")
@output_option()
@runs
def command(args: argparse.Namespace, ctx: Context) -> int:
    return _run(args, ctx)
