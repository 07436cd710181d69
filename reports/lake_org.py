"""The org statement of a period, from the lake: what `report monthly --lake` writes.

1. The org bill (`analytics.billing.org_bill`) by cluster x team x model x sharing mode (the grain of
   a cluster's own summary) and by team across clusters.
   Also by cluster x team: the org statement PDF (`reports.org_pdf`) lists those lines with
   a reconciliation (teams + special lines = each cluster's fleet cost; clusters = org total).
2. The org FOCUS file: every cluster's published FOCUS rows (`bill_lines`, already the
   cluster's own `focus.parquet` plus `x_Cluster`), concatenated, never recomputed.
3. A manifest naming each file's sha256 and the partitions (cluster, issue, status, content
   digest, the rules each was computed under) the statement was built from, and whether those
   rules differ (docs/decisions/0150); all written to a temp folder, renamed into place.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuledger.analytics.billing.org_bill import Engine, OrgBill, compute_org_bill
from gpuledger.core.period import Period
from gpuledger.reports.focus import write_focus
from gpuledger.reports.org_pdf import PDF_NAME, write_org_pdf
from gpuledger.warehouse.lake.location import Lake
from gpuledger.warehouse.lake.reader import partitions, read_table

STATEMENT_BY = ("cluster", "team", "model", "sharing_mode")


@dataclass(frozen=True)
class OrgStatement:
    folder: Path
    files: tuple[Path, ...]
    bill: OrgBill
    focus_billed_cost: float


def write_org_statement(
    lake: Lake, period: str, out_dir: Path, *, engine: Engine = "duckdb", spark: Any = None,
    issuer: str = "gpuledger",
) -> OrgStatement:
    """Write `out_dir/org/period=YYYY-MM/` (steps in the module docstring)."""
    month = str(Period.exact(period))
    # 1. The org bill, at two grains.
    detail = compute_org_bill(lake, month, STATEMENT_BY, engine=engine, spark=spark)
    teams = compute_org_bill(lake, month, ("team",), engine=engine, spark=spark)
    by_cluster = compute_org_bill(lake, month, ("cluster", "team"), engine=engine, spark=spark)
    # 2. FOCUS rows as the clusters published them.
    parts = partitions(lake, month)
    focus = read_table(lake, parts, "bill_lines")
    final = out_dir / "org" / f"period={month}"
    temp = final.with_name(f".{final.name}.tmp")
    shutil.rmtree(temp, ignore_errors=True)
    temp.mkdir(parents=True)
    detail.lines.write_csv(temp / "org-summary.csv", float_precision=6)
    teams.lines.write_csv(temp / "org-teams.csv", float_precision=6)
    focus_files = write_focus(focus, temp)
    write_org_pdf(by_cluster, temp, issuer)
    # 3. The manifest, then the rename.
    names = ["org-summary.csv", "org-teams.csv", PDF_NAME, *[p.name for p in focus_files]]
    manifest = {
        "schema": "gpuledger.org-statement/v1", "period": month, "currency": detail.currency,
        "fleet_cost": detail.fleet_cost, "engine": engine,
        "partitions": [
            {"cluster": p.manifest.cluster, "issue": p.manifest.issue, "status": p.manifest.status,
             "content_sha256": p.manifest.content_sha256, "watermark": p.manifest.watermark,
             "rules": p.manifest.rules}
            for p in parts
        ],
        "rules_differ": detail.rules_differ, "rules_note": detail.rules_note(),
        "files": {n: hashlib.sha256((temp / n).read_bytes()).hexdigest() for n in names},
    }
    (temp / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    if final.exists():
        old = final.with_name(f".{final.name}.old")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(final, old)
        os.replace(temp, final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(temp, final)
    billed = float(focus["BilledCost"].cast(float).sum()) if focus.height else 0.0
    files = tuple(final / n for n in [*names, "manifest.json"])
    return OrgStatement(final, files, detail, billed)
