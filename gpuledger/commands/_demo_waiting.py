"""The demo's "capacity now" table and top pending reasons (`gpuledger demo`, issue 35).

Why the simulator's pending scenario: the simulated month has no workload that waits, so the
demo adds the statuses of `simulator.pending` (each class of `gpuledger why`, written as Kueue,
Volcano and kube-scheduler write them) to the first team namespace, parsed by the collector's
own code (`collectors.pending.frames_from_objects`) and stored at the newest inventory snapshot.
They are classified against the demo fleet's real capacity and queues, so the verdicts are the
demo cluster's, not the scenario's ground truth. Only the waiting workloads are added (no nodes,
no queues): the bill and the plans of the month stay as they were.
"""

from __future__ import annotations

import textwrap
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from gpuledger.commands._output import render_table, table_width

if TYPE_CHECKING:
    import polars as pl

    from gpuledger.command_context import Context
    from gpuledger.warehouse import Warehouse

TOP_SHAPES = 12
WAITED_HOURS = (0.5, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144)
"""How long each added workload has waited at the snapshot (varied, so the wait quantiles differ)."""


def add_waiting(wh: Warehouse) -> int:
    """Store the scenario's waiting workloads in the first team namespace; return how many."""
    import polars as pl

    from gpuledger.collectors.pending import frames_from_objects
    from gpuledger.simulator import pending as scenario
    from gpuledger.simulator.tenants import LOCAL_QUEUES
    from gpuledger.warehouse import LoadBatch
    from gpuledger.warehouse.queries.waiting import namespace_teams, snapshot_time

    at = snapshot_time(wh)
    teams = [(ns, t) for ns, t in namespace_teams(wh).iter_rows() if t]
    if at is None or not teams:
        return 0
    ns, team = teams[0]
    objects = [m for m in scenario.manifests("demo", ns, team=team, local_queue=LOCAL_QUEUES[0])
               if m["kind"] in ("Pod", "Event", "ResourceClaim", "Workload", "PodGroup")]
    frame = frames_from_objects(objects, at)["pending_workloads"]
    created = [at - timedelta(hours=WAITED_HOURS[i % len(WAITED_HOURS)]) for i in range(frame.height)]
    frame = frame.with_columns(pl.Series("created_at", created, dtype=frame.schema["created_at"]))
    wh.load(LoadBatch({"pending_workloads": pl.concat([frame, _earlier(frame, at)])}))
    return frame.height


def _earlier(frame: pl.DataFrame, at: datetime) -> pl.DataFrame:
    """The same requests a day earlier, waits that ended (they started): the history the usual
    wait of a shape is read from."""
    import polars as pl

    dtype = frame.schema["created_at"]
    seen = [at - timedelta(days=1, hours=h) for h in WAITED_HOURS[: frame.height]]
    return frame.with_columns(
        (pl.col("name") + "-earlier").alias("name"),
        pl.Series("created_at", [s - timedelta(hours=1 + i % 4) for i, s in enumerate(seen)], dtype=dtype),
        pl.Series("first_seen", seen, dtype=dtype), pl.Series("last_seen", seen, dtype=dtype))


def print_waiting(wh: Warehouse, ctx: Context) -> None:
    """Add the waiting workloads, then print capacity now and the top pending reasons."""
    from gpuledger.analytics.waiting.fleet import capacity_document, top_reasons, why_document
    from gpuledger.core.config import utcnow
    from gpuledger.dashboards.capacity_data import fleet_now

    added = add_waiting(wh)
    fleet = fleet_now(wh, ctx.settings)
    capacity = capacity_document(fleet)["capacity"]
    rows: list[dict[str, Any]] = sorted(capacity, key=lambda r: -float(r["ready"]))[:TOP_SHAPES]
    ctx.echo("")
    ctx.echo(f"Capacity now ({fleet.cluster}), by shape: `gpuledger capacity` (top {TOP_SHAPES} by ready)")
    ctx.echo(render_table([{**r, "nodes": len(r["nodes"])} for r in rows],
                          ("pool", "model", "shape", "ready", "placeable", "nodes")))
    if not added:
        return
    doc = why_document(fleet, fleet.at or utcnow(), basis=ctx.settings.sharing.mig_share_basis)
    ctx.echo("")
    ctx.echo(f"Top pending reasons ({len(doc['waiting'])} waiting): `gpuledger why`, docs/guide/pending.md")
    width = table_width()
    for reason, count in top_reasons(doc):
        example = next(r for r in doc["waiting"] if r["reason"] == reason)
        line = f"  {count:>3}  {reason:<27} e.g. {example['name']}: {example['detail']}"
        ctx.echo(line if width is None else "\n".join(textwrap.wrap(  # never inside a number
            line, width, subsequent_indent=" " * 7, break_long_words=False, break_on_hyphens=False)))
