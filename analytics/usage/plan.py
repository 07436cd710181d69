"""Which hours of a window are read from the roll-up, which from raw samples, and under which
rules: the roll-up never silently stands in for other rules (docs/decisions/0147).

Every rolled-up hour is stamped with the rollup fingerprint of the rules it was computed under
(`rollup_hours`, written with the roll-up). Before a bill reads the roll-up it groups the
window's stamps into runs and compares them with the rules in force:

1. All current: the roll-up covers its hours, raw samples the rest (as before 0147).
2. Some differ (or were rolled up before rules were recorded) and their raw samples are still
   there (`raw_from`: the retention mark `compact` writes, plus the read margin): those hours
   are billed from raw samples under the current rules, with one note saying so and how to
   store them (`gpuledger rollup`).
3. Some differ and their raw samples are gone: refused in one line naming both rule sets and
   the ways out (`--as-computed`, or the settings they were computed under), a
   `RulesRefusal` so a page can say it in its own words (the dashboard's serving store keeps
   no raw samples its warehouse may still have). A reader that shows rather than bills (the
   heatmap) passes `refuse=False`: those hours are read as stored, with a warning naming
   their rules, and the plan's `rules` is None (not the current ones).
4. `as_computed`: the roll-up as stored, under the stored rules (one set: several are refused),
   priced by today's pricing rules; hours it does not cover are computed under the stored rules
   too, so one bill never mixes two sets.
5. Hours rolled up before rules were recorded whose raw samples are gone: billed as stored,
   labelled with no rules (`rules` None) and a warning, never with today's.

The check reads one small row per hour (`warehouse.queries.usage.rollup_stamps`), never the
roll-up itself: the roll-up's scan is the bill's cost (decision 0145).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import polars as pl

from gpuledger.analytics.usage.daily import ROLLUP_SOURCE, Part, Source
from gpuledger.core.errors import InputError
from gpuledger.core.period import Period
from gpuledger.core.rules import Rules
from gpuledger.core.window import DAY, HOUR, Window, as_utc, floor_time
from gpuledger.warehouse.protocols import ReadableWarehouse
from gpuledger.warehouse.queries import usage as q
from gpuledger.warehouse.retention import removed_before


class RulesRefusal(InputError):
    """Rule 3: hours rolled up under other rules whose raw samples are gone; the message is
    the one line the CLI prints, `hint` the `gpuledger rollup` that would store the current
    rules over them where raw samples still exist (e.g. in the warehouse behind a serving
    store)."""

    def __init__(self, message: str, *, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


@dataclass(frozen=True, slots=True)
class Run:
    """Consecutive rolled-up hours `[start, end)` under one fingerprint (None: not recorded)."""

    start: datetime
    end: datetime
    fingerprint: str | None


@dataclass(frozen=True, slots=True)
class UsagePlan:
    """How a window's usage is read, and what its numbers mean."""

    parts: tuple[Part, ...]
    compute: Rules
    """The rules raw parts are computed under (and capacity rows use)."""
    rules: Rules | None
    """The rules the numbers were computed under: what the bill's labels say (None: unknown,
    rolled up before rules were recorded)."""
    span: Window | None = None
    """The hours of the window the roll-up covers."""
    as_computed: bool = False
    notes: tuple[str, ...] = ()
    """What the reader should know (billed from raw samples instead of the roll-up)."""
    warnings: tuple[str, ...] = field(default=())

    @property
    def source(self) -> str:
        """`rollup`, `raw` or `mixed`: where the numbers came from."""
        kinds = {p.source for p in self.parts}
        return kinds.pop() if len(kinds) == 1 else "mixed"


def rollup_span(wh: ReadableWarehouse, window: Window) -> Window | None:
    """The whole hours of `window` the roll-up covers (from its first day to its watermark), or None."""
    mark = wh.watermark(ROLLUP_SOURCE)
    first = q.first_rollup_ts(wh)
    if mark is None or first is None:
        return None
    lo = ceil_hour(max(window.start, floor_time(first, DAY)))
    hi = floor_time(min(window.end, mark), HOUR)
    return Window(lo, hi, window.step) if lo < hi else None


def ceil_hour(moment: datetime) -> datetime:
    floored = floor_time(moment, HOUR)
    return floored if floored == moment else floored + HOUR


def stamp_runs(stamps: pl.DataFrame, span: Window) -> list[Run]:
    """The hours of `span` (whole hours) grouped into runs of one fingerprint; an hour without a
    stamp (rolled up before v010) has None. In Polars: a month is 720 hours, a year 8,760."""
    hours = pl.datetime_range(span.start, span.end - HOUR, HOUR, time_zone="UTC", eager=True).alias("ts")
    frame = pl.DataFrame(hours).join(
        stamps.select(pl.col("ts").cast(hours.dtype), "rules"), on="ts", how="left", maintain_order="left"
    )
    runs = frame.group_by(pl.col("rules").ne_missing(pl.col("rules").shift(1)).cum_sum().alias("run"),
                          maintain_order=True).agg(
        pl.col("ts").min().alias("start"), pl.col("ts").max().alias("last"), pl.col("rules").first()
    )
    return [Run(as_utc(start), as_utc(last) + HOUR, fingerprint)
            for start, last, fingerprint in runs.select("start", "last", "rules").iter_rows()]


def raw_from(wh: ReadableWarehouse, rules: Rules) -> datetime | None:
    """The first hour raw samples can be billed from exactly (its read margin still stored),
    after `compact` removed older ones; None when none were ever removed."""
    removed = removed_before(wh)
    return None if removed is None else ceil_hour(removed + rules.sampling.margin)


def plan_usage(
    wh: ReadableWarehouse, window: Window, rules: Rules, *, source: Source = "auto",
    as_computed: bool = False, what: str = "bill", refuse: bool = True,
) -> UsagePlan:
    """The plan of `window` under `rules` (module docstring); `what` names the caller in
    messages (`bill 2026-11`); `refuse=False` reads rule 3's hours as stored (a warning each)."""
    if source == "raw":
        if as_computed:
            raise InputError(f"{what}: --as-computed bills the roll-up as stored, not with --source raw")
        return UsagePlan((Part(window, "raw"),), rules, rules)
    span = rollup_span(wh, window)
    if span is None:
        whole = Part(window, "rollup") if source == "rollup" else Part(window, "raw")
        return UsagePlan((whole,), rules, rules, as_computed=as_computed)
    runs = stamp_runs(q.rollup_stamps(wh, span.start, span.end), span)
    current = rules.rollup_fingerprint
    stale = [r for r in runs if r.fingerprint != current]
    if not stale:  # rule 1, and rule 4 over a roll-up of today's rules: one small read in all
        return UsagePlan(_as_before(window, span, source), rules, rules, span, as_computed=as_computed)
    stored = _stored_rules(wh, runs)
    if as_computed:
        return _as_computed(window, span, runs, stored=stored, rules=rules, source=source, what=what)
    start = raw_from(wh, rules)
    billable = [_clip(r, start, None) for r in stale]
    gone = [_clip(r, None, start) for r in stale] if start is not None else []
    billable_runs = [r for r in billable if r is not None]
    gone_runs = [r for r in gone if r is not None]
    if refuse and any(r.fingerprint is not None for r in gone_runs):
        raise RulesRefusal(_refusal(what, gone_runs, stored, rules, start),
                           hint=rollup_hint(window, gone_runs))
    if billable_runs and source == "rollup":
        raise InputError(
            f"{what}: {_runs_text(billable_runs, stored)}, not the current {_describe(current, rules)}; "
            "bill from raw samples (--source auto) or as computed (--as-computed)"
        )
    raw = [Part(Window(r.start, r.end, window.step), "raw") for r in _merged(billable_runs)]
    kept = [r for r in runs if r.fingerprint == current] + gone_runs
    parts: tuple[Part, ...] = _as_before(window, span, source)
    if raw:
        parts = (*_rollup_parts(kept, window), *_edges(window, span, source), *raw)
    notes = (_rebill_note(what, window, billable_runs, stored, rules),) if billable_runs else ()
    if gone_runs:  # rule 5 (and 3 with refuse=False): as stored, unlabelled
        return UsagePlan(parts, rules, None, span, notes=notes,
                         warnings=_as_stored_warnings(what, gone_runs, stored, rules))
    return UsagePlan(parts, rules, rules, span, notes=notes)


def _as_stored_warnings(
    what: str, gone: list[Run], stored: dict[str, Rules], rules: Rules,
) -> tuple[str, ...]:
    """What is said of hours read as stored because their raw samples are gone: rolled up
    before rules were recorded (rule 5), or under other rules (rule 3 with `refuse=False`)."""
    unknown = [r for r in gone if r.fingerprint is None]
    known = [r for r in gone if r.fingerprint is not None]
    out = []
    if unknown:
        out.append(f"{what}: the roll-up of {_hours_text(unknown)} was rolled up before rules were "
                   "recorded and its raw samples are gone: billed as stored, under rules not known "
                   "(MIG share basis unknown)")
    if known:
        out.append(f"{what}: {_runs_text(known, stored)} and its raw samples are gone: shown as "
                   f"stored, not under the current {_describe(rules.rollup_fingerprint, rules)}")
    return tuple(out)


def _as_before(window: Window, span: Window, source: Source) -> tuple[Part, ...]:
    """Rule 1: the roll-up for the span (the whole window with `--source rollup`), raw samples
    for the hours around it, in that order (the numbers are summed in it)."""
    if source == "rollup":
        return (Part(window, "rollup"),)
    return (Part(span, "rollup"), *_edges(window, span, source))


def _edges(window: Window, span: Window, source: Source) -> tuple[Part, ...]:
    if source == "rollup":
        return ()
    edges = ((window.start, span.start), (span.end, window.end))
    return tuple(Part(Window(lo, hi, window.step), "raw") for lo, hi in edges if lo < hi)


def _rollup_parts(runs: list[Run], window: Window) -> list[Part]:
    return [Part(Window(r.start, r.end, window.step), "rollup") for r in _merged(runs)]


def _merged(runs: list[Run]) -> list[Run]:
    """Runs in time order, touching ones joined (whatever their fingerprints)."""
    out: list[Run] = []
    for r in sorted(runs, key=lambda r: r.start):
        if out and out[-1].end == r.start:
            out[-1] = Run(out[-1].start, r.end, None)
        else:
            out.append(r)
    return out


def _clip(run: Run, lo: datetime | None, hi: datetime | None) -> Run | None:
    start = run.start if lo is None else max(run.start, lo)
    end = run.end if hi is None else min(run.end, hi)
    return Run(start, end, run.fingerprint) if start < end else None


def _as_computed(
    window: Window, span: Window, runs: list[Run], *, stored: dict[str, Rules], rules: Rules,
    source: Source, what: str,
) -> UsagePlan:
    """Rule 4 (and 5 for a roll-up of unknown rules)."""
    fingerprints = list(dict.fromkeys(r.fingerprint for r in runs))
    if len(fingerprints) > 1:
        raise InputError(
            f"{what} --as-computed: the roll-up of this window was computed under {len(fingerprints)} "
            f"rule sets ({_runs_text(runs, stored)}); bill a window under one of them "
            "(--start/--end), or store the current rules over it (gpuledger rollup)"
        )
    parts = _as_before(window, span, source)
    fingerprint = fingerprints[0]
    if fingerprint is None:
        warning = (f"{what}: the roll-up of {_hours_text(runs)} was rolled up before rules were recorded: "
                   "billed as stored, under rules not known (MIG share basis unknown)")
        return UsagePlan(parts, rules, None, span, as_computed=True, warnings=(warning,))
    if fingerprint not in stored:
        raise InputError(f"{what} --as-computed: the roll-up's {_describe(fingerprint, None)}: nothing "
                         "says what they were; store the current rules over it (gpuledger rollup)")
    used = rules.with_rollup_of(stored[fingerprint])
    if not used.computable and any(p.source == "raw" for p in parts):
        raise InputError(
            f"{what} --as-computed: hours outside the roll-up would be computed under "
            f"{_describe(fingerprint, used)}, which an older gpuledger wrote; bill only the rolled-up "
            f"hours ({_hours_text([Run(span.start, span.end, None)])})"
        )
    return UsagePlan(parts, used, used, span, as_computed=True)


def _stored_rules(wh: ReadableWarehouse, runs: list[Run]) -> dict[str, Rules]:
    """The stored rules of each fingerprint in `runs` (from `rule_sets`)."""
    return stored_rules_of(wh, [r.fingerprint for r in runs])


def stored_rules_of(wh: ReadableWarehouse, fingerprints: list[str | None]) -> dict[str, Rules]:
    """The stored rules of each of `fingerprints` (`rule_sets`; None and unknown ones left out)."""
    wanted = sorted({fp for fp in fingerprints if fp is not None})
    return {fp: Rules.from_json(text) for fp, text in q.rule_sets(wh, wanted).items()}


# Messages -------------------------------------------------------------------------------


def _describe(fingerprint: str | None, rules: Rules | None) -> str:
    if fingerprint is None:
        return "rules not recorded (rolled up before gpuledger recorded them)"
    if rules is None:
        return f"rules {fingerprint} (not in rule_sets)"
    return f"rules {fingerprint} ({rules.describe_rollup()})"


def _hours_text(runs: list[Run]) -> str:
    start, end = min(r.start for r in runs), max(r.end for r in runs)
    return span_text(start, end)


def span_text(start: datetime, end: datetime) -> str:
    """`2026-11-01..11-30` for whole days (the last day included), else the instants."""
    if floor_time(start, DAY) == start and floor_time(end, DAY) == end:
        last = end - DAY
        tail = f"{last:%m-%d}" if last.year == start.year else f"{last:%Y-%m-%d}"
        return f"{start:%Y-%m-%d}" if last == start else f"{start:%Y-%m-%d}..{tail}"
    return f"{start:%Y-%m-%dT%H:%MZ}..{end:%Y-%m-%dT%H:%MZ}"


def _runs_text(runs: list[Run], stored: dict[str, Rules]) -> str:
    """Each fingerprint's hours and rules: `the roll-up of 2026-11-01..11-14 was computed under
    rules X (...) and of 2026-11-15..11-30 under rules Y (...)`."""
    groups: dict[str | None, list[Run]] = {}
    for r in runs:
        groups.setdefault(r.fingerprint, []).append(r)
    said = [
        f"{_hours_text(rs)} {'under' if i else 'was computed under'} {_describe(fp, stored.get(fp or ''))}"
        for i, (fp, rs) in enumerate(groups.items())
    ]
    return "the roll-up of " + " and of ".join(said)


def rollup_hint(window: Window, runs: list[Run]) -> str:
    """The `gpuledger rollup` arguments that store the current rules over `runs` of `window`."""
    month = Period.of(window.start)
    if month.window_at(window.step) == window:
        return f"gpuledger rollup --period {month}"
    start, end = min(r.start for r in runs), max(r.end for r in runs)
    return f"gpuledger rollup --start {start:%Y-%m-%dT%H:%MZ} --end {end:%Y-%m-%dT%H:%MZ}"


def _rebill_note(what: str, window: Window, runs: list[Run], stored: dict[str, Rules], rules: Rules) -> str:
    return (f"{what}: {_runs_text(runs, stored)}; billed from raw samples under the current "
            f"{_describe(rules.rollup_fingerprint, rules)}; run {rollup_hint(window, runs)} to store them")


def _refusal(
    what: str, gone: list[Run], stored: dict[str, Rules], rules: Rules, start: datetime | None,
) -> str:
    known = [r for r in gone if r.fingerprint is not None]
    since = f" (raw samples are kept from {start:%Y-%m-%dT%H:%MZ})" if start is not None else ""
    return (f"{what}: {_runs_text(known, stored)} and its raw samples are gone{since}; the current "
            f"{_describe(rules.rollup_fingerprint, rules)} cannot be applied to it: bill it as "
            "computed (--as-computed) or restore the settings it was computed under")



@dataclass(frozen=True, slots=True)
class StoredRun:
    """A run of the roll-up's hours under one rule set, as `gpuledger status` lists it."""

    run: Run
    rules: Rules | None
    current: bool
    raw_kept: bool | None
    """Whether its raw samples are still there (None: not asked, e.g. on the serving store)."""

    @property
    def description(self) -> str:
        """The rules in a few words (`Rules.describe_rollup`), or why there are none."""
        if self.rules is None:
            return _describe(self.run.fingerprint, None)
        return self.rules.describe_rollup()


def stored_runs(wh: ReadableWarehouse, rules: Rules, *, ask_raw: bool = True) -> list[StoredRun]:
    """The whole roll-up, from its first day to its watermark, as runs of one rule set each."""
    mark, first = wh.watermark(ROLLUP_SOURCE), q.first_rollup_ts(wh)
    if mark is None or first is None or floor_time(mark, HOUR) <= floor_time(first, DAY):
        return []
    span = Window(floor_time(first, DAY), floor_time(mark, HOUR))
    runs = stamp_runs(q.all_rollup_stamps(wh), span)
    stored = _stored_rules(wh, runs)
    start = raw_from(wh, rules) if ask_raw else None
    return [
        StoredRun(r, stored.get(r.fingerprint or ""), r.fingerprint == rules.rollup_fingerprint,
                  (start is None or r.start >= start) if ask_raw else None)
        for r in runs
    ]
