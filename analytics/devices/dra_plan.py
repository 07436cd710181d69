"""Planning on the DRA plane: fragmentation of cards whose MIG devices the driver creates on
demand, and the DeviceClass / claim-template profiles to offer instead of layouts.

Why not a layout: on a DRA node with dynamic MIG nobody writes `nvidia.com/mig.config` (the
plane guard, docs/decisions/0087); the driver places each claim's MIG device on the card's free
memory slices when the claim is prepared. What an operator can change is which profiles claims
ask for. So the MIG optimizer leaves these nodes out (`dra_plane_nodes`) and this module reports:

1. Fragmentation per dynamic card at a moment: the memory slices the live claims occupy (from
   their placements), the free slices, the largest profile the free slices could hold by count,
   and the largest one that can actually be created at an allowed start (the MIG placement
   rules of `core.mig`); a card is fragmented when the second is smaller than the first.
2. Profile recommendations: the profiles the window's MIG claims asked for, by
   claim-hours, the smallest set covering `coverage` of them, each as a DeviceClass whose CEL
   selector names the profile (the object a claim template then references).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import polars as pl

from gpuledger.analytics.devices.dra_rows import claim_rows
from gpuledger.core.mig import MEMORY_SLICES, GpuModel, gpu_model
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.queries import dra as queries

DRIVER = "gpu.nvidia.com"


def dra_plane_nodes(wh: Warehouse) -> set[str]:
    """Nodes the collector recorded on the DRA plane (the MIG optimizer never plans them)."""
    return queries.dra_plane_nodes(wh)


def _creatable(model: GpuModel, free: set[int]) -> str | None:
    """The largest profile (by memory, then compute) with an allowed start on free slices."""
    fits = [p for p in model.profiles.values() if not p.media_extensions
            and any(set(range(s, s + p.memory)) <= free for s in p.starts)]
    return max(fits, key=lambda p: (p.memory, p.compute)).name if fits else None


def _by_count(model: GpuModel, free: int) -> str | None:
    fits = [p for p in model.profiles.values() if not p.media_extensions and p.memory <= free]
    return max(fits, key=lambda p: (p.memory, p.compute)).name if fits else None


def fragmentation(wh: Warehouse, at: datetime) -> pl.DataFrame:
    """Step 1 for every dynamic-MIG card at `at`: `uuid`, `node`, `model`, `free_slices`,
    `largest_by_count`, `largest_creatable`, `fragmented`."""
    cards = queries.dynamic_mig_cards(wh)
    live = queries.mig_claim_placements(wh, at).select("uuid", "profile", "placement")
    rows: list[dict[str, Any]] = []
    for uuid, node, model_name in cards.iter_rows():
        model = gpu_model(model_name)
        used: set[int] = set()
        for _, profile, start in live.filter(pl.col("uuid") == uuid).iter_rows():
            used |= set(range(start, start + model.profiles[profile].memory))
        free = set(range(MEMORY_SLICES)) - used
        by_count, creatable = _by_count(model, len(free)), _creatable(model, free)
        size = {p.name: p.memory for p in model.profiles.values()}
        rows.append({
            "uuid": uuid, "node": node, "model": model_name, "free_slices": len(free),
            "largest_by_count": by_count, "largest_creatable": creatable,
            "fragmented": by_count is not None and size.get(creatable or "", 0) < size[by_count],
        })
    schema = {"uuid": pl.String, "node": pl.String, "model": pl.String, "free_slices": pl.Int64,
              "largest_by_count": pl.String, "largest_creatable": pl.String, "fragmented": pl.Boolean}
    return pl.DataFrame(rows, schema=schema)


def profile_recommendations(wh: Warehouse, window: Window, coverage: float = 0.9) -> list[dict[str, Any]]:
    """Step 2: `profile`, `claim_hours`, `claims`, `share` (of all MIG claim-hours) and the
    `device_class` object to offer."""
    rows = claim_rows(wh, window).filter(pl.col("dra_share_basis") == "mig")
    if rows.is_empty():
        return []
    used = (rows.group_by("profile").agg(pl.col("held_hours").sum().alias("claim_hours"),
                                          pl.col("vgpu").n_unique().alias("claims"))
            .sort(["claim_hours", "profile"], descending=[True, False]))
    total, covered, out = float(used["claim_hours"].sum()), 0.0, []
    for profile, hours, claims in used.iter_rows():
        if covered >= coverage * total:
            break
        covered += hours
        name = f"mig-{profile.replace('.', '-')}.{DRIVER}"
        out.append({"profile": profile, "claim_hours": hours, "claims": claims,
                    "share": hours / total if total else 0.0, "device_class": {
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression":
                f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].profile == '{profile}'"}}]},
        }})
    return out
