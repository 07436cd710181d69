"""The lake on a real S3-compatible server (gofakes3 built from Go modules, tools/s3_server),
through pyarrow's native S3 file system.

- the three clusters publish to s3://gpu-lake/org; the objects are there, manifest included;
- the org bill read from S3 equals the org bill read from the local lake, line for line;
- re-publishing to S3 is a no-op (nothing written, same manifest object);
- a finalized partition on S3 refuses different numbers;
- an unreachable endpoint is one clear error.
"""

from __future__ import annotations

import pytest

from gpuledger.analytics.billing.org_bill import compute_org_bill
from gpuledger.core.config_lake import LakeSettings
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.lake.errors import FinalizedPartitionError, LakeError
from gpuledger.warehouse.lake.location import Lake
from gpuledger.warehouse.lake.manifest import TABLES
from tests.lake.conftest import cluster_case, publish_all
from tests.lake.fleets import AFTER, PERIOD
from tests.lake.test_publish import CHEAPER


@pytest.fixture(scope="module")
def s3_lake(s3_server, warehouses) -> Lake:
    lake = Lake.open("s3://gpu-lake/org", LakeSettings(s3_endpoint=s3_server.endpoint))
    results = publish_all(lake, warehouses)
    assert {r.status for r in results.values()} == {"published"}
    return lake


def test_objects_are_in_the_bucket(s3_lake: Lake) -> None:
    names = s3_lake.list_names(s3_lake.path("cluster=west", f"period={PERIOD}"))
    assert "_manifest.json" in names
    assert {n.split("-")[0] for n in names if n.endswith(".parquet")} == set(TABLES)
    assert s3_lake.list_names(s3_lake.root) == ["cluster=east", "cluster=lab", "cluster=west"]


@pytest.mark.parametrize("by", [("cluster", "team"), ("team",), ("cluster", "team", "model", "day")])
def test_org_bill_from_s3_equals_local(s3_lake: Lake, published_lake: Lake, by) -> None:
    remote = compute_org_bill(s3_lake, PERIOD, by)
    local = compute_org_bill(published_lake, PERIOD, by)
    assert remote.lines.equals(local.lines)
    assert remote.fleet_cost == local.fleet_cost


def test_republish_to_s3_is_a_no_op(s3_lake: Lake, warehouses) -> None:
    before = s3_lake.read_bytes(s3_lake.path("cluster=lab", f"period={PERIOD}", "_manifest.json"))
    again = publish_all(s3_lake, warehouses)
    assert {r.status for r in again.values()} == {"unchanged"}
    assert s3_lake.read_bytes(s3_lake.path("cluster=lab", f"period={PERIOD}", "_manifest.json")) == before


def test_finalized_on_s3_refuses_overwrite(s3_server, warehouses) -> None:
    from gpuledger.reports.lake_publish import publish_month

    lake = Lake.open("s3://gpu-lake/final", LakeSettings(s3_endpoint=s3_server.endpoint))
    with Warehouse.open(warehouses["lab"], read_only=True) as wh:
        publish_month(wh, cluster_case("lab").settings, lake, "lab", PERIOD, finalize=True, now=AFTER)
        with pytest.raises(FinalizedPartitionError):
            publish_month(wh, CHEAPER, lake, "lab", PERIOD, now=AFTER)


def test_unreachable_endpoint_is_one_line(s3_server) -> None:
    lake = Lake.open("s3://gpu-lake/org", LakeSettings(s3_endpoint="http://127.0.0.1:9"))
    with pytest.raises(LakeError, match="cannot"):
        lake.read_bytes(lake.path("cluster=x", "period=2024-11", "_manifest.json"))


def test_killed_publish_on_s3_leaves_the_previous_partition(s3_server, warehouses) -> None:
    """SIGKILL after three data objects are PUT: the manifest object is still the old one."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from tests.lake.test_publish import KILLER

    lake = Lake.open("s3://gpu-lake/killed", LakeSettings(s3_endpoint=s3_server.endpoint))
    publish_all(lake, warehouses)
    key = lake.path("cluster=west", f"period={PERIOD}", "_manifest.json")
    before = lake.read_bytes(key)
    bill = compute_org_bill(lake, PERIOD, ("cluster", "team")).lines
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run([sys.executable, "-c", KILLER, lake.uri, str(warehouses["west"]), s3_server.endpoint],
                          env=env, capture_output=True, text=True)
    assert done.returncode == -9, done.stderr[-2000:]
    names = lake.list_names(lake.path("cluster=west", f"period={PERIOD}"))
    assert len([n for n in names if n.endswith(".parquet")]) == len(TABLES) + 3  # 3 unlisted orphans
    assert lake.read_bytes(key) == before
    assert compute_org_bill(lake, PERIOD, ("cluster", "team")).lines.equals(bill)
