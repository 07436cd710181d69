"""Free DRA devices (`warehouse.queries.waiting.dra_free`, capacity now step 3), on a warehouse.

Cases: a static card with two MIG devices, one claimed at the newest claim observation (one
free); a whole-GPU card with no claim (free) and one whose claim ended before the newest
observation (free again); a whole-GPU device whose card has a claimed device (not free); the
on-demand MIG devices of a dynamic card are left out (possibilities, not devices).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl

from gpuledger.core.frames_dra import DRA_CLAIMS, DRA_DEVICES
from gpuledger.core.table_spec import polars_schema
from gpuledger.warehouse import LoadBatch, Warehouse
from gpuledger.warehouse.queries.waiting import dra_free

T = datetime(2026, 12, 1, 12, tzinfo=UTC)
DRIVER = "gpu.nvidia.com"


def device(node: str, name: str, parent: str, kind: str, profile: str | None = None, *,
           dynamic: int = 0) -> dict[str, object]:
    return {"driver": DRIVER, "pool": node, "device": name, "node": node, "kind": kind, "uuid": None,
            "parent_uuid": parent, "profile": profile, "placement": 0 if profile else -1,
            "model": "H100-80GB", "memory_mib": None, "dynamic": dynamic, "observed_at": T, "source": "api"}


def claim(node: str, name: str, end: datetime) -> dict[str, object]:
    return {"claim_uid": f"uid-{name}", "request": "gpu", "driver": DRIVER, "pool": node, "device": name,
            "namespace": "nlp", "claim": f"c-{name}", "device_class": "gpu.nvidia.com", "template": None,
            "sharing": "exclusive", "start_ts": end - timedelta(hours=1), "end_ts": end, "source": "api"}


def test_free_devices_at_the_newest_claim_observation(tmp_path: Path) -> None:
    devices = [
        device("n1", "gpu-0-mig-a", "card-0", "mig", "3g.40gb"),
        device("n1", "gpu-0-mig-b", "card-0", "mig", "3g.40gb"),
        device("n2", "gpu-1", "card-1", "gpu"),
        device("n2", "gpu-2", "card-2", "gpu"),
        device("n3", "gpu-3", "card-3", "gpu"),
        device("n3", "gpu-3-mig-x", "card-3", "mig", "1g.10gb"),
        device("n4", "gpu-4-mig-dyn", "card-4", "mig", "2g.20gb", dynamic=1),
    ]
    claims = [claim("n1", "gpu-0-mig-a", T), claim("n2", "gpu-2", T - timedelta(hours=2)),
              claim("n3", "gpu-3-mig-x", T)]
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        wh.load(LoadBatch({"dra_devices": pl.DataFrame(devices, schema=polars_schema(DRA_DEVICES)),
                           "dra_claims": pl.DataFrame(claims, schema=polars_schema(DRA_CLAIMS))}))
        rows = {(n, s): f for n, _m, s, f in dra_free(wh).iter_rows()}
    assert rows == {("n1", "dra mig-3g.40gb"): 1, ("n2", "dra gpu"): 2}
