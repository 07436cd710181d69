"""Read a lake: the committed partitions of a period, each checked against its manifest.

A reader trusts only manifests: it lists `cluster=*` folders, reads each one's
`period=P/_manifest.json`, and reads exactly the files listed there (so a publish in progress
or killed half-way, whose files no manifest lists yet, is invisible). Every manifest is checked
when read (`Manifest.check`: its HMAC under `reports.signing_key`, its content digest; its
issue history by the model itself), and `read_verified` recomputes each file's sha256, row count
and content digest before a bill is built from it, whichever engine (DuckDB or Spark) then
scans it: a lake edited by hand, or a file truncated by a broken copy, is an error, never a
silently different bill (docs/decisions/0176).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from gpuledger.warehouse.lake.errors import LakeError
from gpuledger.warehouse.lake.location import Lake
from gpuledger.warehouse.lake.manifest import MANIFEST, Manifest, canonical_sha256, partition_dir


@dataclass(frozen=True)
class Partition:
    manifest: Manifest
    folder: str

    def file(self, table: str) -> str:
        entry = self.manifest.tables.get(table)
        if entry is None:
            raise LakeError(f"lake partition {self.folder}: no table {table!r} in its manifest")
        return f"{self.folder}/{entry.file}"


def read_manifest(lake: Lake, cluster: str, period: str) -> Manifest | None:
    """The partition's manifest, checked (`Manifest.check`: signature, content digest), or None."""
    folder = lake.path(*partition_dir(cluster, period))
    where = f"{folder}/{MANIFEST}"
    raw = lake.read_bytes(where)
    if raw is None:
        return None
    return Manifest.from_bytes(raw, where).check(lake.key, lake.settings.accept_unsigned, where)


def partitions(lake: Lake, period: str, clusters: tuple[str, ...] | None = None) -> list[Partition]:
    """Every committed partition of `period` (optionally only `clusters`), by cluster name."""
    names = [n.removeprefix("cluster=") for n in lake.list_names(lake.root) if n.startswith("cluster=")]
    if clusters is not None:
        missing = sorted(set(clusters) - set(names))
        if missing:
            found = ", ".join(names) or "none"
            raise LakeError(f"lake {lake.uri}: no cluster {missing[0]!r} (found: {found})")
        names = [n for n in names if n in clusters]
    out: list[Partition] = []
    for cluster in names:
        manifest = read_manifest(lake, cluster, period)
        if manifest is None:
            continue
        if manifest.cluster != cluster or manifest.period != period:
            raise LakeError(
                f"lake {lake.uri}: cluster={cluster}/period={period} holds the manifest of "
                f"{manifest.cluster} {manifest.period}"
            )
        out.append(Partition(manifest, lake.path(*partition_dir(cluster, period))))
    if not out:
        raise LakeError(f"lake {lake.uri}: no cluster has published {period}")
    return out


def read_verified(lake: Lake, part: Partition, table: str) -> bytes:
    """The bytes of one table file, after checking them against the manifest."""
    path = part.file(table)
    data = lake.read_bytes(path)
    entry = part.manifest.tables[table]
    if data is None:
        raise LakeError(f"lake {lake.uri}: {path} is listed in its manifest but missing")
    if len(data) != entry.bytes or hashlib.sha256(data).hexdigest() != entry.sha256:
        raise LakeError(f"lake {lake.uri}: {path} does not match its manifest checksum")
    _check_content(lake, path, data, entry.rows, entry.content_sha256)
    return data


def _check_content(lake: Lake, path: str, data: bytes, rows: int, content: str) -> None:
    """What the file says against what the manifest says it says: its row count and its
    `content_sha256` (the digest a publish computed from the frame, covered by the manifest's
    signature and content digest). A file swapped in with the manifest's file, size and sha256
    updated but its content digest left stale is refused here (issue 31)."""
    import io

    import polars as pl

    try:
        frame = pl.read_parquet(io.BytesIO(data))
    except Exception as exc:  # a corrupt file: one line, the file named
        raise LakeError(f"lake {lake.uri}: {path} is not a readable Parquet file "
                        f"({type(exc).__name__})") from None
    if frame.height != rows:
        raise LakeError(f"lake {lake.uri}: {path} holds {frame.height} rows, its manifest says {rows}")
    if canonical_sha256(frame) != content:
        raise LakeError(f"lake {lake.uri}: {path} says other numbers than its manifest's content_sha256")


def read_table(lake: Lake, parts: list[Partition], table: str) -> Any:
    """One table of every partition, verified, as one Polars frame (partitions in order)."""
    import io

    import polars as pl

    frames = [pl.read_parquet(io.BytesIO(read_verified(lake, part, table))) for part in parts]
    return pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()
