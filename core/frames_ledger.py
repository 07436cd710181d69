"""The ledger tables: plans, the audit log, load watermarks and issued reports.

Declared apart from the telemetry tables (`core.frames`) only to keep each module small;
`core.frames.TABLES` lists them all.
"""

from __future__ import annotations

from gpuledger.core.table_spec import TS, TableSpec
from gpuledger.core.table_spec import col as _c

PLANS = TableSpec(
    "plans", "dimension",
    (
        _c("plan_id", "VARCHAR", False),
        _c("kind", "VARCHAR", False, "mig | quota"),
        _c("status", "VARCHAR", False),
        _c("created_at", TS, False),
        _c("updated_at", TS, False),
        _c("fingerprint", "VARCHAR", False),
        _c("body", "JSON", False, "the frozen Plan as JSON"),
        _c("progress", "JSON", doc="actuator's per-step progress, for resuming"),
        _c("twin_effect", "JSON", doc="the latest effect measured on the scheduling twin (v017)"),
    ),
    key=("plan_id",),
)

AUDIT_LOG = TableSpec(
    "audit_log", "append",
    (
        _c("seq", "BIGINT", False),
        _c("occurred_at", TS, False),
        _c("actor", "VARCHAR", False),
        _c("plan_id", "VARCHAR"),
        _c("action", "VARCHAR", False),
        _c("object", "VARCHAR"),
        _c("before_state", "JSON"),
        _c("after_state", "JSON"),
        _c("result", "VARCHAR", False),
        _c("detail", "VARCHAR"),
    ),
)

WATERMARKS = TableSpec(
    "watermarks", "dimension",
    (
        _c("source", "VARCHAR", False),
        _c("watermark", TS, False, "everything before this instant is loaded"),
        _c("updated_at", TS, False),
    ),
    key=("source",),
)

REPORT_ISSUES = TableSpec(
    "report_issues", "dimension",
    (
        _c("period", "VARCHAR", False), _c("version", "INTEGER", False),
        _c("finalized_at", TS, False), _c("manifest_sha256", "VARCHAR", False),
        _c("inputs_sha256", "VARCHAR", False), _c("fleet_cost", "DOUBLE", False),
        _c("reason", "VARCHAR"), _c("path", "VARCHAR"),
    ),
    key=("period", "version"),
)

REPORT_LINES = TableSpec(
    "report_lines", "dimension",
    (
        _c("period", "VARCHAR", False, "the issued report's period (YYYY-MM)"),
        _c("version", "INTEGER", False, "the issue's version (1 = first finalize)"),
        _c("line_no", "INTEGER", False),
        _c("line", "VARCHAR", False, "team | unallocated | unattributed | sharing_discount | adjustment"),
        _c("for_period", "VARCHAR", False, "month the amounts belong to (earlier for an adjustment)"),
        _c("team", "VARCHAR"),
        _c("model", "VARCHAR"),
        _c("sharing_mode", "VARCHAR"),
        _c("card_hours", "DOUBLE", False),
        _c("list_cost", "DOUBLE", False),
        _c("sharing_discount", "DOUBLE", False),
        _c("utilization_adjustment", "DOUBLE", False),
        _c("redistributed_cost", "DOUBLE", False),
        _c("cost", "DOUBLE", False),
        _c("idle_card_hours", "DOUBLE", False),
        _c("idle_cost", "DOUBLE", False),
    ),
    key=("period", "version", "line_no"),
    doc="The summary lines of each finalized report issue: the baseline late data is measured against.",
)

REPORT_INTENTS = TableSpec(
    "report_intents", "dimension",
    (
        _c("period", "VARCHAR", False), _c("version", "INTEGER", False),
        _c("recorded_at", TS, False, "when finalize sealed the folder, before renaming it"),
        _c("manifest_sha256", "VARCHAR", False), _c("inputs_sha256", "VARCHAR", False),
        _c("signature", "VARCHAR", doc="HMAC-SHA256 of the manifest; NULL when unsigned"),
        _c("previous_manifest_sha256", "VARCHAR", doc="the chain: the issue recorded before"),
        _c("coverage", "DOUBLE", doc="share of the month's hours with samples"),
        _c("path", "VARCHAR"),
    ),
    key=("period", "version"),
    doc="Recorded before the rename: crash recovery adopts only folders matching an intent.",
)
