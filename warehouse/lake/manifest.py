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
import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from gpuledger.core.rules_record import RecordedRules
from gpuledger.core.signing import matches, sign
from gpuledger.warehouse.lake.errors import LakeError

SCHEMA: Literal["gpuledger.lake/v1"] = "gpuledger.lake/v1"
MANIFEST = "_manifest.json"
TABLES: tuple[str, ...] = (
    "bill_detail", "bill_lines", "card_hours_hourly", "allocations", "gpus", "nodes", "prices",
)
"""What a partition holds: the priced detail the org bill re-aggregates, the cluster's own
FOCUS lines, the hourly card-hours, the allocations, the inventory and the prices in force."""
MAX_ROWS = 10**10
"""Rows one table of one cluster-month may claim. A partition holds hourly detail: a
100,000-card fleet for a 31-day month is ~7.4e7 card-hours, so 1e10 leaves two orders of
magnitude for workloads per card; a manifest claiming more (10^15) was not written by a publish,
and the reader also checks the count against the Parquet file itself."""
MAX_BYTES = 1 << 40
MAX_AMOUNT = 1e13
"""The largest fleet cost or card-hours a manifest may state (a trillion-scale typo is refused)."""


class TableEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    file: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,200}$")
    rows: int = Field(ge=0, le=MAX_ROWS)
    bytes: int = Field(ge=0, le=MAX_BYTES)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    """Of the file's bytes: what a reader checks."""
    content_sha256: str
    """Of what the table says (`canonical_sha256` below): what a re-publish compares."""


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
    signature: str | None = None
    """HMAC-SHA256 of the rest under `reports.signing_key` (`core.signing`); None: unsigned."""

    @field_validator("bill")
    @classmethod
    def _bill_numbers(cls, bill: dict[str, Any]) -> dict[str, Any]:
        """The money a reader adds up: finite, non-negative and bounded, or the manifest is not one."""
        for name in ("fleet_cost", "fleet_card_hours"):
            value = bill.get(name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise ValueError(f"bill.{name} {value!r}: expected a finite number")
            if not 0 <= value <= MAX_AMOUNT:
                raise ValueError(f"bill.{name} {value!r}: expected between 0 and {MAX_AMOUNT:.0e}")
        return bill

    @model_validator(mode="after")
    def _issue_history(self) -> Manifest:
        """`final` as a reader enforces it: issue n carries the n-1 issues it replaced, and only a
        final partition is ever reissued, so a draft cannot pose as a later issue."""
        if self.issue != len(self.reissues) + 1:
            raise ValueError(f"issue {self.issue} with {len(self.reissues)} recorded reissues")
        if self.reissues and self.status != "final":
            raise ValueError("a reissued partition is final; this one says draft")
        if [r.issue for r in self.reissues] != list(range(1, self.issue)):
            raise ValueError("reissues are not issues 1..n-1 in order")
        return self

    @property
    def finalized(self) -> bool:
        return self.status == "final"

    @property
    def recorded_rules(self) -> RecordedRules | None:
        return RecordedRules.from_dict(self.rules)

    def to_bytes(self) -> bytes:
        return (json.dumps(self.body(), indent=2, sort_keys=True) + "\n").encode()

    def body(self) -> dict[str, Any]:
        """The JSON document; without `signature` when unsigned (what an older reader expects)."""
        body = self.model_dump(mode="json")
        if body.get("signature") is None:
            body.pop("signature", None)
        return body

    def signed(self, key: str | None) -> Manifest:
        """This manifest signed under `key` (unchanged, unsigned, when there is no key)."""
        if key is None:
            return self
        return self.model_copy(update={"signature": sign(self.body(), key)})

    def check(self, key: str | None, accept_unsigned: bool, where: str) -> Manifest:
        """This manifest, after checking its signature and its content digest; `LakeError` else.

        With a key, a manifest must carry its HMAC (unsigned: refused unless `accept_unsigned`,
        the migration setting); a signed one read without a key is refused, as a statement is.
        Without a key an unsigned manifest is read: nothing can authenticate it, and the lake's
        threat model (docs/guide/security.md) says so. The content digest is recomputed either way."""
        if self.signature is None:
            if key is not None and not accept_unsigned:
                raise LakeError(f"lake manifest {where}: not signed, but reports.signing_key is set "
                                "(republish it, or set lake.accept_unsigned: true while migrating)")
        elif key is None:
            raise LakeError(f"lake manifest {where}: signed, but reports.signing_key is not set: "
                            "cannot check it")
        elif not matches(self.body(), key):
            raise LakeError(f"lake manifest {where}: signature does not match "
                            "(manifest rewritten, or another key)")
        digest = content_sha256(self.tables, self.bill, self.watermark, self.rules)
        if self.content_sha256 != digest:
            raise LakeError(f"lake manifest {where}: content_sha256 does not match its tables and bill "
                            "(manifest edited after publish)")
        return self

    @classmethod
    def from_bytes(cls, data: bytes, where: str) -> Manifest:
        try:
            return cls.model_validate(json.loads(data))
        except ValidationError as exc:
            error = exc.errors()[0]
            field = ".".join(str(p) for p in error["loc"]) or "manifest"
            raise LakeError(f"lake manifest {where}: not a {SCHEMA} manifest "
                            f"({field}: {error['msg'].removeprefix('Value error, ')})") from None
        except (ValueError, RecursionError) as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise LakeError(f"lake manifest {where}: not a {SCHEMA} manifest ({first})") from None


def canonical_sha256(frame: Any) -> str:
    """A digest of what a frame says, not of its bytes: rows as CSV with floats to 9 decimals.

    The bill's float columns carry last-bit noise from the order Polars adds things in; two
    publishes of the same warehouse must still be recognised as the same partition."""
    import polars as pl

    digest = hashlib.sha256(",".join(f"{n}:{t}" for n, t in frame.schema.items()).encode())
    numbers = [n for n, t in frame.schema.items() if t.is_float() or t.is_decimal()]
    canonical = frame.with_columns(pl.col(numbers).cast(pl.Float64).round(9)) if numbers else frame
    for chunk in canonical.iter_slices(100_000):  # bounded memory for large fleets
        digest.update(chunk.write_csv(include_header=False, float_precision=9).encode())
    return digest.hexdigest()


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
