"""What is free now, worked out from a warehouse file with SQL and arithmetic here, not through
`analytics.capacity`: the independent side of the capacity tests (demo, MCP)."""

from __future__ import annotations

import json
from typing import Any


def whole_gpus_free(wh: Any) -> float:
    """Exclusive nodes' allocatable GPUs minus the requests of the pods running at the newest
    inventory, per node (never below 0: a full node adds nothing), summed."""
    at = wh.scalar("SELECT max(observed_at) FROM nodes")
    alloc = {n: float(json.loads(a).get("nvidia.com/gpu", 0)) for n, a in wh.query(
        "SELECT node, CAST(allocatable AS VARCHAR) FROM nodes WHERE sharing_mode = 'exclusive'").rows()}
    used = dict.fromkeys(alloc, 0.0)
    for node, r in wh.query("SELECT node, CAST(gpu_requests AS VARCHAR) FROM pods "
                            "WHERE node IS NOT NULL AND end_ts >= ?", [at]).rows():
        if node in used:
            used[node] += float(json.loads(r).get("nvidia.com/gpu", 0))
    return sum(max(0.0, alloc[n] - used[n]) for n in alloc)


def hami_left(wh: Any) -> tuple[dict[str, float], dict[str, float]]:
    """Per HAMi card (uuid): memory MiB and cores % left, its size (100 % cores) minus the
    allocations alive at the newest observation on it."""
    cards = wh.query("SELECT uuid, memory_mib FROM gpus WHERE sharing_mode = 'vgpu'").rows()
    alive = wh.query("SELECT uuid, mem_mib, cores_pct FROM vgpu_allocations "
                     "WHERE end_ts >= (SELECT max(end_ts) FROM vgpu_allocations)").rows()
    mem = {u: float(m) - sum(float(x) for c, x, _ in alive if c == u) for u, m in cards}
    cores = {u: 100.0 - sum(float(x) for c, _, x in alive if c == u) for u, _ in cards}
    return mem, cores
