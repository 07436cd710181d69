"""Where the project's shared folder (`shared/`: Volcano's CRDs, the MIG profile tables) is.

It lives beside the checkout (`../shared` from the main checkout, `../../shared` from a helper
worktree), or beside the repository a clean clone was made from (its local `origin`, which is
how CI clones main), or under `$GPULEDGER_SHARED`. Tests that read it never copy it into the
project and never skip when it is missing: they fail naming what they looked for.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def shared_candidates() -> list[Path]:
    """The places the shared folder may be, in the order they are tried."""
    found = [Path(os.environ["GPULEDGER_SHARED"])] if os.environ.get("GPULEDGER_SHARED") else []
    found += [ROOT.parent / "shared", ROOT.parent.parent / "shared"]
    origin = subprocess.run(["git", "-C", str(ROOT), "config", "--get", "remote.origin.url"],
                            capture_output=True, text=True, check=False).stdout.strip()
    if origin and Path(origin).is_dir():  # a clone of a local checkout: its shared folder
        found.append(Path(origin).resolve().parent / "shared")
    return found


def shared_file(relative: str) -> Path:
    """The first `shared/<relative>` that exists; `FileNotFoundError` naming where it looked."""
    for base in shared_candidates():
        if (base / relative).exists():
            return base / relative
    raise FileNotFoundError(f"shared/{relative} not found beside {ROOT} (or $GPULEDGER_SHARED)")
