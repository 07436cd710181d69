"""Issue the monthly report: a draft, a finalized version, or a reissue.

Rules (why: finance must be able to trust that an issued bill never moves):
1. A draft (no `--finalize`) goes to `period=P/draft/`, replacing the previous draft.
2. `--finalize` writes `period=P/v1/` once the month is over. A second finalize refuses; only
   `--reissue --reason TEXT` writes the next version (`v2`, ...) beside the earlier ones.
3. A version folder is written in a staging folder and sealed with its manifest (signed with
   `reports.signing_key` when set, chained to the issue recorded before); the warehouse records
   the intent (`report_intents`: version, manifest sha256, signature); the folder is made
   read-only and renamed into place; then the issue and its lines are recorded (`report_issues`,
   `report_lines`). If the process dies in between, the next run adopts the folder only if it
   matches the recorded intent (`reports.recovery`): the warehouse, not the folder, says what
   was issued, so a copied or rewritten folder is refused and audited.
4. A month below `reports.min_coverage` of hours with samples is not finalized unless
   `allow_partial`; drafts and statements state the covered range (`reports.coverage`).
   Nor is a month whose roll-up is not final yet (docs/decisions/0185): hours late samples
   changed are rolled up again first (`analytics.usage.rollup.reroll_dirty`), and a month
   whose last hours were rolled up without the samples after them (provisional: collect
   stopped at the month's end, before the sample pass's margin) is refused unless
   `allow_partial`, since collecting the next month would then change the bill just issued.
5. Data that arrives after an issue never changes it: the next period's report carries the
   difference as `adjustment` lines (see `reports.adjustments`); a draft of an issued month
   says how far the current numbers have moved.
"""

from __future__ import annotations

import os
import shutil
import stat
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

from gpuledger.analytics.advice.month import MonthAnalyses
from gpuledger.core.config import Settings, utcnow
from gpuledger.core.errors import InputError, ReportError
from gpuledger.core.period import Period
from gpuledger.core.window import as_utc
from gpuledger.reports.adjustments import billed_for, unbilled
from gpuledger.reports.compose import MonthlyData, gather
from gpuledger.reports.coverage import Coverage, min_coverage, month_coverage, require_coverage
from gpuledger.reports.layout import draft_dir, read_manifest, version_dir
from gpuledger.reports.manifest import build_manifest, signing_key, write_manifest
from gpuledger.reports.recovery import STAGING_DRAFT, STAGING_FINAL, load_issue, reconcile
from gpuledger.reports.writer import write_report
from gpuledger.warehouse import LoadBatch, Warehouse
from gpuledger.warehouse.queries.reports import (
    last_recorded_issue,
    latest_issue_versions,
    recorded_issues,
)


@dataclass(frozen=True)
class Seal:
    """How a folder is sealed: the key that signs it, the chain link, the coverage recorded."""

    key: str | None = None
    chain: dict[str, Any] | None = None
    coverage: dict[str, Any] | None = None


@dataclass(frozen=True)
class IssueResult:
    period: str
    folder: Path
    status: str                   # "draft" | "final"
    version: int | None
    totals: dict[str, Any]
    manifest_sha256: str
    notes: list[str] = field(default_factory=list)
    computed_under: str = ""
    """The statements' rules line (`core.rules_record.computed_under`)."""
    bill_notes: list[str] = field(default_factory=list)
    """What the month's bill tells its reader (`analytics.billing.notes`; stderr, the manifest)."""


def issue_monthly(
    wh: Warehouse,
    settings: Settings,
    period: str,
    out_dir: Path,
    *,
    finalize: bool = False,
    reissue_reason: str | None = None,
    allow_partial: bool = False,
    now: datetime | None = None,
    month: MonthAnalyses | None = None,
    as_computed: bool = False,
) -> IssueResult:
    """Write the report of `period` under `out_dir` following the rules above (`month`: the
    month's analyses a caller already computed, handed to `compose.gather`; `as_computed`:
    billed as the roll-up was computed, which the statements' "Computed under" line and the
    manifest say)."""
    # 1. Validate the request.
    moment = as_utc(now) if now is not None else utcnow()
    reissue = reissue_reason is not None
    final = finalize or reissue
    _check_request(wh, period, moment, final=final, reissue_reason=reissue_reason)
    key = signing_key(settings)
    # 2. What is already issued: the warehouse's record (after adopting a crash's leftovers).
    existing = _existing_versions(wh, out_dir, period, final=final, reissue=reissue, key=key)
    version = (existing[-1] if existing else 0) + 1 if final else None
    # 3. Coverage (a finalize below the floor is refused before any work), then the numbers.
    coverage = month_coverage(wh, Period.exact(period).window)
    if final:
        require_coverage(coverage, settings, period, allow_partial=allow_partial)
        require_settled(wh, settings, period, allow_partial=allow_partial)
    data = gather(wh, settings, period, month=month, as_computed=as_computed)
    notes = _coverage_notes(coverage, settings, final) + _notes(wh, data, final)
    status = "DRAFT" if not final else (f"REISSUE v{version}" if reissue else f"FINAL v{version}")
    # 4. Write into staging, seal with the manifest, record the intent, move into place.
    target = version_dir(out_dir, period, version) if version else draft_dir(out_dir, period)
    seal = Seal(key, _chain(wh) if final else None, coverage.as_manifest())
    totals, manifest_sha = _write_sealed(
        target, data, settings, status=status, moment=moment, notes=notes, version=version,
        reason=reissue_reason, supersedes=existing[-1] if reissue else None, seal=seal,
        wh=wh if final else None,
    )
    # 5. Record the issue (finalize only): the baseline for later adjustments.
    if final and version is not None:
        record_issue(wh, data, version, moment=moment, manifest_sha=manifest_sha,
                     reason=reissue_reason, folder=target)
    return IssueResult(period, target, "final" if final else "draft", version, totals, manifest_sha, notes,
                       data.computed_under, data.bill_notes)


def _check_request(
    wh: Warehouse, period: str, moment: datetime, *, final: bool, reissue_reason: str | None
) -> None:
    """Refuse a reissue without a reason, a finalize before the month is over, and a finalize
    through a read-only warehouse (the issue could not be recorded)."""
    window = Period.exact(period).window
    if reissue_reason is not None and not str(reissue_reason).strip():
        raise InputError("--reissue needs --reason TEXT saying why the period is issued again")
    if final and moment < window.end:
        raise ReportError(
            f"period {period}: not over until {window.end.isoformat()}; "
            "finalize after the month ends (a draft can be written any time)"
        )
    if final and wh.read_only:
        raise ReportError(f"{wh.path}: finalizing records the issue; open the warehouse for writing")


def require_settled(wh: Warehouse, settings: Settings, period: str, *, allow_partial: bool) -> None:
    """Rule 4's roll-up half: re-roll what late samples changed, refuse provisional hours."""
    from gpuledger.analytics.usage.rollup import reroll_dirty
    from gpuledger.core.rules import SamplingRules
    from gpuledger.warehouse.store import ROLLUP_SETTLED, ROLLUP_SOURCE

    reroll_dirty(wh, settings)
    window = Period.exact(period).window
    rolled, settled = wh.watermark(ROLLUP_SOURCE), wh.watermark(ROLLUP_SETTLED)
    if allow_partial or rolled is None or settled is None or not window.start < rolled:
        return
    if settled < min(rolled, window.end):
        margin = SamplingRules.of(settings).margin
        raise ReportError(
            f"period {period}: its roll-up from {settled:%Y-%m-%d %H:%M} UTC is provisional (computed "
            f"without the {margin.total_seconds() / 60:.0f} minutes of samples after it), so collecting "
            f"on would change the bill; collect to {window.end + margin:%Y-%m-%d %H:%M} UTC first, "
            "or finalize anyway with --allow-partial"
        )


def _existing_versions(
    wh: Warehouse, out_dir: Path, period: str, *, final: bool, reissue: bool, key: str | None
) -> list[int]:
    """Issued versions of `period` as the warehouse records them (after adopting a crash's
    leftovers); a folder recovery refused blocks issuing until someone moves it away, a second
    finalize is refused, and so is a reissue of a month never finalized."""
    if final:
        refused = reconcile(wh, out_dir, period, key=key).refused
        if refused:
            version, why = next(iter(refused.items()))
            raise ReportError(
                f"{version_dir(out_dir, period, version)}: not an issue the warehouse recorded "
                f"({why}); refused and audited: move it out of {out_dir} before issuing {period}"
            )
    existing = sorted(recorded_issues(wh, period))
    if final and existing and not reissue:
        where = version_dir(out_dir, period, existing[-1])
        raise ReportError(
            f"period {period}: already finalized as v{existing[-1]} ({where}); issued numbers "
            "never change: use --reissue --reason TEXT to issue a new version beside it"
        )
    if reissue and not existing:
        raise ReportError(f"period {period}: nothing to reissue; finalize it first (--finalize)")
    return existing


def _chain(wh: Warehouse) -> dict[str, Any] | None:
    """The link a new issue's manifest carries: the issue the warehouse recorded last."""
    last = last_recorded_issue(wh)
    if last is None:
        return None
    return {"previous": f"{last['period']}/v{last['version']}",
            "previous_manifest_sha256": last["manifest_sha256"]}


def _write_sealed(
    target: Path, data: MonthlyData, settings: Settings, *, status: str, moment: datetime,
    notes: list[str], version: int | None, reason: str | None, supersedes: int | None,
    seal: Seal, wh: Warehouse | None,
) -> tuple[dict[str, Any], str]:
    """Write the report in a staging folder beside `target`, seal it with its manifest and move
    it into place (a version: intent recorded in `wh` first, read-only, never replaced; a draft:
    swapped). Returns the totals and the manifest's sha256."""
    final = version is not None
    parent = target.parent  # the period's folder
    parent.mkdir(parents=True, exist_ok=True)
    staging = parent / f"{STAGING_FINAL if final else STAGING_DRAFT}{uuid.uuid4().hex[:12]}"
    try:
        totals = write_report(staging, data, settings, status=status, generated_at=moment, notes=notes)
        manifest = build_manifest(
            staging, period=data.period, status="final" if final else "draft", version=version,
            generated_at=moment, price_book_version=data.price_book_version,
            inputs_sha256=data.inputs_sha256, totals=totals, reason=reason, supersedes=supersedes,
            chain=seal.chain, coverage=seal.coverage,
            rules=data.rules.to_dict() if data.rules is not None else None,
            as_computed=data.as_computed, bill_notes=data.bill_notes,
        )
        manifest_sha = write_manifest(staging, manifest, seal.key if final else None)
        if final and version is not None and wh is not None:
            _record_intent(wh, data, version, moment=moment, manifest_sha=manifest_sha,
                           staging=staging, seal=seal, target=target)
            _make_read_only(staging)
            _move_new(staging, target)
        else:
            _replace(staging, target)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return totals, manifest_sha


def _record_intent(
    wh: Warehouse, data: MonthlyData, version: int, *, moment: datetime, manifest_sha: str,
    staging: Path, seal: Seal, target: Path,
) -> None:
    """Tell the warehouse which sealed folder is about to become `target` (before the rename)."""
    intent = pl.DataFrame([{
        "period": data.period, "version": version, "recorded_at": moment,
        "manifest_sha256": manifest_sha, "inputs_sha256": data.inputs_sha256,
        "signature": read_manifest(staging).get("signature"),
        "previous_manifest_sha256": (seal.chain or {}).get("previous_manifest_sha256"),
        "coverage": (seal.coverage or {}).get("ratio"), "path": str(target),
    }])
    wh.load(LoadBatch({"report_intents": intent}))


def _coverage_notes(coverage: Coverage, settings: Settings, final: bool) -> list[str]:
    """The covered range when any hour of the month has no samples, and a partial finalize."""
    if coverage.ratio >= 1.0:
        return []
    notes = [coverage.describe()]
    floor = min_coverage(settings)
    if final and coverage.ratio < floor:
        notes.append(f"Finalized below reports.min_coverage ({floor:.0%}) with --allow-partial.")
    return notes


def _notes(wh: Warehouse, data: MonthlyData, final: bool) -> list[str]:
    """Lines printed on the statements and by the CLI about late data and adjustments."""
    notes = []
    months = sorted(set(data.adjustments["for_period"].to_list()))
    if months:
        notes.append(
            "Includes adjustments for late data of issued months: " + ", ".join(months) + "."
        )
    if not final and data.period in latest_issue_versions(wh):
        nxt = str(Period.exact(data.period).shift(1))
        own = data.summary.filter(pl.col("line") != "adjustment")
        moved = unbilled(own, billed_for(wh, data.period, nxt))
        if moved.height:
            notes.append(
                f"Late data: {moved.height} line(s) of {data.period} changed since it was issued "
                f"(net {moved['cost'].sum():+,.2f}, "
                f"{moved['cost'].abs().sum():,.2f} gross); the {nxt} report bills the difference "
                "as adjustments."
            )
    return notes


def _make_read_only(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            path.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)


def _move_new(staging: Path, target: Path) -> None:
    """Rename `staging` to `target`; refuse if `target` exists (a concurrent issue)."""
    try:
        target.mkdir()  # exclusive claim: fails when another run created the version first
    except FileExistsError:
        raise ReportError(
            f"{target}: already exists; another run issued this version concurrently"
        ) from None
    os.rename(staging, target)  # atomically replaces our own empty claim


def _replace(staging: Path, target: Path) -> None:
    """Swap a finished draft into place (the old draft is removed after the swap)."""
    old = target.with_name(f".old-{uuid.uuid4().hex[:12]}")
    if target.exists():
        os.rename(target, old)
    os.rename(staging, target)
    shutil.rmtree(old, ignore_errors=True)


def record_issue(
    wh: Warehouse, data: MonthlyData, version: int, *, moment: datetime, manifest_sha: str,
    reason: str | None, folder: Path,
) -> None:
    """Store the issue, its lines and an audit record in one transaction."""
    issue = pl.DataFrame([{
        "period": data.period, "version": version, "finalized_at": moment,
        "manifest_sha256": manifest_sha, "inputs_sha256": data.inputs_sha256,
        "fleet_cost": data.bill.fleet_cost, "reason": reason, "path": str(folder),
    }])
    with wh.transaction():
        load_issue(wh, issue, data.summary, data.period, version)
        wh.append_audit({
            "occurred_at": moment, "actor": "gpuledger report",
            "action": "reissue" if reason else "finalize",
            "object": f"report period={data.period} v{version}", "result": "ok",
            "detail": reason or f"fleet cost {data.bill.fleet_cost:.2f} {data.bill.currency}",
        })
