"""`gpuledger why [POD|WORKLOAD]`: why a workload waits, how long, what it costs, what fits now.

Why: people delete and resubmit pending jobs instead of reading why. Each waiting workload (pod,
Kueue Workload, Volcano PodGroup) gets its class from the status its controllers wrote
(`analytics.waiting.why`: quota exhausted, no capacity of that shape, stranded by fragmentation,
priority / preemption, never satisfiable), how long it has waited and how long such requests
usually wait, and a one-line manifest change that fits now when there is one. With `--lake`, the
other clusters' published capacity now (`reports.lake_capacity`) joins this cluster's, so the
change may send a workload where it fits now ("submit to cluster east": "fits now on n-7
(cluster east, pool train)"). Without a name: every waiting workload plus the cost of waiting
per team and queue. docs/guide/pending.md maps each class to its fix.

How it reads: the table carries the short columns (who, what shape, which class, how long); each
workload's detail and suggestion (up to ~300 characters: card names, the scheduler's message)
follow below it, wrapped at words to the terminal width, so no number or name is split or cut
(issue 32: a 17-character "MIG cards nobody…" said nothing). `-o wide` prints them in the table,
one line per workload, and `-o json` keeps every field.
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

import click

from gpuledger.command_context import Context
from gpuledger.commands import output_option, runs
from gpuledger.commands._output import emit, table_width

COLUMNS = ("namespace", "name", "kind", "shape", "reason", "waited_hours", "usual_wait_hours",
           "detail", "suggestion")
SHORT_COLUMNS = COLUMNS[:-2]
"""The table's columns (`-o table`): the text ones (`detail`, `suggestion`) read below it."""
COST_COLUMNS = ("team", "queue", "waiting", "gpu_hours_waiting", "servable_share")
INDENT = "    "


def explained(rows: Sequence[Mapping[str, Any]], width: int | None) -> list[str]:
    """Each workload's detail and suggestion below the table: `namespace/name: detail`, wrapped
    at spaces to `width` (one line when None: a pipe), never inside a word, so a number, a card
    or a node name is never split or cut."""
    def wrap(text: str, first: str) -> list[str]:
        if width is None:
            return [first + text]
        return textwrap.wrap(text, width, initial_indent=first, subsequent_indent=INDENT,
                             break_long_words=False, break_on_hyphens=False)

    out: list[str] = []
    for r in rows:
        if r.get("detail"):
            out.extend(wrap(str(r["detail"]), f"{r['namespace']}/{r['name']}: "))
        if r.get("suggestion"):
            out.extend(wrap(str(r["suggestion"]), f"{INDENT}suggestion: "))
    return ["", "Why each waits (`-o wide`: in the table, one line each):", *out] if out else []


@click.command("why", help="why a workload is pending (all waiting workloads without a name)")
@click.argument("target", required=False)
@click.option("--team", default=None, help="only this team's workloads")
@click.option("--lake", "lake_uri", metavar="URI",
              help="also suggest other clusters with room now (their capacity in this org lake)")
@output_option()
@runs
def command(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.analytics.waiting.fleet import why_document
    from gpuledger.core.config import utcnow
    from gpuledger.dashboards.capacity_data import fleet_now

    with ctx.open_warehouse(read_only=True) as wh:
        fleet = fleet_now(wh, ctx.settings)
    if args.lake_uri:
        from dataclasses import replace

        from gpuledger.commands.publish import lake_of
        from gpuledger.reports.lake_capacity import read_capacity

        fleet = replace(fleet, elsewhere=read_capacity(lake_of(args, ctx)).capacity)
    document = why_document(fleet, utcnow(), args.target, ctx.settings.sharing.mig_share_basis)
    if args.team:
        document["waiting"] = [r for r in document["waiting"] if r["team"] == args.team]
        document["by_queue"] = [q for q in document["by_queue"] if q["team"] == args.team]
    short = args.format == "table"
    title = f"Waiting workloads ({document['cluster']}, status at {document['at'] or 'never'})"
    footer = explained(document["waiting"], table_width()) if short else []
    emit(ctx, args.format, rows=document["waiting"], columns=SHORT_COLUMNS if short else COLUMNS,
         document=document, title=title, footer=footer)
    if args.format in ("table", "wide") and not args.target and document["by_queue"]:
        emit(ctx, args.format, rows=document["by_queue"], columns=COST_COLUMNS, title="\nCost of waiting")
    return 0
