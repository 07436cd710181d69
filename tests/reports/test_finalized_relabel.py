"""Issue 31 item 7: collecting the next month never re-prices a finalized one (docs/decisions/0207).

Case: November 2024 of the small simulated fleet is finalized (its inventory was read at the
end of December); January's collect then reads the time-sliced node relabelled (GFD's
`nvidia.com/gpu.replicas` doubled, another `gpuledger.io/pool`). November's lines are equal to the cent before and
after, and `report verify` (which bills the month again) passes. Before v014 the relabel
replaced the node's only row: November was billed at the new replica count and pool, and
`report verify` failed on the numbers.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from gpuledger.cli import main
from gpuledger.core.config import Settings
from gpuledger.reports.billing import month_bill, summary_lines
from gpuledger.reports.monthly import issue_monthly
from gpuledger.warehouse import LoadBatch, Warehouse

pytestmark = pytest.mark.slow
NOV = "2024-11"
DEC_2 = datetime(2024, 12, 2, tzinfo=UTC)
JAN_2 = datetime(2025, 1, 2, tzinfo=UTC)


def _lines(wh: Warehouse) -> pl.DataFrame:
    return summary_lines(month_bill(wh, Settings(), NOV)).select("team", "model", "sharing_mode", "cost")


def test_a_later_relabel_leaves_a_finalized_november(warehouse: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    with Warehouse.open(warehouse) as wh:
        issue_monthly(wh, Settings(), NOV, out, finalize=True, now=DEC_2)
        at_issue = _lines(wh)
        node = wh.query("SELECT * FROM nodes WHERE sharing_mode = 'timeslice' ORDER BY node LIMIT 1")
        labels = json.loads(node["labels"][0])
        replicas = int(labels["nvidia.com/gpu.replicas"])
        labels |= {"nvidia.com/gpu.replicas": str(2 * replicas), "gpuledger.io/pool": "moved"}
        relabelled = node.with_columns(pl.lit(json.dumps(labels, sort_keys=True)).alias("labels"),
                                       pl.lit(2 * replicas, dtype=pl.Int32).alias("replicas"),
                                       pl.lit("moved").alias("pool"),
                                       pl.lit(JAN_2).cast(pl.Datetime("us", "UTC")).alias("observed_at"))
        wh.load(LoadBatch({"nodes": relabelled}))
        after = _lines(wh)
    assert at_issue.height > 0 and after.equals(at_issue)
    assert main(["--warehouse", str(warehouse), "report", "verify", "--period", NOV, "--out", str(out)]) == 0
