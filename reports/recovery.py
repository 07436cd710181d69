"""Crash recovery and verification of issued reports: the warehouse is the only authority.

Why: a version folder proves nothing by itself, since anyone who can write the reports folder
can copy `v1` to `v2`, change a cost and rewrite the manifest to match. So finalize records its
*intent* (version, manifest sha256, signature, chain link) in `report_intents` before renaming
the sealed folder into place, and the issue itself (`report_issues`, `report_lines`) after.

Steps of `reconcile` (run by finalize and by `report due`, with the writer lock held):
1. Leftovers of a killed run are removed from the period's folder: `.staging-final-*` (no other
   finalize can be running: we hold the warehouse's writer lock), `.old-*` (a swapped draft),
   and draft staging older than `STALE_DRAFT` (a draft may be running concurrently).
2. Each final folder on disk that the warehouse has not recorded as issued is adopted only
   when an intent for its version exists, its manifest's sha256 equals the intent's, its files
   match the manifest, its manifest names this period and version, and its signature (when the
   intent was signed) is the HMAC under `reports.signing_key`. Otherwise it is refused.
3. Every adoption and every refusal is audited (a refusal once per folder and reason, not at
   every scheduler tick); refusals are also logged and returned.

`verify_issues` checks both ways: every recorded issue has its folder, unchanged (checksum,
signature, chain), and every folder on disk is a recorded issue. With the settings it also
compares the numbers (`numbers_problems`, docs/decisions/0185): the month billed again from
the warehouse now against what was billed for it (the latest issue's lines plus the
adjustments later issues carried), so a bill that moved after its issue is never reported as
matching because its files did not.
"""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from gpuledger.core.config import Settings, utcnow
from gpuledger.core.period import Period
from gpuledger.reports.billing import SUMMARY_SCHEMA
from gpuledger.reports.layout import MANIFEST, issued_versions, period_dir, read_manifest, version_dir
from gpuledger.reports.manifest import sha256_file, signature_problem, verify_folder
from gpuledger.warehouse import LoadBatch, Warehouse
from gpuledger.warehouse.queries.reports import (
    audit_recorded,
    latest_issue_versions,
    recorded_intents,
    recorded_issues,
    recorded_manifest_digests,
)

log = logging.getLogger("gpuledger.reports.recovery")

STAGING_FINAL = ".staging-final-"
STAGING_DRAFT = ".staging-draft-"
OLD_DRAFT = ".old-"
STALE_DRAFT = timedelta(hours=24)
ACTOR = "gpuledger report"


@dataclass(frozen=True)
class Reconciled:
    """What one `reconcile` did: versions adopted, folders refused (with why), leftovers removed."""

    adopted: list[int] = field(default_factory=list)
    refused: dict[int, str] = field(default_factory=dict)
    removed: list[Path] = field(default_factory=list)


def load_issue(wh: Warehouse, issue: pl.DataFrame, summary: pl.DataFrame, period: str, version: int) -> None:
    """Store one issue row and its summary lines (one load: both or neither)."""
    lines = summary.with_columns(
        pl.lit(period).alias("period"),
        pl.lit(version, pl.Int32).alias("version"),
        pl.int_range(pl.len(), dtype=pl.Int32).alias("line_no"),
    )
    wh.load(LoadBatch({"report_issues": issue, "report_lines": lines}))


def clean_leftovers(wh: Warehouse, out_dir: Path, period: str, now: datetime | None = None) -> list[Path]:
    """Step 1: remove staging and swapped-draft folders a killed run left behind."""
    folder = period_dir(out_dir, period)
    if not folder.is_dir():
        return []
    moment = time.time() if now is None else now.timestamp()
    removed = []
    for child in sorted(folder.iterdir()):
        name = child.name
        final = name.startswith(STAGING_FINAL)
        stale = name.startswith(OLD_DRAFT) or (
            name.startswith(".staging-") and moment - child.stat().st_mtime > STALE_DRAFT.total_seconds()
        )
        if not child.is_dir() or not (final or stale):
            continue
        _make_writable(child)
        shutil.rmtree(child, ignore_errors=True)
        removed.append(child)
        if final:
            wh.append_audit(_audit("discard staging", period, child.name, "ok",
                                   "left by a finalize that did not finish"))
    return removed


def reconcile(wh: Warehouse, out_dir: Path, period: str, *, key: str | None = None) -> Reconciled:
    """Steps 1-3 of the module docstring for one period; returns what was done."""
    removed = clean_leftovers(wh, out_dir, period)
    recorded = recorded_issues(wh, period)
    intents = recorded_intents(wh, period)
    done = Reconciled(removed=removed)
    for version, manifest in issued_versions(out_dir, period).items():
        if version in recorded:
            continue
        folder = version_dir(out_dir, period, version)
        problem = _adoption_problem(
            folder, manifest, period, version, intent=intents.get(version), key=key
        )
        obj = f"report period={period} v{version}"
        if problem is None:
            with wh.transaction():
                issue = _issue_row(folder, manifest, period, version)
                load_issue(wh, issue, _summary(folder), period, version)
                wh.append_audit(_audit("adopt", period, f"v{version}", "ok",
                                       "renamed into place before a crash; matches its recorded intent"))
            done.adopted.append(version)
            continue
        done.refused[version] = problem
        log.warning("%s: not adopted as an issue: %s", folder, problem)
        if not audit_recorded(wh, "adopt", obj, problem):
            wh.append_audit(_audit("adopt", period, f"v{version}", "refused", problem))
    return done


def _adoption_problem(
    folder: Path, manifest: dict[str, Any], period: str, version: int, *,
    intent: dict[str, Any] | None, key: str | None,
) -> str | None:
    if intent is None:
        return "the warehouse never recorded an intent to issue this version"
    if sha256_file(folder / MANIFEST) != intent["manifest_sha256"]:
        return "its manifest differs from the one the warehouse recorded before the rename"
    problems = verify_folder(folder)
    if problems:
        return problems[0]
    if manifest.get("period") != period or manifest.get("version") != version:
        return "its manifest names another period or version"
    return signature_problem(folder, manifest, key, intent.get("signature"))


def _issue_row(folder: Path, manifest: dict[str, Any], period: str, version: int) -> pl.DataFrame:
    return pl.DataFrame([{
        "period": period, "version": version,
        "finalized_at": datetime.fromisoformat(manifest["generated_at"].replace("Z", "+00:00")),
        "manifest_sha256": sha256_file(folder / MANIFEST),
        "inputs_sha256": manifest["inputs_sha256"],
        "fleet_cost": float(manifest["totals"]["fleet_cost"]),
        "reason": manifest.get("reason"), "path": str(folder),
    }])


def _summary(folder: Path) -> pl.DataFrame:
    # the file may carry more columns than the warehouse keeps (currency, unit price, cost centre)
    return pl.read_csv(folder / "summary.csv", columns=list(SUMMARY_SCHEMA), schema_overrides=SUMMARY_SCHEMA)


def _audit(action: str, period: str, what: str, result: str, detail: str) -> dict[str, Any]:
    obj = f"report period={period} {what}" if what.startswith("v") else f"report period={period}/{what}"
    return {"occurred_at": utcnow(), "actor": ACTOR, "action": action, "object": obj,
            "result": result, "detail": detail}


def _make_writable(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            path.chmod(0o644)


def verify_issues(
    wh: Warehouse, out_dir: Path, period: str, *, key: str | None = None, settings: Settings | None = None,
) -> list[str]:
    """Problems with the issued versions of `period`, checked both ways, and with `settings` its
    numbers against the warehouse's (see module docstring)."""
    problems: list[str] = []
    recorded = recorded_issues(wh, period)
    intents = recorded_intents(wh, period)
    links = recorded_manifest_digests(wh)
    on_disk = issued_versions(out_dir, period)
    for version in sorted(set(recorded) | set(on_disk)):
        folder = version_dir(out_dir, period, version)
        if version not in on_disk:
            problems.append(f"{folder}: recorded in the warehouse but missing on disk")
            continue
        problems += verify_folder(folder)
        if version not in recorded:
            problems.append(f"{folder}: on disk but the warehouse never recorded issuing it (not an issue)")
            continue
        manifest = read_manifest(folder)
        if sha256_file(folder / MANIFEST) != recorded[version]["manifest_sha256"]:
            problems.append(f"{folder / MANIFEST}: differs from the checksum recorded at issue")
        elif manifest.get("version") != version or manifest.get("period") != period:
            problems.append(f"{folder / MANIFEST}: names another period or version")
        intent = intents.get(version, {})
        signed = signature_problem(folder, manifest, key, intent.get("signature"))
        if signed:
            problems.append(signed)
        link = (manifest.get("chain") or {}).get("previous_manifest_sha256")
        if link is not None and link not in links:
            problems.append(f"{folder / MANIFEST}: its chain points to no issue the warehouse recorded")
    if settings is not None and not problems:
        problems += numbers_problems(wh, settings, out_dir, period)
    return problems


def numbers_problems(wh: Warehouse, settings: Settings, out_dir: Path, period: str) -> list[str]:
    """The month billed again now (as its latest issue was: as computed or not) against what was
    billed for it; one line naming the net and gross difference and the largest line, or none.

    Not checked (nothing said here; `report verify` prints the rules notes) when the latest
    issue was computed under other rules than `settings`: its numbers cannot be recomputed."""
    from gpuledger.core.rules import Rules
    from gpuledger.reports.adjustments import billed_for, unbilled
    from gpuledger.reports.billing import month_bill, summary_lines
    from gpuledger.reports.manifest import rules_notes

    latest = latest_issue_versions(wh)
    if period not in latest or rules_notes(out_dir, period, Rules.of(settings)):
        return []
    manifest = read_manifest(version_dir(out_dir, period, latest[period]))
    bill = month_bill(wh, settings, period, as_computed=bool(manifest.get("as_computed")))
    after = str(Period.exact(max(latest, key=Period.exact)).shift(1))
    moved = unbilled(summary_lines(bill), billed_for(wh, period, after))
    if moved.is_empty():
        return []
    top = moved.sort(pl.col("cost").abs(), descending=True).row(0, named=True)
    where = " ".join(str(top[k]) for k in ("team", "model", "sharing_mode") if top.get(k))
    return [
        f"period {period}: billed again from the warehouse now, {moved.height} line(s) differ from what "
        f"was issued for it (net {moved['cost'].sum():+,.2f}, gross {moved['cost'].abs().sum():,.2f} "
        f"{settings.currency}; largest {where} {top['cost']:+,.2f}): the data changed after the issue; "
        "the next finalized report bills late data as adjustments, or reissue it (--reissue --reason)"
    ]
