"""Running totals of what collection dropped, kept beside the warehouse for `gpuledger serve`.

Why a file and not a table: collection runs in its own process (a CronJob, `collect --follow`)
and the dashboard reads the warehouse only through snapshots; a counter that Prometheus scrapes
from the server must survive both. A small JSON file next to the warehouse
(`<warehouse>.collect-stats.json`) is what the node exporter's textfile collector does for the
same problem, needs no schema change, and is rewritten atomically (write, then rename), so a
reader never sees half of it. Counts only grow (a Prometheus counter); a lost file restarts them
at zero, which `rate()` treats as a counter reset.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

SUFFIX = ".collect-stats.json"


def path_for(warehouse: str | os.PathLike[str]) -> Path:
    return Path(f"{os.fspath(warehouse)}{SUFFIX}")


def read(warehouse: str | os.PathLike[str]) -> dict[str, int]:
    """Dropped samples by reason so far (empty when no collection recorded any)."""
    try:
        body = json.loads(path_for(warehouse).read_text())
    except (OSError, ValueError):
        return {}
    dropped = body.get("dropped") if isinstance(body, dict) else None
    if not isinstance(dropped, dict):
        return {}
    return {str(k): int(v) for k, v in dropped.items() if isinstance(v, int) and v >= 0}


def add(warehouse: str | os.PathLike[str], dropped: Mapping[str, int]) -> dict[str, int]:
    """Add one run's dropped counts by reason (`collectors.quality.Quality.by_reason()` of the
    `DROPPED` reasons) to the totals; returns the new totals."""
    totals = read(warehouse)
    for reason, n in dropped.items():
        if n > 0:
            totals[reason] = totals.get(reason, 0) + int(n)
    target = path_for(warehouse)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps({"dropped": totals}, sort_keys=True) + "\n")
    tmp.replace(target)
    return totals
