"""Read queries of the DRA plane: claims and the devices they hold, who reserved them, the cards
whose MIG devices the driver creates on demand, and the nodes on the plane.

Why here: only `warehouse/` speaks SQL. `analytics.devices.dra_rows` (claims as held rows),
`analytics.devices.dra_history` (claims rebuilt from Prometheus history), `analytics.devices.dra_plan`
(fragmentation, profiles to offer) and `analytics.advice.dra_kinds`
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

API = "coalesce(source, 'api') = 'api'"
"""The rows the Kubernetes API gave (`source` NULL: stored before v012, only the API wrote)."""
C_API = "coalesce(c.source, 'api') = 'api'"
"""`API` of the `dra_claims` table aliased `c`."""
PROMETHEUS = "source = 'prometheus'"


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
    """Claims the API listed holding a MIG device (every one, or those live at `at`:
    `start_ts <= at < end_ts`): `uuid` (the parent card), `profile`, `placement` (memory-slice
    start), `start_ts`, `end_ts`."""
    live, params = ("AND c.start_ts <= ? AND c.end_ts > ?", [at, at]) if at is not None else ("", [])
    return wh.query(
        "SELECT d.parent_uuid AS uuid, d.profile, d.placement, c.start_ts, c.end_ts FROM dra_claims c "
        f"JOIN dra_devices d USING (driver, pool, device) WHERE d.kind = 'mig' AND {C_API} {live}", params,
    )


def claim_change_moments(wh: ReadableWarehouse, start: datetime, end: datetime) -> list[datetime]:
    """Every distinct claim start or end strictly inside `(start, end)`, in time order: where a
    card's claimed slices can change."""
    found = wh.query(
        f"SELECT DISTINCT t FROM (SELECT start_ts AS t FROM dra_claims WHERE {API} "
        f"UNION SELECT end_ts FROM dra_claims WHERE {API}) WHERE t > ? AND t < ? ORDER BY t", [start, end])
    return list(found["t"].to_list())


def holds_claims(wh: ReadableWarehouse) -> bool:
    """Whether any claim or reservation is stored at all: a fleet without DRA skips the claim
    assembly (and a file from before v012, which lacks `source`, is never asked for it)."""
    found = wh.query("SELECT EXISTS (SELECT 1 FROM dra_claims) "
                     "OR EXISTS (SELECT 1 FROM dra_reservations) AS x")
    return bool(found["x"][0])


def claimed_devices(wh: ReadableWarehouse, start: datetime, end: datetime) -> pl.DataFrame:
    """Each allocated device of each claim the API listed in `[start, end)`: `claim_uid`,
    `namespace`, `claim`, `device_class`, `sharing`, `start_ts`, `end_ts` (the claim's), `uuid`
    (the parent card), `kind` (`gpu` or `mig`), `profile`, `placement` (-1 for a whole GPU),
    `driver`, `pool`, `device`."""
    return wh.query(
        f"""
SELECT c.claim_uid, c.namespace, c.claim, c.device_class, c.sharing, c.start_ts, c.end_ts,
       d.parent_uuid AS uuid, d.kind, d.profile, coalesce(d.placement, -1) AS placement,
       c.driver, c.pool, c.device
FROM dra_claims c JOIN dra_devices d USING (driver, pool, device)
WHERE {C_API} AND c.end_ts > ? AND c.start_ts < ?
""",
        [start, end],
    )


_RESERVATIONS_SQL = f"""
SELECT claim_uid, pod, start_ts, end_ts FROM dra_reservations
WHERE claim_uid IN (SELECT claim_uid FROM dra_claims WHERE {API}) AND end_ts > ? AND start_ts < ?
UNION ALL
SELECT c.claim_uid, p.pod, greatest(p.start_ts, c.start_ts), least(p.end_ts, c.end_ts)
FROM dra_pod_claims p
JOIN (SELECT claim_uid, namespace, claim, min(start_ts) AS start_ts, max(end_ts) AS end_ts
      FROM dra_claims WHERE {API} GROUP BY ALL) c
  ON p.namespace = c.namespace AND p.claim = c.claim AND p.start_ts < c.end_ts AND p.end_ts > c.start_ts
WHERE c.claim_uid NOT IN (SELECT claim_uid FROM dra_reservations) AND p.end_ts > ? AND p.start_ts < ?
"""


def claim_reservations(wh: ReadableWarehouse, start: datetime, end: datetime) -> pl.DataFrame:
    """Who reserved each claim the API listed in `[start, end)`: `claim_uid`, `pod`,
    `start_ts`, `end_ts`.

    The API's `status.reservedFor` (`dra_reservations`) where it was collected, else the pods
    kube-state-metrics saw referencing the claim by name (`dra_pod_claims`), each within the
    claim's own span (a claim name reused later by another claim UID joins only its own span).
    """
    return wh.query(_RESERVATIONS_SQL, [start, end] * 2)


_PROMETHEUS_UIDS = f"""
SELECT claim_uid FROM dra_claims WHERE {PROMETHEUS} AND end_ts > $start AND start_ts < $end
UNION SELECT claim_uid FROM dra_reservations
  WHERE starts_with(claim_uid, $prefix) AND end_ts > $start AND start_ts < $end
UNION SELECT $prefix || namespace || '/' || claim FROM dra_pod_claims
  WHERE end_ts > $start AND start_ts < $end
"""


def prometheus_evidence(wh: ReadableWarehouse, start: datetime, end: datetime, prefix: str) -> pl.DataFrame:
    """Every span Prometheus history shows a claim allocated (`dra_claims` rows of source
    `prometheus`, all of their time) of the claims with any evidence, reservation or pod
    reference in `[start, end)`: `claim_uid`, `namespace`, `claim`, `driver`, `pool`, `device`,
    `start_ts`, `end_ts`. `prefix` is the rebuilt claims' UID prefix."""
    return wh.query(
        f"SELECT claim_uid, namespace, claim, driver, pool, device, start_ts, end_ts FROM dra_claims "
        f"WHERE {PROMETHEUS} AND claim_uid IN ({_PROMETHEUS_UIDS}) ORDER BY claim_uid, start_ts",
        {"start": start, "end": end, "prefix": prefix},
    )


def reserved_unseen(wh: ReadableWarehouse, start: datetime, end: datetime, prefix: str) -> pl.DataFrame:
    """`claim_uid`, `pod` of the reservations in `[start, end)` of claims rebuilt from Prometheus
    history (`prefix`) that no series ever showed on a device, nor the API listed."""
    return wh.query(
        f"SELECT DISTINCT r.claim_uid, r.pod FROM dra_reservations r "
        f"WHERE starts_with(r.claim_uid, $prefix) AND r.end_ts > $start AND r.start_ts < $end "
        f"AND r.claim_uid NOT IN (SELECT claim_uid FROM dra_claims) "
        f"AND r.claim_uid NOT IN (SELECT $prefix || namespace || '/' || claim FROM dra_claims "
        f"WHERE {API} AND end_ts > $start AND start_ts < $end)",
        {"start": start, "end": end, "prefix": prefix},
    )


def reservations_of(wh: ReadableWarehouse, uids: list[str]) -> pl.DataFrame:
    """`claim_uid`, `pod`, `start_ts`, `end_ts` of every reservation of the claims `uids`."""
    return wh.query("SELECT claim_uid, pod, start_ts, end_ts FROM dra_reservations "
                    "WHERE list_contains($uids, claim_uid)", {"uids": uids})


def pod_references(wh: ReadableWarehouse, start: datetime, end: datetime) -> pl.DataFrame:
    """`namespace`, `claim`, `pod`, `start_ts`, `end_ts` of the pods' claim references
    (`dra_pod_claims`) overlapping `[start, end)`."""
    return wh.query("SELECT namespace, claim, pod, start_ts, end_ts FROM dra_pod_claims "
                    "WHERE end_ts > ? AND start_ts < ?", [start, end])


def devices(wh: ReadableWarehouse) -> pl.DataFrame:
    """Every device: `driver`, `pool`, `device`, `uuid` (the parent card), `kind`, `profile`,
    `placement` (-1 where unknown), `source`."""
    return wh.query("SELECT driver, pool, device, parent_uuid AS uuid, kind, profile, "
                    "coalesce(placement, -1) AS placement, coalesce(source, 'api') AS source "
                    "FROM dra_devices")


def api_device_spans(wh: ReadableWarehouse, start: datetime, end: datetime) -> pl.DataFrame:
    """`driver`, `pool`, `device`, `start_ts`, `end_ts`: when the API's claims held each device
    in `[start, end)`."""
    return wh.query(f"SELECT driver, pool, device, start_ts, end_ts FROM dra_claims "
                    f"WHERE {API} AND end_ts > ? AND start_ts < ?", [start, end])


def api_device_keys(wh: ReadableWarehouse) -> pl.DataFrame:
    """`driver`, `pool`, `device` of the devices a ResourceSlice listed (the API's rows)."""
    return wh.query(f"SELECT driver, pool, device FROM dra_devices WHERE {API}")


def stored_spans(wh: ReadableWarehouse, table: str, keys: list[str], uids: list[str]) -> pl.DataFrame:
    """The stored spans (`keys`, `start_ts`, `end_ts`) of `table` (`dra_claims` or
    `dra_reservations`) for the claim UIDs `uids`."""
    if table not in ("dra_claims", "dra_reservations"):
        raise ValueError(table)
    cols = ", ".join(keys)
    return wh.query(f"SELECT {cols}, start_ts, end_ts FROM {table} WHERE list_contains($uids, claim_uid)",
                    {"uids": uids})


def stored_references(wh: ReadableWarehouse, claims: list[str]) -> pl.DataFrame:
    """The stored pod references (`namespace`, `pod`, `claim`, `start_ts`, `end_ts`) of the
    claims `claims` (`namespace/name` each)."""
    return wh.query("SELECT namespace, pod, claim, start_ts, end_ts FROM dra_pod_claims "
                    "WHERE list_contains($claims, namespace || '/' || claim)", {"claims": claims})


def claim_spans_on(wh: ReadableWarehouse, devices: list[str]) -> pl.DataFrame:
    """`start_ts`, `end_ts` of the stored claims on `devices` (`driver/pool/device` each)."""
    return wh.query("SELECT start_ts, end_ts FROM dra_claims "
                    "WHERE list_contains($devices, driver || '/' || pool || '/' || device)",
                    {"devices": devices})


def claim_names(wh: ReadableWarehouse) -> pl.DataFrame:
    """One row per claim UID: `vgpu` (the UID, as claim rows key it), `claim`
    (`namespace/name`), `device_class`."""
    return wh.query(
        "SELECT claim_uid AS vgpu, namespace || '/' || claim AS claim, "
        "any_value(device_class) AS device_class FROM dra_claims GROUP BY ALL"
    )
