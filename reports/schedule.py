"""In-process scheduling of the monthly report (`gpuledger serve --schedule`).

`run_due` is safe to call as often as one likes (every few minutes, at every start): it issues
each completed month at most once, because a month counts as issued as soon as the warehouse
records an issue (the only authority: a folder on disk counts only once crash recovery adopted
it against its recorded intent, see `reports.recovery`). A restart between two calls therefore
never issues a month twice; a crash in the middle of an issue leaves a staging folder, which the
next call removes before issuing the month again from scratch.

Steps of one call:
1. List the months to consider: the last `reports.schedule_backfill_months` months that ended
   at least `reports.schedule_grace_hours` ago (late samples get that long to arrive).
2. Recover each of them (`reconcile`: leftovers removed, crash leftovers adopted or refused),
   then skip the months already issued (a `report_issues` row).
3. For each remaining month, oldest first: run collection for it when a collector is given,
   then finalize its report. A month without any usage, below `reports.min_coverage`, or with
   a refused folder is skipped with a warning (and retried next call).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

from gpuledger.core.config import Settings
from gpuledger.core.errors import ReportError
from gpuledger.core.period import Period
from gpuledger.core.window import Window, as_utc
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.queries.reports import issued_periods

log = logging.getLogger("gpuledger.reports.schedule")

Collect = Callable[[Warehouse, Window], object]
"""Collects one window into the (writable) warehouse, e.g. a Prometheus collection run."""


def completed_periods(now: datetime, grace: timedelta, count: int) -> list[str]:
    """The `count` most recent months that ended at least `grace` before `now`, oldest first."""
    current = Period.of(as_utc(now) - grace)  # the month `now - grace` falls in is not over
    return [str(current.shift(-i)) for i in range(count, 0, -1)]


def _settings(ctx_or_settings: object) -> Settings:
    settings = getattr(ctx_or_settings, "settings", ctx_or_settings)
    if not isinstance(settings, Settings):
        raise TypeError("run_due needs a Settings or a Context carrying one")
    return settings


def _candidates(settings: Settings, now: datetime, backfill: int | None) -> list[str]:
    grace = timedelta(hours=settings.reports.schedule_grace_hours)
    return completed_periods(now, grace, backfill or settings.reports.schedule_backfill_months)


def due_periods(
    wh: Warehouse, settings: Settings, out_dir: Path, now: datetime, backfill: int | None = None
) -> list[str]:
    """Completed months the warehouse has not recorded as issued (`out_dir` is not consulted:
    a folder there proves nothing until recovery adopted it)."""
    candidates = _candidates(settings, now, backfill)
    recorded = issued_periods(wh)
    return [p for p in candidates if p not in recorded]


def run_due(
    ctx_or_settings: object,
    wh_path: Path,
    out_dir: Path,
    now: datetime,
    *,
    collect: Collect | None = None,
    backfill: int | None = None,
) -> list[Path]:
    """Collect (if `collect` is given) and finalize every completed, unissued month.

    `backfill` overrides `reports.schedule_backfill_months` (how many completed months to
    consider). Returns the folders of the versions issued by this call (empty when nothing was
    due). Opens the warehouse for writing only for the duration of the call.
    """
    from gpuledger.reports.manifest import signing_key
    from gpuledger.reports.monthly import issue_monthly
    from gpuledger.reports.recovery import reconcile

    settings = _settings(ctx_or_settings)
    issued: list[Path] = []
    with Warehouse.open(wh_path, limits=settings.warehouse) as wh:
        # Adopt any issue a crash left on disk only (if recorded as intended), before deciding.
        for period in _candidates(settings, now, backfill):
            reconcile(wh, out_dir, period, key=signing_key(settings))
        for period in due_periods(wh, settings, out_dir, now, backfill):
            if collect is not None:
                collect(wh, Period.exact(period).window)
            try:
                result = issue_monthly(wh, settings, period, out_dir, finalize=True, now=now)
            except ReportError as exc:
                log.warning("monthly report %s not issued: %s", period, exc)
                continue
            log.info("monthly report %s issued: %s", period, result.folder)
            issued.append(result.folder)
    return issued


def run_forever(
    ctx_or_settings: object,
    wh_path: Path,
    out_dir: Path,
    stop: threading.Event,
    *,
    interval: timedelta = timedelta(minutes=30),
    collect: Collect | None = None,
    clock: Callable[[], datetime] | None = None,
    also: Callable[[datetime], object] | None = None,
) -> None:
    """Call `run_due` every `interval` until `stop` is set (for a background thread); `also`
    runs on the same tick with the same clock (`serve --apply-approved`:
    `actuator.scheduled_apply`)."""
    from gpuledger.core.config import utcnow

    now = clock or utcnow
    while not stop.is_set():
        moment = now()
        try:
            run_due(ctx_or_settings, wh_path, out_dir, moment, collect=collect)
        except Exception:  # keep the scheduler alive; the next tick retries
            log.exception("scheduled monthly report failed")
        if also is not None:
            try:
                also(moment)
            except Exception:  # the same: one failed tick never stops the schedule
                log.exception("scheduled job failed")
        stop.wait(interval.total_seconds())
