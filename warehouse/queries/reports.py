"""Read queries behind the monthly reports: what has been issued, and the lines it billed.

Why here: only `warehouse/` speaks SQL. `reports.monthly` (finalize, reissue, verify),
`reports.schedule` (which months are due) and `reports.adjustments` (late data measured against
what was billed) read the `report_issues`, `report_lines` and `report_intents` tables (and the
audit log and sample hours behind recovery and coverage) only through these.
Periods are `YYYY-MM` text, as the tables store them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpuledger.warehouse.utc_sql import HOUR_US, utc_floor

if TYPE_CHECKING:
    from datetime import datetime

    import polars as pl

    from gpuledger.warehouse import Warehouse


def issued_periods(wh: Warehouse) -> set[str]:
    """Every period with at least one recorded (finalized) issue."""
    rows = wh.query("SELECT DISTINCT period FROM report_issues")
    return {str(p) for (p,) in rows.iter_rows()}


def latest_issue_versions(wh: Warehouse) -> dict[str, int]:
    """Each issued period and the version of its latest issue."""
    rows = wh.query("SELECT period, max(version) AS version FROM report_issues GROUP BY period")
    return {str(p): int(v) for p, v in rows.iter_rows()}


def recorded_issues(wh: Warehouse, period: str) -> dict[int, dict[str, Any]]:
    """The recorded issues of `period` by version (oldest first): every `report_issues` column
    (`finalized_at`, `manifest_sha256`, `inputs_sha256`, `fleet_cost`, `reason`, `path`, ...)."""
    rows = wh.query("SELECT * FROM report_issues WHERE period = ? ORDER BY version", [period])
    return {int(r["version"]): r for r in rows.iter_rows(named=True)}


def issued_own_lines(wh: Warehouse, period: str, version: int) -> pl.DataFrame:
    """The lines issue `version` of `period` billed for its own month (every line except the
    `adjustment` lines it carried for earlier months); all `report_lines` columns."""
    return wh.query(
        "SELECT * FROM report_lines WHERE period = ? AND version = ? AND line <> 'adjustment'",
        [period, version],
    )


def carried_adjustments(wh: Warehouse, period: str, version: int, for_period: str) -> pl.DataFrame:
    """The `adjustment` lines issue `version` of `period` carried for the earlier month
    `for_period` (late data billed later); all `report_lines` columns."""
    return wh.query(
        "SELECT * FROM report_lines WHERE period = ? AND version = ? "
        "AND line = 'adjustment' AND for_period = ?",
        [period, version, for_period],
    )


def recorded_intents(wh: Warehouse, period: str) -> dict[int, dict[str, Any]]:
    """What finalize recorded before renaming each version of `period` into place, by version:
    every `report_intents` column (`manifest_sha256`, `signature`, ...). Crash recovery adopts
    a folder only when its manifest matches one of these."""
    rows = wh.query("SELECT * FROM report_intents WHERE period = ? ORDER BY version", [period])
    return {int(r["version"]): r for r in rows.iter_rows(named=True)}


def last_recorded_issue(wh: Warehouse) -> dict[str, Any] | None:
    """The issue recorded last (any period): what the next issue's checksum chain points to."""
    rows = wh.query(
        "SELECT period, version, manifest_sha256 FROM report_issues "
        "ORDER BY finalized_at DESC, period DESC, version DESC LIMIT 1"
    )
    return rows.row(0, named=True) if rows.height else None


def recorded_manifest_digests(wh: Warehouse) -> set[str]:
    """The manifest sha256 of every recorded issue (links a checksum chain may point to)."""
    rows = wh.query("SELECT DISTINCT manifest_sha256 FROM report_issues")
    return {str(d) for (d,) in rows.iter_rows()}


def audit_recorded(wh: Warehouse, action: str, obj: str, detail: str) -> bool:
    """True when the audit log already holds this exact record (a refusal is logged once, not at
    every scheduler tick)."""
    rows = wh.query(
        "SELECT count(*) FROM audit_log WHERE action = ? AND object = ? AND detail = ?",
        [action, obj, detail],
    )
    return bool(rows.item(0, 0))


def sampled_hours(
    wh: Warehouse, start: datetime, end: datetime,
) -> tuple[int, datetime | None, datetime | None]:
    """Hours of `[start, end)` with any GPU sample or roll-up row (raw samples may have aged
    out), and the first and last such hour start."""
    rows = wh.query(
        "SELECT count(*) AS n, min(h) AS first, max(h) AS last FROM ("
        f"  SELECT DISTINCT {utc_floor('ts', HOUR_US)} AS h FROM gpu_samples WHERE ts >= ? AND ts < ?"
        f"  UNION SELECT DISTINCT {utc_floor('ts', HOUR_US)} FROM card_hours_hourly WHERE ts >= ? AND ts < ?"
        ")",
        [start, end, start, end],
    )
    n, first, last = rows.row(0)
    return int(n), first, last
