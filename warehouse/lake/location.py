"""Where a lake lives: a local (or mounted) folder, or an S3 bucket, behind one small API.

Only a handful of operations are needed, so the lake names them instead of leaking a file
system: read an object, write an object, write one *atomically* (the manifest), list a folder,
delete. On a local path the atomic write is write-to-temp, fsync, `os.replace` (a rename is
atomic on POSIX); on S3 a single PUT is atomic by itself (an object is either the old one or
the new one, never half), so the manifest is simply put last. S3 goes through pyarrow's native
S3 file system (the AWS C++ SDK): credentials from the usual AWS environment, the endpoint
from `lake.s3_endpoint` for an S3-compatible server.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuledger.core.config_lake import LakeSettings
from gpuledger.warehouse.lake.errors import LakeError


@dataclass(frozen=True)
class Lake:
    """An opened lake URI. `root` is a local folder, or `bucket/prefix` on S3."""

    uri: str
    root: str
    scheme: str
    settings: LakeSettings
    key: str | None = field(default=None, repr=False)
    """The HMAC key (`reports.signing_key`, `core.signing`) that signs and checks manifests."""

    @classmethod
    def open(cls, uri: str, settings: LakeSettings | None = None, key: str | None = None) -> Lake:
        """Parse `uri`: `s3://bucket/prefix`, `file:///path` or a plain path."""
        settings = settings or LakeSettings()
        text = uri.strip()
        if not text:
            raise LakeError("lake URI is empty: pass --lake PATH or s3://bucket/prefix")
        if text.startswith("s3://"):
            root = text[len("s3://"):].strip("/")
            if not root:
                raise LakeError(f"lake {uri!r}: an S3 URI names a bucket, e.g. s3://gpu-lake/org")
            return cls(text.rstrip("/"), root, "s3", settings, key)
        if "://" in text and not text.startswith("file://"):
            raise LakeError(f"lake {uri!r}: only a local path, file:// or s3:// are supported")
        path = Path(text.removeprefix("file://")).expanduser().resolve()
        return cls(str(path), str(path), "file", settings, key)

    @property
    def is_local(self) -> bool:
        return self.scheme == "file"

    def path(self, *parts: str) -> str:
        return "/".join([self.root, *parts])

    def filesystem(self) -> Any:
        """The pyarrow file system of this lake (S3 built once per call; cheap)."""
        import pyarrow.fs as pafs

        if self.is_local:
            return pafs.LocalFileSystem()
        s = self.settings
        options: dict[str, Any] = {"region": s.s3_region, "scheme": s.s3_scheme}
        if s.s3_endpoint:
            endpoint = s.s3_endpoint.split("://", 1)[-1]
            options["endpoint_override"] = endpoint
            if s.s3_endpoint.startswith("http://"):
                options["scheme"] = "http"
        return pafs.S3FileSystem(**options)

    # Objects --------------------------------------------------------------------------------
    def read_bytes(self, path: str) -> bytes | None:
        """The object's bytes, or None when there is none."""
        if self.is_local:
            try:
                return Path(path).read_bytes()
            except FileNotFoundError:
                return None
        fs = self.filesystem()
        try:
            if _kind(fs, path) != "file":
                return None
            with fs.open_input_stream(path) as stream:
                return bytes(stream.read())
        except OSError as exc:
            raise LakeError(f"lake {self.uri}: cannot read {path}: {_first_line(exc)}") from None

    def write_bytes(self, path: str, data: bytes) -> None:
        """Write an object that no reader can see yet (its name is in no manifest)."""
        if self.is_local:
            target = Path(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            _write_synced(target, data)
            return
        fs = self.filesystem()
        try:
            with fs.open_output_stream(path) as stream:
                stream.write(data)
        except OSError as exc:
            raise LakeError(f"lake {self.uri}: cannot write {path}: {_first_line(exc)}") from None

    def write_atomic(self, path: str, data: bytes) -> None:
        """Replace an object so a reader sees the old bytes or the new, never a mix."""
        if not self.is_local:
            self.write_bytes(path, data)  # one S3 PUT is atomic
            return
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        temp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
        _write_synced(temp, data)
        os.replace(temp, target)
        _sync_dir(target.parent)

    def list_names(self, folder: str) -> list[str]:
        """Names directly inside `folder` (files and folders), sorted; empty when missing."""
        if self.is_local:
            base = Path(folder)
            return sorted(p.name for p in base.iterdir()) if base.is_dir() else []
        import pyarrow.fs as pafs

        fs = self.filesystem()
        try:
            infos = fs.get_file_info(pafs.FileSelector(folder, allow_not_found=True))
        except OSError as exc:
            raise LakeError(f"lake {self.uri}: cannot list {folder}: {_first_line(exc)}") from None
        return sorted(info.base_name for info in infos)

    def delete(self, path: str) -> None:
        """Remove an object if it is there."""
        if self.is_local:
            Path(path).unlink(missing_ok=True)
            return
        fs = self.filesystem()
        try:
            fs.delete_file(path)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise LakeError(f"lake {self.uri}: cannot delete {path}: {_first_line(exc)}") from None


def _kind(fs: Any, path: str) -> str:
    import pyarrow.fs as pafs

    info = fs.get_file_info(path)
    if info.type == pafs.FileType.File:
        return "file"
    return "dir" if info.type == pafs.FileType.Directory else "none"


def _write_synced(path: Path, data: bytes) -> None:
    with open(path, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def _sync_dir(folder: Path) -> None:
    """Make a rename durable (the directory entry itself is flushed)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
