"""The partition manifest: the one object that makes a partition exist.

A partition is `LAKE/cluster=NAME/period=YYYY-MM/`. Its data files are named by their content
(`<table>-<sha256[:16]>.parquet`), so a new version never overwrites a file a reader may be
reading; the manifest `_manifest.json` lists the files of the committed version with their row
counts and checksums, and is written last (atomically). A reader reads the manifest first and
only the files it lists, so it sees the previous version or the new one, never half of one.

A manifest also records the rules its bill was computed under (`rules`: the record of
`core.rules_record`, fingerprint and full values; docs/decisions/0150), so a reader states them
instead of assuming its own. The field is optional within `gpuledger.lake/v1`: a manifest
written before it reads as "rules not recorded".
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from gpuledger.core.rules_record import RecordedRules
from gpuledger.warehouse.lake.errors import LakeError

SCHEMA: Literal["gpuledger.lake/v1"] = "gpuledger.lake/v1"
MANIFEST = "_manifest.json"
TABLES: tuple[str, ...] = (
    "bill_detail", "bill_lines", "card_hours_hourly", "allocations", "gpus", "nodes", "prices",
)
"""What a partition holds: the priced detail the org bill re-aggregates, the cluster's own
FOCUS lines, the hourly card-hours, the allocations, the inventory and the prices in force."""


class TableEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    file: str
    rows: int
    bytes: int
    sha256: str
    """Of the file's bytes: what a reader checks."""
    content_sha256: str
    """Of what the table says (`partition.canonical_sha256`): what a re-publish compares."""


class Reissue(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    issue: int
    published_at: str
    replaced_content_sha256: str


class Manifest(BaseModel):
    """What one publish committed. `content_sha256` covers the tables and the bill facts (not
    the publish time), so publishing the same numbers again is recognised as a no-op."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal["gpuledger.lake/v1"] = SCHEMA
    cluster: str
    period: str
    issue: int = 1
    status: Literal["draft", "final"] = "draft"
    published_at: str
    watermark: str | None
    """Data as of: the newest sample (or roll-up hour end) before the period's end."""
    content_sha256: str
    tables: dict[str, TableEntry]
    bill: dict[str, Any]
    """currency, fleet_cost, fleet_card_hours, redistribution, price_book_version, ..."""
    reissues: tuple[Reissue, ...] = ()
    rules: dict[str, Any] | None = None
    """The rules of the published bill (`core.rules_record.RecordedRules.to_dict`); None in a
    manifest written before partitions recorded them."""

    @property
    def finalized(self) -> bool:
        return self.status == "final"

    @property
    def recorded_rules(self) -> RecordedRules | None:
        return RecordedRules.from_dict(self.rules)

    def to_bytes(self) -> bytes:
        return (json.dumps(self.model_dump(mode="json"), indent=2, sort_keys=True) + "\n").encode()

    @classmethod
    def from_bytes(cls, data: bytes, where: str) -> Manifest:
        try:
            return cls.model_validate(json.loads(data))
        except (ValueError, ValidationError) as exc:
            first = str(exc).strip().splitlines()[0]
            raise LakeError(f"lake manifest {where}: not a {SCHEMA} manifest ({first})") from None


def content_sha256(
    tables: dict[str, TableEntry], bill: dict[str, Any], watermark: str | None,
    rules: dict[str, Any] | None = None,
) -> str:
    """The digest of what a partition says: every table's checksum, the bill facts, the
    watermark and the rules' fingerprint (left out when none is recorded, so a manifest from
    before rules were recorded digests as it did). Two publishes with the same digest are the
    same partition."""
    payload: dict[str, Any] = {
        "tables": {name: entry.content_sha256 for name, entry in sorted(tables.items())},
        "bill": bill,
        "watermark": watermark,
    }
    if rules is not None:
        payload["rules"] = rules.get("fingerprint")
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def partition_dir(cluster: str, period: str) -> tuple[str, str]:
    """The two hive-style folder names of a partition."""
    return f"cluster={cluster}", f"period={period}"
