"""The scale-out engine of the org bill: the same SQL text on Spark.

A session is built from `lake.spark_master` / `lake.spark_conf` (else Spark's own defaults:
spark-defaults.conf, SPARK_CONF_DIR, PYSPARK_SUBMIT_ARGS, local mode when nothing is set). The
caller owns the session: tests start one per module and stop it after; the CLI starts one per
command. On an S3 lake Spark reads through Hadoop's S3A connector (the hadoop-aws jar that
matches Spark's Hadoop, resolved from Maven Central by `spark.jars.packages`), pointed at the
same endpoint as pyarrow.
"""

from __future__ import annotations

from typing import Any

from gpuledger.core.config_lake import LakeSettings
from gpuledger.warehouse.lake.errors import LakeError
from gpuledger.warehouse.lake.location import Lake
from gpuledger.warehouse.lake.org_sql import DETAIL_VIEW

HADOOP_AWS = "org.apache.hadoop:hadoop-aws:{version}"


def spark_session(settings: LakeSettings, *, s3: bool = False, app: str = "gpuledger-org-bill") -> Any:
    """A SparkSession (get-or-create); `s3` adds the S3A connector and endpoint settings."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise LakeError("org bill --engine spark needs pyspark (pip install 'gpuledger[spark]')") from None
    builder = SparkSession.builder.appName(app)
    if settings.spark_master:
        builder = builder.master(settings.spark_master)
    defaults = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "8",
        "spark.sql.session.timeZone": "UTC",
    }
    if s3:
        defaults |= s3a_conf(settings)
    for key, value in (defaults | dict(settings.spark_conf)).items():
        builder = builder.config(key, value)
    try:
        return builder.getOrCreate()
    except Exception as exc:  # Java missing, bad master URL: one line, not a JVM trace
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise LakeError(f"spark: cannot start a session ({first})") from None


def s3a_conf(settings: LakeSettings) -> dict[str, str]:
    """Hadoop S3A settings for the lake's endpoint; credentials stay in the AWS environment."""

    conf = {
        "spark.jars.packages": HADOOP_AWS.format(version=hadoop_version()),
        "spark.hadoop.fs.s3a.aws.credentials.provider":
            "software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider",
        "spark.hadoop.fs.s3a.endpoint.region": settings.s3_region,
    }
    if settings.s3_endpoint:
        conf["spark.hadoop.fs.s3a.endpoint"] = settings.s3_endpoint
        conf["spark.hadoop.fs.s3a.path.style.access"] = "true"
        conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = str(
            not settings.s3_endpoint.startswith("http://")
        ).lower()
    return conf


def hadoop_version() -> str:
    """The Hadoop version bundled in pyspark's jars (hadoop-aws must match it exactly)."""
    from pathlib import Path

    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    for jar in sorted(jars.glob("hadoop-client-api-*.jar")):
        return jar.name.removeprefix("hadoop-client-api-").removesuffix(".jar")
    raise LakeError(f"spark: no hadoop-client-api jar in {jars}")


def engine_path(lake: Lake, path: str) -> str:
    """A lake path as Spark names it: file:/// locally, s3a:// on S3."""
    return f"file://{path}" if lake.is_local else f"s3a://{path}"


def run_grouped(spark: Any, lake: Lake, files: list[str], sql: str) -> Any:
    """Run `sql` over the detail `files` on `spark`; a Polars frame (sums as decimals)."""
    import polars as pl

    frame = spark.read.parquet(*[engine_path(lake, f) for f in files])
    frame.createOrReplaceTempView(DETAIL_VIEW)
    try:
        table = spark.sql(sql).toArrow()
    finally:
        spark.catalog.dropTempView(DETAIL_VIEW)
    return pl.from_arrow(table)
