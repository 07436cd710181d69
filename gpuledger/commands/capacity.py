"""`gpuledger capacity [--lake URI]`: what is free right now, by shape, and each queue's headroom.

Why: the person waiting for a GPU asks where a shape fits now, not how many slices are free.
Per cluster, pool and GPU model: `ready` (schedulable now: allocatable minus running requests,
whole GPUs, MIG instances, time-slice replicas, HAMi memory/cores on the best card, DRA devices)
and `placeable` (MIG cards where the profile fits beside the instances, by a layout change); per
ClusterQueue and flavor: nominal, used, free, borrowable, lendable and who borrows
(`analytics.waiting.fleet.capacity_document`, the same document as `/api/v1/capacity`). With
`--lake`: every cluster that published its capacity to the org lake (`reports.lake_capacity`),
each row with its cluster.
"""

from __future__ import annotations

import argparse
from typing import Any

import click

from gpuledger.command_context import Context
from gpuledger.commands import output_option, runs
from gpuledger.commands._output import emit

COLUMNS = ("cluster", "pool", "model", "shape", "ready", "placeable", "nodes")
QUEUE_COLUMNS = ("cluster_queue", "flavor", "resource", "nominal", "used", "free", "borrowable",
                 "lendable", "borrowers")


def _document(args: argparse.Namespace, ctx: Context) -> tuple[dict[str, Any], str]:
    """The capacity document and its title: this warehouse's, or the org lake's."""
    from gpuledger.analytics.waiting.fleet import capacity_document, capacity_document_of

    if args.lake_uri:
        from gpuledger.commands.publish import lake_of
        from gpuledger.reports.lake_capacity import read_capacity

        lake = read_capacity(lake_of(args, ctx))
        when = ", ".join(f"{c} at {t or 'never'}" for c, t in sorted(lake.at.items()))
        doc = capacity_document_of("org", None, lake.capacity, lake.headroom, clusters=lake.at)
        return doc, f"Capacity now (org lake: {when})"
    from gpuledger.dashboards.capacity_data import fleet_now

    with ctx.open_warehouse(read_only=True) as wh:
        doc = capacity_document(fleet_now(wh, ctx.settings, pending=False))
    return doc, f"Capacity now ({doc['cluster']}, inventory at {doc['at'] or 'never'})"


def _listed(values: list[Any], most: int = 4) -> str:
    return ", ".join(map(str, values[:most])) + (" …" if len(values) > most else "")


def _card(name: str) -> str:
    """`node/GPU-cae1207c-d9a1-…` → `node/GPU-cae1207c` in the table (JSON keeps the uuid)."""
    node, _, uuid = name.rpartition("/")
    return f"{node}/{uuid[:12]}" if node else name[:12]


@click.command("capacity", help="what is free right now, by shape, and each queue's headroom")
@click.option("--shape", default=None, help="only shapes containing this text, e.g. 3g.40gb")
@click.option("--lake", "lake_uri", metavar="URI",
              help="every cluster that published to this org lake (a path or s3://bucket/prefix)")
@output_option()
@runs
def command(args: argparse.Namespace, ctx: Context) -> int:
    document, title = _document(args, ctx)
    if args.shape:
        document["capacity"] = [r for r in document["capacity"] if args.shape in r["shape"]]
    rows = [{**r, "nodes": _listed([_card(c["card"]) for c in r["per_card"]] or r["nodes"])}
            for r in document["capacity"]]
    emit(ctx, args.format, rows=rows, columns=COLUMNS, document=document, title=title)
    if args.format in ("table", "wide") and document["queues"]:
        columns = ("cluster", *QUEUE_COLUMNS) if args.lake_uri else QUEUE_COLUMNS
        queues = [{**q, "borrowers": ", ".join(q["borrowers"])} for q in document["queues"]]
        emit(ctx, args.format, rows=queues, columns=columns, title="Queue headroom")
    return 0
