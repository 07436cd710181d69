"""Dynamic Resource Allocation from the Kubernetes API (read-only): ResourceSlices, DeviceClasses,
ResourceClaims (those generated from ResourceClaimTemplates included) and the pods that use them.

The lists are `collectors.kubernetes.KubernetesCollector.dra_objects` (paginated, a full relist
when the continue token expires, like the other lists); this module turns a snapshot of the
objects, or a recorded history of snapshots, into frames (the parsing is `collectors.dra_objects`).

Frames: `dra_devices`, `dra_claims`, `dra_reservations`, `node_planes`, and `gpus` rows for the
cards the slices publish (sharing mode `dra`). A cluster without resource.k8s.io/v1 (older than
1.34, or the API switched off) gives empty frames, not an error: DRA is simply not in use there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import polars as pl

from gpuledger.collectors import dra_objects as objs
from gpuledger.core.frames import GPUS, TABLES, polars_schema
from gpuledger.core.frames_dra import DRA_CLAIMS, DRA_DEVICES, DRA_RESERVATIONS, NODE_PLANES

Obj = Mapping[str, Any]


@dataclass
class DraObjects:
    """One snapshot of the DRA objects (and the nodes and pods they concern), as API JSON."""

    slices: Sequence[Obj] = field(default_factory=list)
    claims: Sequence[Obj] = field(default_factory=list)
    device_classes: Sequence[Obj] = field(default_factory=list)
    pods: Sequence[Obj] = field(default_factory=list)
    nodes: Sequence[Obj] = field(default_factory=list)


_SPECS = {t.name: t for t in (DRA_DEVICES, DRA_CLAIMS, DRA_RESERVATIONS, NODE_PLANES, GPUS)}


def _rows(snapshot: DraObjects, at: datetime, since: datetime | None) -> dict[str, list[dict[str, Any]]]:
    devices = objs.device_rows(snapshot.slices, at)
    templates, users = objs.pod_claims(snapshot.pods)
    return {
        "dra_devices": devices,
        "dra_claims": objs.claim_rows(snapshot.claims, templates, at, users, since),
        "dra_reservations": objs.reservation_rows(snapshot.claims, users, at, since),
        "node_planes": objs.plane_rows(snapshot.nodes, devices, at),
        "gpus": objs.card_rows(snapshot.slices, at),
    }


def frames_from_objects(snapshot: DraObjects, at: datetime,
                        since: datetime | None = None) -> dict[str, pl.DataFrame]:
    """The DRA frames of one snapshot taken at `at` (see the module docstring); `since`: the
    previous snapshot's time, where a claim whose allocation nothing dates starts
    (`dra_objects.allocated_at`)."""
    return {name: pl.DataFrame(rows, schema=polars_schema(_SPECS[name]))
            for name, rows in _rows(snapshot, at, since).items()}


def frames_from_history(snapshots: Iterable[tuple[datetime, DraObjects]]) -> dict[str, pl.DataFrame]:
    """Frames of several snapshots in time order; the warehouse's interval load stitches each
    claim's spans into one (a claim released between two snapshots ends at its deletion time
    when a snapshot saw it being deleted, else at the last snapshot that saw it). A claim whose
    allocation nothing dates starts at the snapshot before the one that first saw it, and one
    seen by consecutive snapshots is held between them, whatever dates each gives."""
    parts: dict[str, list[dict[str, Any]]] = {name: [] for name in _SPECS}
    since: datetime | None = None
    seen: set[tuple[Any, ...]] = set()
    for at, snapshot in snapshots:
        rows = _rows(snapshot, at, since)
        if since is not None:
            rows["dra_claims"] = continue_claims(rows["dra_claims"], seen, since)
        seen = {claim_key(r) for r in rows["dra_claims"]}
        for name, found in rows.items():
            parts[name].extend(found)
        since = at
    return {name: _one_row_per_key(name, pl.DataFrame(rows, schema=polars_schema(_SPECS[name])))
            for name, rows in parts.items()}


def claim_key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """A `dra_claims` row's key (one allocated device of one claim)."""
    return tuple(row[k] for k in DRA_CLAIMS.key)


def continue_claims(rows: list[dict[str, Any]], seen: set[tuple[Any, ...]],
                    since: datetime) -> list[dict[str, Any]]:
    """`rows` of a snapshot with each claim the previous snapshot (at `since`) also saw
    allocated (`seen`: their keys) held since then: one claim (its UID) on one device at two
    lists is one allocation, whatever start each list's evidence gives (docs/decisions/0164).
    Used for a recorded history and for a live list against the stored spans."""
    return [{**r, "start_ts": min(r["start_ts"], since)} if claim_key(r) in seen else r for r in rows]


def _one_row_per_key(name: str, frame: pl.DataFrame) -> pl.DataFrame:
    """A dimension table's rows of several snapshots as one row per key, combined the way its
    load would combine them (first seen earliest, last seen latest, other facts the newest)."""
    spec = TABLES[name]
    if spec.kind != "dimension" or frame.is_empty():
        return frame
    rules = {"earliest": pl.min, "latest": pl.max}
    aggs = [rules[c.merge](c.name) if c.merge in rules else pl.col(c.name).last()
            for c in spec.columns if c.name not in spec.key]
    return frame.group_by(list(spec.key), maintain_order=True).agg(aggs).select(frame.columns)
