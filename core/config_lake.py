"""The `lake:` settings: where clusters publish their bills and how the org bill reads them.

Its own module because `config.py` is near its size limit; the section repeats the `_Section`
rules (unknown keys refused, frozen) instead of importing it, because `config.py` imports
this module.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class LakeSettings(BaseModel):
    """`uri` is the default `--lake`; `s3_*` reach an S3-compatible store (credentials come from
    the usual AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY environment, never from this file);
    `team_aliases` rolls renamed teams up by one name (`old: new`, or `cluster/old: new` for
    one cluster only); `spark_master` and `spark_conf` configure the Spark engine (the usual
    SPARK_* environment and spark-defaults apply when unset)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    uri: str | None = None
    cluster: str | None = None
    s3_endpoint: str | None = None
    s3_region: str = "us-east-1"
    s3_scheme: Literal["http", "https"] = "https"
    team_aliases: dict[str, str] = Field(default_factory=dict)
    engine: Literal["duckdb", "spark"] = "duckdb"
    spark_master: str | None = None
    spark_conf: dict[str, str] = Field(default_factory=dict)
    accept_unsigned: bool = Field(
        default=False,
        description="Read (and publish over) lake manifests without a signature although "
        "reports.signing_key is set: for the migration of a lake published before manifests were "
        "signed; republish every partition, then turn it off (docs/decisions/0176).",
    )

    @field_validator("cluster")
    @classmethod
    def _cluster_name(cls, value: str | None) -> str | None:
        if value is not None:
            check_cluster_name(value)
        return value


def check_cluster_name(name: str) -> str:
    """A cluster name is a partition value: letters, digits, `-`, `_`, `.`; 1-63 characters."""
    import re

    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}", name):
        raise ValueError(
            f"cluster name {name!r}: expected 1-63 letters, digits, '.', '_' or '-' (a partition value)"
        )
    return name
