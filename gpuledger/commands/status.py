"""`gpuledger status`: how fresh the warehouse is, per source.

Why: a watermark says how far a collector asked, not what it got. A collector whose exporter
died keeps moving its watermark over empty windows, so the watermark alone looks healthy. This
prints, per source, the watermark, the newest sample it loaded and the gap between them (how far
the collector ran past its last data), plus each sample's age and whether the data is stale
(newest sample older than two collection intervals, `warehouse.queries.freshness`). Data the
simulator alone loaded (`freshness.simulated`, decision 0214, the dashboard banner's rule) is
complete to its end and never stale.

It only reads, and works while a collector holds the writer lock (`collect --follow`): it then
reads the serving store the collector published after its last round (what the dashboard reads,
docs/decisions/0120: watermarks, the raw tail with every device's newest sample, the roll-up,
the newest hour of token samples), never a copy of the warehouse (gigabytes at fleet scale).
Without a published store it asks the collector for one (its next round publishes) and says
so in one line. An empty or missing warehouse is one line, not an error: "nothing collected
yet" is a status.

It also lists the hourly roll-up by the rules it was computed under (runs of days, each with
its rules' fingerprint and description, the current rules marked; hours rolled up under others
say whether their raw samples are still there, so `gpuledger rollup` can store them under the
current rules, docs/decisions/0147).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import click

from gpuledger.command_context import Context
from gpuledger.commands import output_option, runs
from gpuledger.commands._output import emit, render_table

if TYPE_CHECKING:
    from gpuledger.analytics.usage.plan import StoredRun
    from gpuledger.core.config import Settings
    from gpuledger.warehouse import Warehouse
    from gpuledger.warehouse.queries.freshness import SourceFreshness

SCHEMA = "gpuledger.status/v1"
HEADERS = ("source", "watermark", "newest sample", "gap", "age")


@contextmanager
def _reading(ctx: Context) -> Iterator[Warehouse]:
    """The warehouse read-only; the published serving store while a writer holds the file."""
    from gpuledger.core.errors import WarehouseLockedError
    from gpuledger.warehouse.serving_store import open_serving, request_publish, serving_path

    try:
        wh = ctx.open_warehouse(read_only=True)
    except WarehouseLockedError:
        if not serving_path(ctx.warehouse_path).exists():
            request_publish(ctx.warehouse_path)  # the collector's next round publishes one
            raise WarehouseLockedError(
                f"{ctx.warehouse_path}: another process is writing it and no serving store is "
                "published yet; asked the writer for one: run status again after its next round"
            ) from None
        wh = open_serving(ctx.warehouse_path)
    with wh:
        yield wh


def _stamp(moment: datetime | None) -> str | None:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ") if moment is not None else None


def _seconds(span: timedelta | None) -> float | None:
    return span.total_seconds() if span is not None else None


def _as_dict(row: SourceFreshness, now: datetime) -> dict[str, Any]:
    age = now - row.newest_sample if row.newest_sample is not None else None
    return {
        "source": row.source, "watermark": _stamp(row.watermark),
        "newest_sample": _stamp(row.newest_sample), "gap_s": _seconds(row.gap),
        "age_s": _seconds(age),
    }


def _table(rows: list[SourceFreshness], now: datetime) -> list[dict[str, Any]]:
    from gpuledger.warehouse.queries.freshness import describe_age

    def span(value: timedelta | None) -> str:
        return "-" if value is None else describe_age(value)

    return [
        dict(zip(HEADERS, (r.source, _stamp(r.watermark) or "-", _stamp(r.newest_sample) or "-",
                           span(r.gap),
                           span(now - r.newest_sample if r.newest_sample is not None else None)),
                 strict=True))
        for r in rows
    ]


def _summary(newest: datetime | None, now: datetime, *, simulated: bool = False) -> str:
    from gpuledger.warehouse.queries import freshness as f

    limit = f.describe_age(f.STALE_INTERVALS * f.COLLECTION_INTERVAL)
    if newest is None:
        return "no GPU samples yet"
    if simulated:  # decision 0214: complete to its end, nothing collects more
        return (f"simulated: newest GPU sample {_stamp(newest)} (complete to its end, "
                "nothing collects more; staleness does not apply)")
    age = f.describe_age(now - newest)
    if f.is_stale(newest, now):
        return f"STALE: newest GPU sample {_stamp(newest)} is {age} old (more than {limit})"
    return f"fresh: newest GPU sample {_stamp(newest)} is {age} old"


def _run(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.core.config import utcnow
    from gpuledger.warehouse.queries import freshness as f

    path = ctx.warehouse_path
    if not path.exists():
        return _empty(args, ctx, f"no warehouse at {path} yet; run `gpuledger demo` or `gpuledger collect`")
    with _reading(ctx) as wh:
        rows = f.source_freshness(wh)
        newest = f.newest_sample(wh)
        simulated = f.simulated(wh)
        rules = _rollup_rules(wh, ctx.settings)
        now = utcnow()
        holes = _holes(wh, ctx.settings, now)
    if newest is None and all(r.watermark is None and r.newest_sample is None for r in rows):
        return _empty(args, ctx, f"warehouse {path} is empty: nothing collected yet")
    sources = [_as_dict(r, now) for r in rows]
    document = {
        "schema": SCHEMA, "warehouse": str(path), "now": _stamp(now),
        "newest_sample": _stamp(newest),
        "stale": newest is None or (not simulated and f.is_stale(newest, now)),
        "simulated": simulated,
        "stale_after_s": (f.STALE_INTERVALS * f.COLLECTION_INTERVAL).total_seconds(),
        "sources": sources, "rollup_rules": rules, "sample_holes": holes,
    }
    text = None
    if args.format == "table":
        text = render_table(_table(rows, now), HEADERS, rule=False)
        if rules:
            text += "\n\nhourly roll-up by rules\n" + render_table(rules, RULE_HEADERS, rule=False)
        if holes:
            text += ("\n\nsample holes (no GPU sample loaded)\n"
                     + render_table(holes, HOLE_HEADERS, rule=False))
    emit(ctx, args.format, rows=sources, document=document,
         json_text=json.dumps(document, indent=2), text=text,
         footer=[_summary(newest, now, simulated=simulated)])
    return 0


RULE_HEADERS = ("from", "to", "rules", "state", "description")
HOLE_HEADERS = ("from", "to", "state")
HOLE_LOOK_BACK = timedelta(days=7)
"""How far below the watermark `status` lists sample holes (the raw samples of the recent past)."""


def _holes(wh: Warehouse, settings: Settings, now: datetime) -> list[dict[str, Any]]:
    """Spans below the watermark with no GPU sample (`gpuledger.collect_gaps`): open ones are
    read again by every collect; closed ones passed `prometheus.gap_retry_horizon` and only a
    `collect --start` below them reads them again."""
    from gpuledger.collect_gaps import hole_status, horizon
    from gpuledger.collect_pipeline import resume_point
    from gpuledger.core.window import parse_duration
    from gpuledger.warehouse.serving_store import SUFFIX

    if wh.path.endswith(SUFFIX):  # the serving store keeps only the raw tail: no holes to tell
        return []
    step = parse_duration(settings.prometheus.step)
    found = hole_status(wh, settings, resume_point(wh), now, step=step, look_back=HOLE_LOOK_BACK)
    return [{"from": _stamp(h.start), "to": _stamp(h.end),
             "state": (f"open: read again by each collect until {_stamp(h.end + horizon(settings))}"
                       if h.open else f"closed by prometheus.gap_retry_horizon; "
                       f"collect --start {_stamp(h.start)} reads it again")}
            for h in found]


def _rollup_rules(wh: Warehouse, settings: Settings) -> list[dict[str, Any]]:
    """The roll-up as runs of one rule set (`analytics.usage.plan.stored_runs`), for people."""
    from gpuledger.analytics.usage.plan import stored_runs
    from gpuledger.core.rules import Rules
    from gpuledger.warehouse.serving_store import SUFFIX

    served = wh.path.endswith(SUFFIX)  # the serving store keeps no raw samples of rolled-up hours
    return [_rule_row(r) for r in stored_runs(wh, Rules.of(settings), ask_raw=not served)]


def _rule_row(run: StoredRun) -> dict[str, Any]:
    if run.current:
        state = "current"
    elif run.raw_kept is None:
        state = "stale: rolled up under other rules"
    elif run.raw_kept:
        state = "stale: rolled up under other rules, raw samples kept (gpuledger rollup)"
    else:
        state = "stale: rolled up under other rules, raw samples gone (bill --as-computed)"
    return {"from": _stamp(run.run.start), "to": _stamp(run.run.end), "rules": run.run.fingerprint,
            "state": state, "description": run.description}


def _empty(args: argparse.Namespace, ctx: Context, message: str) -> int:
    """One line for an empty or missing warehouse (JSON on one line with `--format json`)."""
    document = {"schema": SCHEMA, "warehouse": str(ctx.warehouse_path), "sources": [],
                "message": message}
    if args.format in ("json", "yaml"):
        emit(ctx, args.format, document=document, json_text=json.dumps(document))
    else:
        ctx.echo(message)
    return 0


@click.command("status", help="per source: watermark, newest sample and the gap between them")
@output_option()
@runs
def command(args: argparse.Namespace, ctx: Context) -> int:
    return _run(args, ctx)
