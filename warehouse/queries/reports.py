"""Read queries behind the monthly reports: what has been issued, and the lines it billed.

Why here: only `warehouse/` speaks SQL. `reports.monthly` (finalize, reissue, verify),
`reports.schedule` (which months are due) and `reports.adjustments` (late data measured against
what was billed) read the `report_issues` and `report_lines` tables only through these.
Periods are `YYYY-MM` text, as the tables store them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
