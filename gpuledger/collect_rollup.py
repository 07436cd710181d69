"""The roll-up inside `gpuledger collect`: hours are rolled up as the samples they need arrive.

`analytics.usage.rollup.rollup_batch` computes `card_hours_hourly` and `allocations` of an
hour-aligned window from raw samples, reading `SamplingRules.margin` of context on both sides.
Collect calls it after each chunk is loaded (in the loader thread, the only writer), by these
rules (docs/decisions/0126):

1. Exact hours. An hour is rolled up once the samples up to its end plus the margin are loaded
   (the Prometheus watermark, `collect_pipeline.resume_point`), or once the collect window's
   end is reached (`RollupPlan.to_end`: the user said the data ends there). The roll-up
   watermark (`card_hours_hourly`) never passes the loaded samples.
2. Settled. Hours rolled up without their full margin (the last ones before a window end) are
   provisional: `SETTLED_SOURCE` records where the exact hours end, and the next run rolls up
   again from there, so a later chunk corrects them.
3. Day-anchored windows. `allocations` rows are clipped to the roll-up window and split at UTC
   midnight, so a window starting mid-day would leave the earlier window's last row overlapping
   the new one. Every roll-up window therefore starts at a UTC midnight and ends at or before
   the next: the last roll-up of a day is `[midnight, next midnight)` (the window
   `pipeline.rollup` uses), whatever the chunk size, the kill points or the resumes, so a
   killed and resumed backfill stores exactly what an uninterrupted one does.
4. Grain. A backfill rolls up whole days (`DAY`: each day once, the cost of `pipeline.rollup`);
   `--follow` rolls up by the hour (`HOUR`: the day so far again every hour, so the roll-up is
   never more than an hour and the margin behind the samples).
5. Re-rolled under new rules. Every rolled-up hour remembers the rules it was computed under
   (docs/decisions/0147); `reroll` computes again, under the current rules, the days holding
   hours rolled up under others (`gpuledger rollup`, and `gpuledger compact` before it removes
   their raw samples), by the same day windows (rule 3), without moving any watermark.
7. Late samples (docs/decisions/0185). A `gpu_samples` load below the roll-up's watermark (a
   re-read gap, an explicit `--start` below it, a reload) leaves `ROLLUP_DIRTY` in the same
   transaction (`warehouse.store`); `advance` resumes from the first hour it changes
   (`dirty_from`: the margin before it) and clears it with the roll-up that reaches the
   watermark again, and `compact` and finalize roll such hours up again before they freeze
   them (`analytics.usage.rollup.reroll_dirty`). Provisional hours (rule 2) are rolled up again
   whenever samples past those they were computed with have been loaded (`READ_SOURCE`), not
   only when another hour becomes exact: a collect ending 10 minutes into an hour, then one 25
   minutes in, had left the hour before it as the first saw it.
6. Re-rolled when their inputs change. DRA claims can arrive after the hours they hold were
   rolled up: an API list or an audit history loaded later, or a claim rebuilt from
   Prometheus whose device the series name only hours after its pod reserved it
   (docs/decisions/0165). The collect pipeline asks which hours the new DRA rows change
   (`analytics.devices.dra_history.changed_span`) before it loads them, and `reroll_changed`
   rolls up again, under the current rules, the days of those hours the roll-up already holds
   (rule 3's windows, no watermark moved), so the default bill, which reads the roll-up, sees
   them. Days whose raw samples are gone are left as they are (`RerolledChanges.left`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from gpuledger.core.config import Settings
from gpuledger.core.errors import InputError
from gpuledger.core.window import DAY, HOUR, Window, floor_time

if TYPE_CHECKING:
    from gpuledger.analytics.usage.plan import Run
    from gpuledger.core.rules import Rules
    from gpuledger.warehouse import Warehouse

SETTLED_SOURCE = "card_hours_hourly.settled"
"""Where the exactly rolled-up hours end (rule 2); at or before the roll-up watermark (the
warehouse's `ROLLUP_SETTLED`, which finalize reads)."""
READ_SOURCE = "card_hours_hourly.read_to"
"""How far the loaded samples reached when the roll-up last ran (rule 7)."""


@dataclass(frozen=True)
class RollupPlan:
    """How collect rolls up: `grain` DAY (backfill) or HOUR (follow); `to_end` rolls up to the
    window's end once it is loaded, provisional hours included (rule 2)."""

    grain: timedelta = DAY
    to_end: bool = True
    origin: datetime | None = None
    """Where rolling up starts in a warehouse never rolled up (default: the window's start;
    `follow` passes its own start, since each of its windows starts at the watermark)."""


def ceil_hour(moment: datetime) -> datetime:
    floored = floor_time(moment, HOUR)
    return floored if floored == moment else floored + HOUR


@dataclass
class Roller:
    """Rolls up what the loaded samples allow; `advance` after each chunk (one thread only)."""

    wh: Warehouse
    settings: Settings
    plan: RollupPlan
    origin: datetime
    """Where rolling up starts when no roll-up watermark exists (or on `--reload`)."""
    reload: bool = False
    hours: int = 0
    rows: int = 0
    seconds: float = 0.0

    def __post_init__(self) -> None:
        from gpuledger.core.rules import SamplingRules

        self.margin = SamplingRules.of(self.settings).margin
        self._from, self._mark = self._resume()
        self._read = None if self.reload else self.wh.watermark(READ_SOURCE)

    def _resume(self) -> tuple[datetime, datetime]:
        """Rule 2: (resume rolling up at, rolled up to): the settled mark, else the roll-up's."""
        from gpuledger.analytics.usage.daily import ROLLUP_SOURCE

        mark = None if self.reload else self.wh.watermark(ROLLUP_SOURCE)
        if mark is None:
            first = ceil_hour(self.origin)
            return first, first
        settled = self.wh.watermark(SETTLED_SOURCE)
        return (min(mark, settled) if settled is not None else mark), mark

    def target(self, loaded_to: datetime, end: datetime | None) -> tuple[datetime, datetime]:
        """(roll up to, settled up to) for samples loaded up to `loaded_to` (rules 1 and 4)."""
        exact = floor_time(loaded_to - self.margin, HOUR)
        upto = floor_time(exact, self.plan.grain)
        if self.plan.to_end and end is not None and loaded_to >= end:
            upto = max(exact, floor_time(end, HOUR))
        return upto, min(upto, exact)

    def _late(self, upto: datetime) -> datetime | None:
        """Rule 7: the late-sample mark, with rolling up moved back to the hours it changes."""
        from gpuledger.analytics.usage.rollup import dirty_from
        from gpuledger.core.rules import SamplingRules
        from gpuledger.warehouse.store import ROLLUP_DIRTY

        dirty = self.wh.watermark(ROLLUP_DIRTY)
        if dirty is None:
            return None
        start = dirty_from(self.wh, SamplingRules.of(self.settings))
        if start is not None and start < upto:
            self._from = min(self._from, start)
        return dirty

    def windows(self, upto: datetime) -> list[Window]:
        """Rule 3: `[midnight, min(next midnight, upto))` for each day from the resume hour."""
        out = []
        day = floor_time(self._from, DAY)
        while day < upto:
            out.append(Window(day, min(day + DAY, upto)))
            day += DAY
        return out

    def advance(self, loaded_to: datetime, end: datetime | None = None) -> int:
        """Roll up the hours the samples loaded up to `loaded_to` allow; returns hours rolled.

        Nothing is done when the roll-up already reaches that far and nothing provisional
        would become exact (a re-run of a collected window costs no roll-up)."""
        from gpuledger.analytics.usage.rollup import rollup_batch
        from gpuledger.warehouse import LoadBatch

        upto, settled = self.target(loaded_to, end)
        dirty = self._late(upto)
        fresh = self._from < self._mark and (  # rule 7: provisional hours, and samples they never saw
            self._read is None or (loaded_to > self._read and self._read < self._mark + self.margin))
        if upto <= self._from or (upto <= self._mark and settled <= self._from and not (fresh or dirty)):
            return 0
        from gpuledger.warehouse.store import ROLLUP_DIRTY, ROLLUP_SOURCE

        started = time.perf_counter()
        stored = self.wh.watermark(ROLLUP_SOURCE)
        windows = self.windows(upto)
        for n, window in enumerate(windows):
            batch = rollup_batch(self.wh, window, self.settings)
            marks: dict[str, datetime | None] = {
                **batch.watermarks, SETTLED_SOURCE: min(window.end, settled), READ_SOURCE: loaded_to}
            if dirty is not None and n == len(windows) - 1:  # rule 7: late hours rolled again
                marks[ROLLUP_DIRTY] = None if stored is None or upto >= stored else max(dirty, upto)
            self.rows += self.wh.load(LoadBatch(batch.frames, batch.window, marks)).total_rows
        self._read = loaded_to
        hours = int((upto - max(self._mark, self._from)) / HOUR) if upto > self._mark else 0
        self._from, self._mark = settled, upto
        self.hours += hours
        self.seconds += time.perf_counter() - started
        return hours


@dataclass(frozen=True)
class Rerolled:
    """What `reroll` did: the stale runs it stored under the current rules (each with the
    fingerprint it was rolled up under before, None: not recorded), the day windows it rolled,
    the stale runs it left (their raw samples gone), and the rules it stored."""

    fingerprint: str
    runs: tuple[Run, ...] = ()
    days: tuple[Window, ...] = ()
    left: tuple[Run, ...] = field(default=())
    rows: int = 0
    seconds: float = 0.0


def reroll(wh: Warehouse, rules: Rules, window: Window, *, what: str, strict: bool = True) -> Rerolled:
    """Rule 5: roll up again, under `rules`, every day of `window` that holds an hour of the
    roll-up computed under other rules. `strict`: refuse (one line, naming what) when such an
    hour's raw samples are gone; else leave those hours as they are (`Rerolled.left`)."""
    from gpuledger.analytics.usage.daily import ROLLUP_SOURCE
    from gpuledger.analytics.usage.plan import raw_from, rollup_span, span_text, stamp_runs
    from gpuledger.analytics.usage.rollup import reroll_batch
    from gpuledger.warehouse.queries.usage import rollup_stamps

    span = rollup_span(wh, window)
    if span is None:
        return Rerolled(rules.rollup_fingerprint)
    stale = [r for r in stamp_runs(rollup_stamps(wh, span.start, span.end), span)
             if r.fingerprint != rules.rollup_fingerprint]
    days = _days_of(stale, wh.watermark(ROLLUP_SOURCE) or span.end)
    start = raw_from(wh, rules)
    gone = [d for d in days if start is not None and d.start < start]
    if gone and strict:
        raise InputError(
            f"{what}: the raw samples of {span_text(gone[0].start, gone[-1].end)} are gone (compacted; "
            f"kept from {start:%Y-%m-%dT%H:%MZ}), so its roll-up cannot be computed again; re-roll "
            "from there on (--start/--end), or bill it as computed (bill --as-computed)"
        )
    left = tuple(r for r in stale if any(d.start <= r.start < d.end for d in gone))
    todo = [d for d in days if d not in gone]
    started, rows = time.perf_counter(), 0
    for day in todo:
        rows += wh.load(reroll_batch(wh, day, rules)).total_rows
    done = tuple(r for r in stale if r not in left)
    return Rerolled(rules.rollup_fingerprint, done, tuple(todo), left, rows, time.perf_counter() - started)


def _days_of(runs: list[Run], mark: datetime) -> list[Window]:
    """Rule 3's day windows holding the hours of `runs`, the last one ending at the watermark."""
    days: dict[datetime, Window] = {}
    for r in runs:
        day = floor_time(r.start, DAY)
        while day < r.end:
            days.setdefault(day, Window(day, min(day + DAY, mark)))
            day += DAY
    return [days[d] for d in sorted(days)]


@dataclass(frozen=True)
class RerolledChanges:
    """What `reroll_changed` did: the day windows rolled up again, the ones it could not (their
    raw samples compacted), the rows stored."""

    days: tuple[Window, ...] = ()
    left: tuple[Window, ...] = ()
    rows: int = 0


def reroll_changed(wh: Warehouse, settings: Settings, changed: Window | None) -> RerolledChanges:
    """Rule 6: roll up again the days holding the rolled-up hours of `changed` (the span new
    DRA rows changed), under the current rules, without moving any watermark."""
    from gpuledger.analytics.usage.daily import ROLLUP_SOURCE
    from gpuledger.analytics.usage.plan import raw_from
    from gpuledger.analytics.usage.rollup import reroll_batch
    from gpuledger.core.rules import Rules
    from gpuledger.warehouse.queries.usage import first_rollup_ts

    mark = wh.watermark(ROLLUP_SOURCE)
    first = first_rollup_ts(wh)
    if changed is None or mark is None or first is None:
        return RerolledChanges()
    lo, hi = max(floor_time(changed.start, HOUR), floor_time(first, DAY)), min(ceil_hour(changed.end), mark)
    if lo >= hi:
        return RerolledChanges()
    rules = Rules.of(settings)
    start = raw_from(wh, rules)
    days, left, rows = [], [], 0
    day = floor_time(lo, DAY)
    while day < hi:
        window = Window(day, min(day + DAY, mark))
        if start is not None and window.start < start:
            left.append(window)
        else:
            rows += wh.load(reroll_batch(wh, window, rules)).total_rows
            days.append(window)
        day += DAY
    return RerolledChanges(tuple(days), tuple(left), rows)
