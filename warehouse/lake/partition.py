"""Publish one partition (cluster x period) so that a reader never sees half of it.

1. Serialize every table to Parquet (rows in a fixed order) and name each file by its checksum;
   digest what each table says (`canonical_sha256`: floats to 9 decimals, so float noise in
   the last bits never makes the same numbers look new).
2. Compare with the committed manifest: the same content is a no-op (nothing is written); a
   draft becoming final rewrites only the manifest; new numbers (or the same numbers under other
   rules) over a final partition are refused unless `reissue` (then the issue number goes up
   and the replaced digest is kept). A final partition published before manifests recorded
   rules stays as issued when the numbers are the same (it reads as "rules not recorded").
3. Write the data files that are not there yet; a crash here leaves only unlisted files.
4. Write the manifest last, atomically (rename on a local path, one PUT on S3): the commit.
5. Remove files neither the new nor the previous manifest lists (the previous version stays
   readable for a reader that opened its manifest just before the commit).
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from gpuledger.warehouse.lake.errors import FinalizedPartitionError
from gpuledger.warehouse.lake.location import Lake
from gpuledger.warehouse.lake.manifest import (
    MANIFEST,
    Manifest,
    Reissue,
    TableEntry,
    canonical_sha256,
    content_sha256,
    partition_dir,
)
from gpuledger.warehouse.lake.reader import read_manifest

Status = Literal["published", "unchanged", "finalized", "reissued"]


@dataclass(frozen=True)
class PublishResult:
    status: Status
    manifest: Manifest
    files_written: int
    uri: str


def parquet_bytes(frame: Any) -> bytes:
    """A Polars frame as Parquet bytes; deterministic for the same frame."""
    import pyarrow.parquet as pq

    sink = io.BytesIO()
    pq.write_table(frame.to_arrow(), sink, compression="zstd", write_statistics=True)
    return sink.getvalue()


def publish_partition(
    lake: Lake, cluster: str, period: str, tables: dict[str, Any], *, bill: dict[str, Any],
    watermark: str | None, finalize: bool = False, reissue: bool = False,
    now: datetime | None = None, rules: dict[str, Any] | None = None,
) -> PublishResult:
    """Steps in the module docstring; `tables` are Polars frames already in row order; `rules`
    the record of the rules the bill was computed under (`core.rules_record`)."""
    folder = lake.path(*partition_dir(cluster, period))
    # 1. Serialize.
    blobs, entries = _serialize(tables)
    content = content_sha256(entries, bill, watermark, rules)
    stamp = (now or datetime.now(UTC)).isoformat().replace("+00:00", "Z")
    # 2. Compare with what is committed.
    current = read_manifest(lake, cluster, period)  # checked: a forged manifest is not built upon
    resign = current is not None and current.signature is None and lake.key is not None  # migration
    if (current is not None and not resign and current.content_sha256 == content
            and (current.finalized or not finalize)):
        return PublishResult("unchanged", current, 0, folder)
    if (current is not None and not resign and current.finalized and current.rules is None
            and current.content_sha256 == content_sha256(entries, bill, watermark)):
        return PublishResult("unchanged", current, 0, folder)  # issued before rules were recorded
    status, issue, reissues = _next_issue(lake, current, content, reissue=reissue)
    if status == "finalized" and current is not None:  # same numbers: keep the files it lists
        blobs, entries = {}, dict(current.tables)
    final = finalize or status == "reissued" or (current is not None and current.finalized)
    manifest = Manifest(
        cluster=cluster, period=period, issue=issue, status="final" if final else "draft",
        published_at=stamp, watermark=watermark, content_sha256=content, tables=entries,
        bill=bill, reissues=reissues, rules=rules,
    ).signed(lake.key)
    # 3. Data files first (content-named: an existing one already holds these bytes).
    present = set(lake.list_names(folder))
    written = 0
    for file, data in blobs.items():
        if file not in present:
            lake.write_bytes(f"{folder}/{file}", data)
            written += 1
    # 4. The commit.
    lake.write_atomic(f"{folder}/{MANIFEST}", manifest.to_bytes())
    # 5. Files of older versions (and temp files of killed publishes).
    keep = {e.file for e in manifest.tables.values()} | {MANIFEST}
    if current is not None:
        keep |= {e.file for e in current.tables.values()}
    for name in present - keep:
        lake.delete(f"{folder}/{name}")
    return PublishResult(status, manifest, written, folder)


def _serialize(tables: dict[str, Any]) -> tuple[dict[str, bytes], dict[str, TableEntry]]:
    """Step 1: Parquet bytes per content-named file, and the manifest entries."""
    blobs: dict[str, bytes] = {}
    entries: dict[str, TableEntry] = {}
    for name, frame in sorted(tables.items()):
        data = parquet_bytes(frame)
        digest = hashlib.sha256(data).hexdigest()
        file = f"{name}-{digest[:16]}.parquet"
        blobs[file] = data
        entries[name] = TableEntry(
            file=file, rows=frame.height, bytes=len(data), sha256=digest,
            content_sha256=canonical_sha256(frame),
        )
    return blobs, entries


def _next_issue(
    lake: Lake, current: Manifest | None, content: str, *, reissue: bool
) -> tuple[Status, int, tuple[Reissue, ...]]:
    """Step 2: what this publish is. Same content reaching here is a draft being finalized."""
    if current is None:
        return "published", 1, ()
    if current.content_sha256 == content:
        return "finalized", current.issue, current.reissues
    if not current.finalized:
        return "published", current.issue, current.reissues
    if not reissue:
        raise FinalizedPartitionError(
            f"lake {lake.uri}: {current.cluster} {current.period} is final (issue {current.issue}) "
            "and these numbers (or the rules they were computed under) differ; publish with "
            "--reissue to replace it"
        )
    replaced = Reissue(
        issue=current.issue, published_at=current.published_at,
        replaced_content_sha256=current.content_sha256,
    )
    return "reissued", current.issue + 1, (*current.reissues, replaced)
