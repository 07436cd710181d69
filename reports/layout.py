"""Where a monthly report lives on disk, and which versions of it exist.

```
OUT/period=2026-11/
  draft/        the latest non-final run; overwritten by the next draft, never authoritative
  v1/           the first finalized issue: read-only files, sealed by manifest.json
  v2/           a reissue (`--reissue --reason ...`), written beside v1, never over it
```

A version folder is created by renaming a finished staging folder into place, so a folder
named `vN` is always complete: a crash leaves a `.staging-*` folder, never a half issue. The
Hive-style `period=` prefix lets Spark/Trino/DuckDB read `OUT/*/v1/focus.parquet` as one table.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from gpuledger.core.errors import ReportError

MANIFEST = "manifest.json"
DRAFT = "draft"
_VERSION = re.compile(r"^v(\d+)$")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def period_dir(out_dir: Path, period: str) -> Path:
    return out_dir / f"period={period}"


def version_dir(out_dir: Path, period: str, version: int) -> Path:
    return period_dir(out_dir, period) / f"v{version}"


def draft_dir(out_dir: Path, period: str) -> Path:
    return period_dir(out_dir, period) / DRAFT


def read_manifest(folder: Path) -> dict[str, Any]:
    """The manifest of a report folder; a missing or broken one is a `ReportError`."""
    path = folder / MANIFEST
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ReportError(f"{path}: no manifest; the folder is not a complete report") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise ReportError(f"{path}: unreadable manifest ({exc})") from None
    if not isinstance(data, dict):
        raise ReportError(f"{path}: manifest must be a JSON object")
    return data


def issued_versions(out_dir: Path, period: str) -> dict[int, dict[str, Any]]:
    """Finalized versions on disk: version -> manifest (only folders with a final manifest)."""
    found: dict[int, dict[str, Any]] = {}
    folder = period_dir(out_dir, period)
    if not folder.is_dir():
        return found
    for child in folder.iterdir():
        match = _VERSION.match(child.name)
        if not match or not (child / MANIFEST).is_file():
            continue
        manifest = read_manifest(child)
        if manifest.get("status") == "final":
            found[int(match.group(1))] = manifest
    return dict(sorted(found.items()))


def safe_name(text: str) -> str:
    """A file-name-safe form of a team name (`ml/research` -> `ml_research`)."""
    cleaned = _UNSAFE.sub("_", text).strip("._")
    return cleaned or "_"
