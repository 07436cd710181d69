"""The manifest that seals a report folder: what was billed, from what, by which code.

It records the period, when it was generated, the code and price-book versions, the rules the
numbers were computed under (`rules`: fingerprint, description and values, docs/decisions/0150;
`as_computed`: true when those are the roll-up's stored rules, billed `--as-computed`), the
bill's notes (`bill_notes`, docs/decisions/0158),
a hash of the inputs (so two runs over the same data can be told apart from a run over changed
data), and the sha256 of every file. `verify_folder` recomputes the checksums: a finalized issue whose
files were edited after the fact is detected, so its numbers cannot change silently.

Files alone prove nothing, since whoever can write the folder can rewrite a manifest to match.
So a final manifest also carries:
- `signature`: HMAC-SHA256 of the manifest's canonical JSON (every key but `signature`) under
  `reports.signing_key`, when one is configured; only a holder of the key can sign a folder;
- `chain`: the period, version and manifest sha256 of the issue the warehouse recorded before
  this one, so an issue cannot be slipped into (or cut out of) the sequence unnoticed.
The warehouse records the manifest's sha256 and signature before the folder is renamed into
place; that record, not the folder, is the authority (`reports.recovery`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import subprocess
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from gpuledger.core.errors import ReportError
from gpuledger.core.rules import Rules
from gpuledger.core.rules_record import RecordedRules, differs, label
from gpuledger.core.signing import SIGNATURE, sign, signing_key
from gpuledger.reports.layout import MANIFEST, issued_versions, read_manifest

SCHEMA = "gpuledger.report/v1"
__all__ = ["SIGNATURE", "sign", "signing_key"]  # signing_key re-exported for reports.schedule, monthly


def signature_problem(
    folder: Path, manifest: dict[str, Any], key: str | None, recorded: str | None
) -> str | None:
    """What is wrong with a manifest's signature against the one recorded at issue (None: fine).

    An issue recorded unsigned has nothing to check; a signed one needs the key to be checked,
    and both the recorded and the present signature must be the HMAC of this manifest."""
    if recorded is None:
        return None
    path = folder / MANIFEST
    if key is None:
        return f"{path}: signed at issue, but reports.signing_key is not set: cannot check it"
    present = manifest.get(SIGNATURE)
    expected = sign(manifest, key)
    if not isinstance(present, str) or not hmac.compare_digest(present, expected):
        return f"{path}: signature does not match (manifest rewritten, or another key)"
    if not hmac.compare_digest(recorded, expected):
        return f"{path}: signature differs from the one recorded at issue"
    return None


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def code_version() -> dict[str, str | None]:
    """The installed gpuledger version and, in a git checkout, the commit it runs from.

    The version comes from the installed distribution's metadata, not from `gpuledger` (the
    CLI roof), which reports must never import.
    """
    try:
        installed: str | None = metadata.version("gpuledger")
    except metadata.PackageNotFoundError:  # run from a bare checkout, never installed
        installed = None

    commit: str | None = None
    root = Path(__file__).resolve().parent.parent
    if (root / ".git").exists():
        try:
            done = subprocess.run(
                ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
                capture_output=True, text=True, timeout=5, check=False,
            )
            commit = done.stdout.strip() or None
        except (OSError, subprocess.SubprocessError):
            commit = None
    return {"gpuledger": installed, "git_commit": commit}


def build_manifest(
    folder: Path,
    *,
    period: str,
    status: str,
    version: int | None,
    generated_at: datetime,
    price_book_version: str,
    inputs_sha256: str,
    totals: dict[str, Any],
    reason: str | None = None,
    supersedes: int | None = None,
    chain: dict[str, Any] | None = None,
    coverage: dict[str, Any] | None = None,
    rules: dict[str, Any] | None = None,
    as_computed: bool = False,
    bill_notes: list[str] | None = None,
) -> dict[str, Any]:
    """Describe every file under `folder` (except the manifest itself); `chain` names the issue
    recorded before (final issues), `coverage` the hours of the month with samples, `rules`
    the record of the rules the numbers were computed under (None: not recorded),
    `as_computed` whether those are the roll-up's stored rules rather than the settings in
    force (`--as-computed`), `bill_notes` what the bill told its reader
    (`analytics.billing.notes`: billed from raw samples, unpriced models, ...)."""
    files = [
        {"path": p.relative_to(folder).as_posix(), "bytes": p.stat().st_size, "sha256": sha256_file(p)}
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != MANIFEST
    ]
    return {
        "schema": SCHEMA,
        "period": period,
        "status": status,
        "version": version,
        "generated_at": generated_at.isoformat().replace("+00:00", "Z"),
        "code_version": code_version(),
        "price_book_version": price_book_version,
        "inputs_sha256": inputs_sha256,
        "totals": totals,
        "reason": reason,
        "supersedes": supersedes,
        "chain": chain,
        "coverage": coverage,
        "rules": rules,
        "as_computed": as_computed,
        "bill_notes": list(bill_notes or []),
        "files": files,
    }


def write_manifest(folder: Path, manifest: dict[str, Any], key: str | None = None) -> str:
    """Write `manifest.json` (signed with `key` when given); return its sha256 (what the
    warehouse records for the issue)."""
    body = dict(manifest)
    body.pop(SIGNATURE, None)
    if key is not None:
        body[SIGNATURE] = sign(body, key)
    path = folder / MANIFEST
    path.write_text(json.dumps(body, indent=2, sort_keys=True) + "\n")
    return sha256_file(path)


def verify_folder(folder: Path) -> list[str]:
    """Problems with a report folder's files against its manifest (empty when intact)."""
    manifest = read_manifest(folder)
    problems: list[str] = []
    listed = set()
    files = manifest.get("files", [])
    if not isinstance(files, list):
        return [f"{folder / MANIFEST}: `files` is not a list"]
    for number, entry in enumerate(files, 1):
        name = entry.get("path") if isinstance(entry, dict) else None
        digest = entry.get("sha256") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name or not isinstance(digest, str):
            problems.append(f"{folder / MANIFEST}: file entry {number} has no `path` and `sha256`")
            continue
        path = folder / name
        listed.add(name)
        if not path.resolve().is_relative_to(folder.resolve()):
            problems.append(f"{folder / MANIFEST}: file entry {number} points outside the folder")
        elif not path.is_file():
            problems.append(f"{path}: listed in the manifest but missing")
        elif sha256_file(path) != digest:
            problems.append(f"{path}: sha256 differs from the manifest (file changed after issue)")
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if path.is_file() and path.name != MANIFEST and rel not in listed:
            problems.append(f"{path}: not listed in the manifest")
    return problems


def rules_notes(out_dir: Path, period: str, current: Rules) -> list[str]:
    """Informational lines for `report verify`: each issued version of `period` computed under
    other rules than `current` (today's settings). Never a problem: an issue keeps the rules it
    was issued under; the lines say which, so no one reads it as today's."""
    now = RecordedRules.of(current)
    return [
        f"v{version} was issued under {label(issued)}; the current settings' rules are "
        f"{now.short} (informational: issued numbers never change)"
        for version, manifest in issued_versions(out_dir, period).items()
        if differs(issued := RecordedRules.from_dict(manifest.get("rules")), current)
    ]


def require_intact(folder: Path) -> None:
    problems = verify_folder(folder)
    if problems:
        raise ReportError(f"{folder}: report does not match its manifest: {problems[0]}")
