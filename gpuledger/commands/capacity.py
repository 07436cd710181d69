"""`gpuledger capacity`: what is free right now, by shape, and each queue's headroom.

Why: the person waiting for a GPU asks where a shape fits now, not how many slices are free.
Per cluster, pool and GPU model: `ready` (schedulable now: allocatable minus running requests,
whole GPUs, MIG instances, time-slice replicas, HAMi memory/cores, DRA devices) and `placeable`
(MIG cards where the profile fits beside the instances, by a layout change); per ClusterQueue and
flavor: nominal, used, free, borrowable, lendable and who borrows (`dashboards.capacity_data`,
the same document as `/api/v1/capacity`).
"""

from __future__ import annotations

import argparse

import click

from gpuledger.command_context import Context
from gpuledger.commands import output_option, runs
from gpuledger.commands._output import emit

COLUMNS = ("cluster", "pool", "model", "shape", "ready", "placeable", "nodes")
QUEUE_COLUMNS = ("cluster_queue", "flavor", "resource", "nominal", "used", "free", "borrowable",
                 "lendable", "borrowers")


@click.command("capacity", help="what is free right now, by shape, and each queue's headroom")
@click.option("--shape", default=None, help="only shapes containing this text, e.g. 3g.40gb")
@output_option()
@runs
def command(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.analytics.waiting.fleet import capacity_document
    from gpuledger.dashboards.capacity_data import fleet_now

    with ctx.open_warehouse(read_only=True) as wh:
        document = capacity_document(fleet_now(wh, ctx.settings, pending=False))
    if args.shape:
        document["capacity"] = [r for r in document["capacity"] if args.shape in r["shape"]]
    rows = [{**r, "nodes": ", ".join(r["nodes"][:4]) + (" …" if len(r["nodes"]) > 4 else "")}
            for r in document["capacity"]]
    emit(ctx, args.format, rows=rows, columns=COLUMNS, document=document,
         title=f"Capacity now ({document['cluster']}, inventory at {document['at'] or 'never'})")
    if args.format in ("table", "wide") and document["queues"]:
        queues = [{**q, "borrowers": ", ".join(q["borrowers"])} for q in document["queues"]]
        emit(ctx, args.format, rows=queues, columns=QUEUE_COLUMNS, title="Queue headroom")
    return 0
