"""`gpuledger org bill|report --lake URI`: the bill across every cluster that published to the
org lake, on DuckDB (default) or Spark (docs/guide/lake.md)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import click

from gpuledger.command_context import Context
from gpuledger.commands import F, VerbGroup, output_option, runs
from gpuledger.commands.publish import lake_of

ENGINES = ("duckdb", "spark")


def _spark(args: argparse.Namespace, ctx: Context) -> Any:
    """A Spark session for this command (`--spark-master` over `lake.spark_master`)."""
    from gpuledger.warehouse.lake.spark_engine import spark_session

    settings = ctx.settings.lake
    if getattr(args, "spark_master", None):
        settings = settings.model_copy(update={"spark_master": args.spark_master})
    return spark_session(settings, s3=not lake_of(args, ctx).is_local)


def _engine(args: argparse.Namespace, ctx: Context) -> str:
    return str(getattr(args, "engine", None) or ctx.settings.lake.engine)


def _bill(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.analytics.billing.org_bill import compute_org_bill
    from gpuledger.commands._analytics_common import warn
    from gpuledger.commands._output import emit
    from gpuledger.core.period import Period

    lake = lake_of(args, ctx)
    engine = _engine(args, ctx)
    spark = _spark(args, ctx) if engine == "spark" else None
    try:
        bill = compute_org_bill(lake, str(Period.parse(args.period or "last")),
                                tuple(args.by.split(",")), engine=engine,  # type: ignore[arg-type]
                                settings=ctx.settings.lake, spark=spark)
    finally:
        if spark is not None:
            spark.stop()
    doc = bill.to_dict()
    note = bill.rules_note()
    warn([note] if note else [])
    emit(ctx, args.format, rows=doc["lines"], columns=[*bill.by, "card_hours", "idle_cost", "cost"],
         document=doc, money=("cost", "idle_cost"),
         title=f"org bill {bill.period} ({engine}): {bill.fleet_cost:,.2f} {bill.currency}, "
               f"{len(bill.clusters)} clusters",
         footer=bill.rules_lines())
    return 0


def write_org_report(args: argparse.Namespace, ctx: Context, out: Path) -> int:
    """The org statement, org FOCUS file and org PDF of a month (`reports.lake_org`): what
    `org report` and `report monthly --lake` both run (one implementation, two spellings)."""
    from gpuledger.commands._analytics_common import warn
    from gpuledger.core.period import Period
    from gpuledger.reports.lake_org import write_org_statement

    engine = _engine(args, ctx)
    spark = _spark(args, ctx) if engine == "spark" else None
    try:
        result = write_org_statement(lake_of(args, ctx), str(Period.parse(args.period or "last")),
                                     out, engine=engine, spark=spark,  # type: ignore[arg-type]
                                     issuer=ctx.settings.reports.issuer)
    finally:
        if spark is not None:
            spark.stop()
    note = result.bill.rules_note()
    warn([note] if note else [])
    for path in result.files:
        ctx.echo(str(path))
    return 0


def _report(args: argparse.Namespace, ctx: Context) -> int:
    return write_org_report(args, ctx, Path(args.out))


def _lake_options(f: F) -> F:
    f = click.option("--spark-master", metavar="URL", help="Spark master (default: lake.spark_master, "
                     "else Spark's own settings: local mode)")(f)
    f = click.option("--engine", type=click.Choice(ENGINES), help="default: lake.engine (duckdb)")(f)
    f = click.option("--period", metavar="YYYY-MM|last",
                     help="UTC month (default: the last complete month)")(f)
    return click.option("--lake", "lake_uri", metavar="URI",
                        help="a path or s3://bucket/prefix (default: lake.uri)")(f)


@click.group("org", cls=VerbGroup, invoke_without_command=True,
             help="the org-wide bill across every cluster's lake partitions")
@runs
def command(args: argparse.Namespace, ctx: Context) -> int:
    click.echo(click.get_current_context().get_help())
    return 2


@command.command("bill", help="bill every cluster of the lake as one (DuckDB or Spark)")
@_lake_options
@click.option("--by", default="cluster,team", show_default=True,
              help="comma-separated: cluster, team, namespace, pod, queue, node, pool, model, "
                   "sharing_mode, profile, uuid, day")
@output_option()
@runs
def bill(args: argparse.Namespace, ctx: Context) -> int:
    return _bill(args, ctx)


@command.command("report", help="write the org statement and org FOCUS file of a month")
@_lake_options
@click.option("--out", default="reports", show_default=True, help="output folder (org/period=.../)")
@runs
def report(args: argparse.Namespace, ctx: Context) -> int:
    return _report(args, ctx)
