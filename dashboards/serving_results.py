"""Publishing the serving store, with the page results that need a month of raw samples.

Why (docs/decisions/0121-serving-results.md): the serving store (`warehouse.serving_store`)
keeps only the raw samples the roll-up does not hold yet, which is enough for every bill, idle
list, heatmap and queue chart, but not for the analyses that read a whole month of raw samples:
the recommendations (activity and memory percentiles per workload), the token costs (counter
increases of every vLLM series) and the advice kinds the Fleet and Plans pages show. Those are
computed here, on the warehouse itself, with the very functions the CLI calls
(`analytics.workloads.recommend.recommend`, `analytics.workloads.tokens.team_token_costs`,
`analytics.advice.KINDS`), and stored in the serving store per month. A result is computed
again only when its basis changed: the newest whole hour of GPU samples in the month (a closed
month never changes), the analysis settings, the rules' fingerprint (`core.rules`, which also
moves when a rule's code changes) and when the warehouse was created (0256). So a `collect
--follow` minute recomputes nothing, and once an hour the running month is recomputed.

Each result records the rules it was computed under (the month's bill's, for the results priced
by it; docs/decisions/0150). The dashboard may run under other settings than the writer: a page
or API answer whose stored result carries other rules than the server's says so
(`rules_note`, `OTHER_RULES`) rather than showing it as current.

Two steps (docs/decisions/0140): `publish_serving` (the tables; every writer's close, the
dashboard's own writes) takes seconds; `refresh_serving` (the tables and the results) takes
minutes at 1,000 GPUs and runs as its own command, `gpuledger refresh-serving`, on a read-only
warehouse after `collect`, or in each `collect --follow` round (the one process that can read
the warehouse then). The dashboard never computes these itself from a serving store.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import sys
import time
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

import polars as pl

from gpuledger.analytics.advice import FLEET_SHAPING_KINDS
from gpuledger.analytics.workloads.tokens import GENERATION_WEIGHT
from gpuledger.core.config import Settings
from gpuledger.core.errors import GpuledgerError
from gpuledger.core.period import Period
from gpuledger.core.rules import Rules
from gpuledger.core.rules_record import RecordedRules, differs, label
from gpuledger.core.window import DAY, HOUR, floor_time
from gpuledger.dashboards.month_inputs import allocation_stats_first, month_bill, month_usage
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.queries.freshness import created_at, data_range, newest_sample
from gpuledger.warehouse.serving_results_table import stored_result
from gpuledger.warehouse.serving_store import Publication, PublishStats, is_served, record_published

if TYPE_CHECKING:
    from gpuledger.analytics.advice.month import MonthAnalyses
    from gpuledger.analytics.advice.run import Advice, AdviceFn
    from gpuledger.warehouse.day_parts import DayParts

log = logging.getLogger(__name__)

RECOMMENDATIONS = "recommendations"
FLEET_KINDS = FLEET_SHAPING_KINDS
PLANS_KINDS = tuple(k for k in FLEET_SHAPING_KINDS if k != "fragmentation")
"""The advice kinds the Fleet and Plans pages show (`dashboards.pages.advice_panels`); the Plans
page leaves fragmentation to the Fleet page."""
ADVICE_KINDS: tuple[str, ...] = tuple(dict.fromkeys((*FLEET_KINDS, *PLANS_KINDS)))
TOKEN_COSTS = "token_costs"
PRICED_FRAMES = (RECOMMENDATIONS, TOKEN_COSTS)
"""The frame results priced by the month's bill (they read it, and carry its rules)."""
NAMES: tuple[str, ...] = (TOKEN_COSTS, RECOMMENDATIONS, *(f"advice:{k}" for k in ADVICE_KINDS))
"""Every result of a month, in the order a refresh computes them. The token costs first: they read
the bill alone, so they run before the per-allocation usage exists (at 10,000 GPUs under a 2 GiB
DuckDB bound they were the refresh's peak, 5.5 GiB, with the bill and the usage beside DuckDB's
bound; 4.9 GiB since, the recommendations' usage the peak)."""
MAX_MONTHS = 13
"""Months (newest first) whose results are kept current: a year and the one before it."""
LAST_TIMINGS: dict[str, float] = {}
"""Seconds per result computed by the last publish in this process (for the benchmark)."""
NOT_COMPUTED = ("not computed yet: the month's results are stored by `gpuledger refresh-serving` "
                "(run after collect)")
"""What a page shows for a result the writer has not stored (docs/decisions/0141)."""
OTHER_RULES = ("computed under other rules ({stored}) than the server's ({current}): run "
               "`gpuledger refresh-serving` with the server's settings to compute it under them")
"""What a page or API answer says of a stored result whose rules are not the server's (0150)."""
TOKEN_COSTS_SCHEMA: dict[str, Any] = {
    "team": pl.String, "model_name": pl.String, "pods": pl.UInt32, "prompt_tokens": pl.Float64,
    "generation_tokens": pl.Float64, "gpu_cost": pl.Float64, "cost_per_m_prompt": pl.Float64,
    "cost_per_m_generated": pl.Float64, "cost_per_m_tokens": pl.Float64,
}
"""`analytics.workloads.tokens.team_token_costs`'s columns (a test holds it equal to a computed frame's)."""
UNRELATED = {"access", "prometheus", "kubernetes", "lake", "reports", "plans", "retention", "warehouse",
             "source"}
"""Settings sections no stored result depends on (left out of the basis fingerprint, so the
dashboard's and the collector's configurations may differ there without recomputing)."""


def publish_serving(wh: Warehouse, settings: Settings) -> PublishStats:
    """Publish the serving store of `wh` (a writer, after it committed): the tables only, the
    stored results kept as they are (seconds: what a command's close and the dashboard's own
    short writer pay; docs/decisions/0140)."""
    from gpuledger.core.rules import SamplingRules

    with Publication(wh, margin=SamplingRules.of(settings).margin) as _pub:
        pass
    return _pub.stats


def refresh_serving(wh: Warehouse, settings: Settings, *, month: MonthAnalyses | None = None) -> PublishStats:
    """Publish the serving store of `wh` with the month results whose basis changed computed on
    it (`gpuledger refresh-serving`, a `collect --follow` round). `wh` may be read-only: the
    publish lock, not the writer lock, keeps publishers apart (docs/decisions/0140). `month`:
    the analyses the caller has just computed for one month on this very warehouse (the demo):
    its recommendations and advice kinds stored as they are, its bill and usage the ones the
    month's other results read, instead of computed again (0256)."""
    from gpuledger.core.rules import SamplingRules

    handed: dict[tuple[str, str], bytes] = {}
    billed: dict[str, dict[str, Any]] = {}
    if month is not None:
        handed = {(f"advice:{a.kind}", month.period): advice_payload(a) for a in month.advice}
        handed[RECOMMENDATIONS, month.period] = _frame_payload(month.recommendations.recommendations)
        billed[month.period] = {"bill": month.bill, "rules": month.bill.rules, "usage": month.usage}
    with Publication(wh, margin=SamplingRules.of(settings).margin) as pub:
        refresh_results(pub, wh, settings, handed=handed, billed=billed)
    return pub.stats


def publish_quietly(wh: Warehouse, settings: Settings, *, results: bool = False) -> PublishStats | None:
    """`publish_serving` (`refresh_serving` with `results`) for a command's writer: a failure is
    one line on stderr (the command's own writes are committed; the dashboard keeps serving the
    last published store)."""
    if not is_served(wh.path):
        return None
    try:
        return (refresh_serving if results else publish_serving)(wh, settings)
    except GpuledgerError as exc:
        print(f"gpuledger: serving store not published ({exc}); the dashboard shows the last one",
              file=sys.stderr, flush=True)
        return None


class PublishingWarehouse(Warehouse):
    """A command's writer that publishes the serving store's tables when it closes (never the
    month results: `gpuledger refresh-serving` computes those after it, without the writer
    lock), then records the warehouse stamp (`warehouse.serving_store.record_published`)."""

    settings: Settings

    @classmethod
    def wrap(cls, wh: Warehouse, settings: Settings) -> PublishingWarehouse:
        out = cls(wh.con, wh.path, wh.read_only)
        out.settings = settings
        return out

    def close(self) -> None:
        served = is_served(self.path)
        try:
            publish_quietly(self, self.settings)
        finally:
            super().close()
        if served:
            record_published(self.path)


def settings_fingerprint(settings: Settings) -> str:
    text = settings.model_dump_json(exclude=UNRELATED)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def wanted(wh: Warehouse, settings: Settings) -> list[tuple[str, str]]:
    """(period, basis) of the months whose results the pages may ask for, newest first. The
    basis: the month's newest whole hour of samples, the settings and rules, and when the
    warehouse was created (a demo run again into its folder makes a new warehouse whose newest
    hour and settings may equal the old one's)."""
    span = data_range(wh)
    newest = newest_sample(wh)
    if span is None or newest is None:
        return []
    born = created_at(wh)  # a warehouse made again at the same path: its results are not kept
    fingerprint = f"{settings_fingerprint(settings)}|{Rules.of(settings).fingerprint}|{born}"
    cut = floor_time(newest, HOUR)
    return [(str(month), f"{min(month.window.end, cut).isoformat()}|{fingerprint}")
            for month in Period.newest_first(*span)[:MAX_MONTHS]]


def refresh_results(pub: Publication, wh: Warehouse, settings: Settings, *,
                    handed: Mapping[tuple[str, str], bytes] | None = None,
                    billed: Mapping[str, dict[str, Any]] | None = None) -> int:
    """Compute the results whose basis changed (taking a payload from `handed`, keyed by name
    and period, where there is one; a month's bill and usage from `billed`, keyed by period);
    returns how many were stored."""
    stored = pub.stored_basis()
    current = RecordedRules.of(Rules.of(settings))
    done = 0
    LAST_TIMINGS.clear()
    months = wanted(wh, settings)
    pending = [(period, basis, [name for name in NAMES if stored.get((name, period)) != basis])
               for period, basis in months]
    if not any(names for _, _, names in pending):
        return 0  # a `collect --follow` minute: nothing to compute, no day parts opened
    from gpuledger.warehouse.day_parts import kept_day_parts

    # each result reads its month once: where DuckDB's bound cannot hold the warehouse, its
    # cached blocks are handed back after each long read and each result, not held beside the
    # frames (0280)
    with wh.reading_once(), kept_day_parts(wh.path) as days:
        wh.hand_back_cache()  # the publish's own reads
        if days is not None:
            # the oldest month's days, and the day before it (its token counters' lookback)
            days.prune((Period.exact(months[-1][0]).window.start - DAY).date())
        for period, basis, names in pending:
            # the month's bill and usage, computed once for the results (or handed in), and
            # let go after the last result that reads them: the per-minute advice kinds after
            # it run without them (at 1,000 GPUs a few hundred MB of frames)
            bills: dict[str, Any] = dict((billed or {}).get(period, {}))
            if days is not None and "usage" not in bills and any(map(reads_usage_of, names)):
                allocation_stats_first(wh, settings, period, days)
            last_reader = max((i for i, name in enumerate(names) if reads_bills(name)), default=-1)
            for i, name in enumerate(names):
                started = time.perf_counter()
                try:
                    payload = ((handed or {}).get((name, period))
                               or compute(wh, settings, name, period, bills, days=days))
                    LAST_TIMINGS[f"{name} {period}"] = round(time.perf_counter() - started, 2)
                except Exception as exc:  # a result never stops a publish (or a command)
                    # one line (DuckDB's out-of-memory error adds a paragraph of tuning advice)
                    log.warning("serving store: %s for %s not stored: %s", name, period,
                                (str(exc).splitlines() or [type(exc).__name__])[0])
                else:
                    pub.put_result(name, period, basis, payload, rules=_rules_of(name, bills, current))
                    done += 1
                if i >= last_reader:
                    bills.clear()
                wh.hand_back_cache()
    return done


def reads_bills(name: str) -> bool:
    """Whether the result `name` reads the month's bill or its per-allocation usage (`compute`'s
    `bills`)."""
    from gpuledger.analytics.advice.run import reads_bill

    return name in PRICED_FRAMES or reads_bill(_kind(name)) or reads_usage_of(name)


def reads_usage_of(name: str) -> bool:
    """Whether the result `name` reads the month's per-allocation usage (`compute`'s `bills`)."""
    if name in PRICED_FRAMES:
        return name == RECOMMENDATIONS
    from gpuledger.analytics.advice.run import reads_usage

    return reads_usage(_kind(name))


def _kind(name: str) -> AdviceFn:
    """The advice kind a result `advice:<kind>` stores."""
    from gpuledger.analytics.advice import KINDS

    return KINDS.get(name.removeprefix("advice:"))


def _rules_of(name: str, bills: Mapping[str, Any], current: RecordedRules) -> RecordedRules | None:
    """The rules a result was computed under: its bill's where a bill priced it (the bill knows
    what its numbers carry; never recomputed from settings; `month_inputs.month_bill` keeps them
    under "rules", which outlive the bill), else the settings' own."""
    if name not in PRICED_FRAMES or "rules" not in bills:
        return current
    rules = bills["rules"]
    return RecordedRules.of(rules) if rules is not None else None


def compute(wh: Warehouse, settings: Settings, name: str, period: str,
            bills: dict[str, Any] | None = None, *, days: DayParts | None = None) -> bytes:
    """One result's payload: Arrow IPC for a frame, JSON for an advice kind. `bills`: what the
    month's results share, filled by the first that needs it: the month's `bill` (and its
    `rules`) and its per-allocation `usage` (`dashboards.month_inputs`), so a refresh bills
    a month once and reads its allocation statistics once (the recommendations, the token
    costs and every advice kind that prices from the bill take them from here). `days`: the
    refresh's day parts, for the kinds that read per-minute inputs a day at a time."""
    window = Period.exact(period).window
    bills = {} if bills is None else bills
    if name in PRICED_FRAMES:
        from gpuledger.analytics.workloads.recommend import recommend
        from gpuledger.analytics.workloads.tokens import team_token_costs

        frame = (recommend(wh, window, settings,
                           usage=month_usage(wh, window, settings, bills, days)).recommendations
                 if name == RECOMMENDATIONS else
                 team_token_costs(wh, window, settings, bill=month_bill(wh, window, settings, bills),
                                  generation_weight=GENERATION_WEIGHT, days=days))
        return _frame_payload(frame)
    from gpuledger.analytics.advice.run import reads_bill, reads_days, reads_usage

    kind = _kind(name)
    shared: dict[str, Any] = {}
    if reads_usage(kind):  # a kind handed the usage reads the bill only to make it
        shared["usage"] = month_usage(wh, window, settings, bills, days)
    elif reads_bill(kind):
        shared["bill"] = month_bill(wh, window, settings, bills)
    if days is not None and reads_days(kind):
        shared["days"] = days
    return advice_payload(kind(wh, window, settings, **shared))


def _frame_payload(frame: pl.DataFrame) -> bytes:
    """A frame result as stored: Arrow IPC."""
    buffer = io.BytesIO()
    frame.write_ipc(buffer)
    return buffer.getvalue()


def advice_payload(advice: Advice) -> bytes:
    """An advice kind as stored: its rows and evidence document as JSON."""
    body = {"kind": advice.kind, "rows": advice.rows, "document": advice.document}
    return json.dumps(body, default=_jsonable).encode()


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def stored_frame(wh: Warehouse, name: str, period: str) -> pl.DataFrame | None:
    """A stored frame result, or None (not a serving store, or not computed)."""
    found = stored_result(wh, name, period)
    return pl.read_ipc(io.BytesIO(found.payload)) if found is not None else None


def rules_note(wh: Warehouse, name: str, period: str, current: Rules) -> str | None:
    """What a page says beside a stored result computed under other rules than `current` (the
    server's), or None (the same rules, or nothing stored)."""
    found = stored_result(wh, name, period, payload=False)
    if found is None or not differs(found.rules, current):
        return None
    return OTHER_RULES.format(stored=label(found.rules), current=label(RecordedRules.of(current)))


def not_computed_frame(name: str) -> pl.DataFrame:
    """The frame a page gets for a result not stored yet: no rows, the computed frame's columns."""
    from gpuledger.analytics.workloads import recommend

    if name == RECOMMENDATIONS:  # the per-workload frame `recommend` returns, of no rows
        return recommend.per_workload(pl.DataFrame(schema=recommend._SCHEMA))
    return pl.DataFrame(schema=TOKEN_COSTS_SCHEMA)


def not_computed_advice(kind: str) -> Any:
    """An advice kind not stored yet: one row that says so (the pages show its reason), an
    empty document."""
    from gpuledger.analytics.advice.run import Advice

    row = {"kind": kind, "scope": "-", "current": "-", "recommended": "-", "monthly_saving": 0.0,
           "reason": NOT_COMPUTED}
    return Advice(kind=kind, rows=[row], document={"not_computed": NOT_COMPUTED})


def stored_advice(wh: Warehouse, kind: str, period: str) -> Any:
    """A stored advice kind as `analytics.advice.run.Advice`, or None."""
    from gpuledger.analytics.advice.run import Advice

    found = stored_result(wh, f"advice:{kind}", period)
    if found is None:
        return None
    body = json.loads(found.payload)
    return Advice(kind=body["kind"], rows=body["rows"], document=body["document"])
