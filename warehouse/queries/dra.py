"""Read queries of the DRA plane: claims and the devices they hold, who reserved them, the cards
whose MIG devices the driver creates on demand, and the nodes on the plane.

Why here: only `warehouse/` speaks SQL. `analytics.devices.dra_rows` (claims as held rows),
`analytics.devices.dra_plan` (fragmentation, profiles to offer) and `analytics.advice.dra_kinds`
(the two DRA advice kinds) hold the rules and read the tables `dra_claims`, `dra_devices`,
`dra_reservations`, `dra_pod_claims` and `node_planes` only through these. Windows are
half-open `[start, end)`: a claim is in one when `end_ts > start AND start_ts < end`.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

    from gpuledger.warehouse.protocols import ReadableWarehouse


def dra_plane_nodes(wh: ReadableWarehouse) -> set[str]:
    """Nodes the collector recorded on the DRA plane (`node_planes.plane = 'dra'`)."""
    return set(wh.query("SELECT node FROM node_planes WHERE plane = 'dra'")["node"].to_list())


def dynamic_mig_cards(wh: ReadableWarehouse) -> pl.DataFrame:
    """Cards with a dynamic (driver-created) MIG device, once each: `uuid` (the parent card),
    `node`, `model` (the device's, else the inventory card's)."""
    return wh.query(
        "SELECT DISTINCT d.parent_uuid AS uuid, d.node, coalesce(d.model, g.model) AS model "
        "FROM dra_devices d LEFT JOIN gpus g ON g.uuid = d.parent_uuid WHERE d.dynamic = 1"
    )


def mig_claim_placements(wh: ReadableWarehouse, at: datetime | None = None) -> pl.DataFrame:
    """Claims holding a MIG device (every one, or those live at `at`: `start_ts <= at < end_ts`):
    `uuid` (the parent card), `profile`, `placement` (memory-slice start), `start_ts`, `end_ts`."""
    live, params = ("AND c.start_ts <= ? AND c.end_ts > ?", [at, at]) if at is not None else ("", [])
    return wh.query(
        "SELECT d.parent_uuid AS uuid, d.profile, d.placement, c.start_ts, c.end_ts FROM dra_claims c "
        f"JOIN dra_devices d USING (driver, pool, device) WHERE d.kind = 'mig' {live}", params,
    )


def claim_change_moments(wh: ReadableWarehouse, start: datetime, end: datetime) -> list[datetime]:
    """Every distinct claim start or end strictly inside `(start, end)`, in time order: where a
    card's claimed slices can change."""
    found = wh.query(
        "SELECT DISTINCT t FROM (SELECT start_ts AS t FROM dra_claims UNION SELECT end_ts FROM dra_claims) "
        "WHERE t > ? AND t < ? ORDER BY t", [start, end])
    return list(found["t"].to_list())


def claimed_devices(wh: ReadableWarehouse, start: datetime, end: datetime) -> pl.DataFrame:
    """Each allocated device of each claim in `[start, end)`: `claim_uid`, `namespace`, `claim`,
    `device_class`, `sharing`, `start_ts`, `end_ts` (the claim's), `uuid` (the parent card),
    `kind` (`gpu` or `mig`), `profile`, `placement` (-1 for a whole GPU)."""
    return wh.query(
        """
SELECT c.claim_uid, c.namespace, c.claim, c.device_class, c.sharing, c.start_ts, c.end_ts,
       d.parent_uuid AS uuid, d.kind, d.profile, coalesce(d.placement, -1) AS placement
FROM dra_claims c JOIN dra_devices d USING (driver, pool, device)
WHERE c.end_ts > ? AND c.start_ts < ?
""",
        [start, end],
    )


_RESERVATIONS_SQL = """
SELECT claim_uid, pod, start_ts, end_ts FROM dra_reservations WHERE end_ts > ? AND start_ts < ?
UNION ALL
SELECT c.claim_uid, p.pod, greatest(p.start_ts, c.start_ts), least(p.end_ts, c.end_ts)
FROM dra_pod_claims p
JOIN (SELECT claim_uid, namespace, claim, min(start_ts) AS start_ts, max(end_ts) AS end_ts
      FROM dra_claims GROUP BY ALL) c
  ON p.namespace = c.namespace AND p.claim = c.claim AND p.start_ts < c.end_ts AND p.end_ts > c.start_ts
WHERE c.claim_uid NOT IN (SELECT claim_uid FROM dra_reservations) AND p.end_ts > ? AND p.start_ts < ?
"""


def claim_reservations(wh: ReadableWarehouse, start: datetime, end: datetime) -> pl.DataFrame:
    """Who reserved each claim in `[start, end)`: `claim_uid`, `pod`, `start_ts`, `end_ts`.

    The API's `status.reservedFor` (`dra_reservations`) where it was collected, else the pods
    kube-state-metrics saw referencing the claim by name (`dra_pod_claims`), each within the
    claim's own span (a claim name reused later by another claim UID joins only its own span).
    """
    return wh.query(_RESERVATIONS_SQL, [start, end] * 2)


def claim_names(wh: ReadableWarehouse) -> pl.DataFrame:
    """One row per claim UID: `vgpu` (the UID, as claim rows key it), `claim`
    (`namespace/name`), `device_class`."""
    return wh.query(
        "SELECT claim_uid AS vgpu, namespace || '/' || claim AS claim, "
        "any_value(device_class) AS device_class FROM dra_claims GROUP BY ALL"
    )
