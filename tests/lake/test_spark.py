"""The org bill on Spark (PySpark in local mode, one session for the module, stopped after).

- Spark runs the same SQL text as DuckDB and its lines equal DuckDB's exactly, for several
  groupings, and each cluster's lines equal that cluster's own bill to the cent;
- on the S3 lake, Spark reads through Hadoop's S3A connector (hadoop-aws resolved from Maven
  Central by Spark's own package mechanism, cached under ~/.cache/gpuledger/ivy) and gives the
  same lines as DuckDB reading the same bucket through pyarrow.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuledger.analytics.billing.money import to_cents
from gpuledger.analytics.billing.org_bill import compute_org_bill
from gpuledger.core.config_lake import LakeSettings
from gpuledger.warehouse.lake import spark_engine
from gpuledger.warehouse.lake.location import Lake
from tests.lake.conftest import publish_all
from tests.lake.fleets import CLUSTERS, PERIOD

pytestmark = pytest.mark.slow  # a Spark JVM starts once for the module (tens of seconds)

IVY = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpuledger" / "ivy"


def _settings(**extra: object) -> LakeSettings:
    conf = {"spark.jars.ivy": str(IVY), "spark.default.parallelism": "2"}
    return LakeSettings(spark_master="local[2]", spark_conf=conf, **extra)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def spark(s3_server) -> Iterator[object]:
    """One local session for the module, with the S3A connector pointed at the test server."""
    session = spark_engine.spark_session(_settings(s3_endpoint=s3_server.endpoint), s3=True)
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.mark.parametrize("by", [("cluster", "team"), ("team",), ("cluster", "team", "pool", "day")])
def test_spark_lines_equal_duckdb(spark, published_lake: Lake, by) -> None:
    on_spark = compute_org_bill(published_lake, PERIOD, by, engine="spark", spark=spark)
    on_duckdb = compute_org_bill(published_lake, PERIOD, by, engine="duckdb")
    assert on_spark.lines.height > 0
    assert on_spark.lines.equals(on_duckdb.lines)
    assert on_spark.fleet_cost == on_duckdb.fleet_cost


def test_spark_cluster_lines_are_their_own_bills(spark, published_lake: Lake, reference_bills) -> None:
    org = compute_org_bill(published_lake, PERIOD, ("cluster", "team"), engine="spark", spark=spark)
    for case in CLUSTERS:
        own = {r["team"]: r for r in reference_bills[(case.name, ("team",))].lines.iter_rows(named=True)}
        mine = org.lines.filter(org.lines["cluster"] == case.name)
        assert {r["team"] for r in mine.iter_rows(named=True)} == set(own)
        for row in mine.iter_rows(named=True):
            assert to_cents(row["cost"]) == to_cents(own[row["team"]]["cost"])


def test_spark_reads_s3_through_s3a(spark, s3_server, warehouses) -> None:
    lake = Lake.open("s3://gpu-lake/spark", LakeSettings(s3_endpoint=s3_server.endpoint))
    publish_all(lake, warehouses)
    on_spark = compute_org_bill(lake, PERIOD, ("cluster", "team"), engine="spark", spark=spark)
    on_duckdb = compute_org_bill(lake, PERIOD, ("cluster", "team"), engine="duckdb")
    assert on_spark.lines.equals(on_duckdb.lines)
