"""Claims rebuilt from Prometheus history: when each held its device, where no API listing says.

Why at read time: the evidence arrives chunk by chunk and out of order (a pod's reservation
hours before the first series that names its device), so the held spans are assembled from
everything stored, the same way whatever order it was collected in (docs/decisions/0163).

The stored evidence (`collectors.dra_prometheus`), per claim rebuilt from Prometheus (UID
`prometheus:<namespace>/<name>`):
- `dra_claims` rows of source `prometheus`: spans a device was seen allocated to the claim
  (dcgm-exporter's `dra_*` series, kube-state-metrics' allocation series);
- `dra_reservations` of its UID: spans a pod reserved it (kube-state-metrics'
  `reserved_for`, a pod's claim reference once the pod was scheduled, a pod on its series);
- `dra_pod_claims`: spans a pod referenced it by name (kube-state-metrics 2.20+).

1. Per device of the claim, the held spans grow from the spans the device was seen allocated:
   a reservation that overlaps or touches them joins them (a pod reserving the claim holds it
   from its scheduling to its end, telemetry or not: an exporter down, a pod pending on its
   prepared claim, a MIG device created after its claim), and a pod reference holds it from
   the first moment the device was seen inside it to its end (the pod existed throughout);
   repeated until nothing joins. A reservation or reference that never meets the device's
   evidence says nothing about which device: not billed.
2. Where the API listed a claim on the same device (`dra_claims` of source `api`), the API's
   spans win: the rebuilt spans keep only the time outside them.
3. The pods of a rebuilt claim are its reservations, else its pod references.

`changed_span` tells the collect pipeline which hours newly loaded DRA rows change, so the hours
already rolled up are rolled up again (docs/decisions/0165).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import polars as pl

from gpuledger.core.dra_names import device_name, profile_from_name
from gpuledger.core.frames_dra import API_SOURCE, PROMETHEUS_SOURCE, PROMETHEUS_UID_PREFIX
from gpuledger.core.window import Window, as_utc
from gpuledger.warehouse.protocols import ReadableWarehouse
from gpuledger.warehouse.queries import dra as queries

Span = tuple[datetime, datetime]
CLAIM_COLUMNS: dict[str, pl.DataType | type[pl.DataType]] = {
    "claim_uid": pl.String, "namespace": pl.String, "claim": pl.String, "device_class": pl.String,
    "sharing": pl.String, "start_ts": pl.Datetime("us", "UTC"), "end_ts": pl.Datetime("us", "UTC"),
    "uuid": pl.String, "kind": pl.String, "profile": pl.String, "placement": pl.Int32,
    "source": pl.String,
}
"""One allocated device of one claim over one held span (what `dra_rows` cuts into hours)."""


def merged(spans: Iterable[Span]) -> list[Span]:
    """`spans` as disjoint spans in time order, overlapping or touching ones joined."""
    out: list[Span] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def minus(spans: list[Span], cut: list[Span]) -> list[Span]:
    """`spans` less the time of `cut` (both disjoint and in order)."""
    out: list[Span] = []
    for start, end in spans:
        pieces = [(start, end)]
        for lo, hi in cut:
            pieces = [p for s, e in pieces for p in ((s, min(e, lo)), (max(s, hi), e)) if p[0] < p[1]]
        out.extend(pieces)
    return out


def held_spans(seen: list[Span], reserved: list[Span], referenced: list[Span]) -> list[Span]:
    """Step 1 for one device: the spans `seen` grown by the reservations that meet them and by
    the pod references that contain a moment of them, until nothing joins."""
    held = merged(seen)
    while True:
        grown = list(held)
        for start, end in reserved:
            if any(start <= e and end >= s for s, e in held):
                grown.append((start, end))
        for start, end in referenced:
            inside = [max(s, start) for s, e in held if s < end and e > start]
            if inside:
                grown.append((min(inside), end))
        grown = merged(grown)
        if grown == held:
            return held
        held = grown


class DeviceCards:
    """Where each device lies: its `dra_devices` row, else (a device only kube-state-metrics'
    allocation series names) the card another device of the same driver and pool with the same
    `gpu-<N>` prefix lies on, its profile and placement from its own name (`core.dra_names`)."""

    def __init__(self, devices: pl.DataFrame) -> None:
        self.rows = {(r["driver"], r["pool"], r["device"]): r for r in devices.iter_rows(named=True)}
        self.cards: dict[tuple[str, str, int], str] = {}
        for (driver, pool, device), row in self.rows.items():
            card = device_name(device).card
            if card is not None:
                self.cards.setdefault((driver, pool, card), row["uuid"])

    def find(self, driver: str, pool: str, device: str) -> dict[str, Any] | None:
        if (driver, pool, device) in self.rows:
            return self.rows[(driver, pool, device)]
        name = device_name(device)
        uuid = self.cards.get((driver, pool, name.card)) if name.card is not None else None
        if uuid is None:
            return None
        return {"uuid": uuid, "kind": "mig" if name.mig else "gpu", "profile": profile_from_name(device),
                "placement": name.placement if name.mig and name.placement is not None else -1}


def _spans(frame: pl.DataFrame, key: str) -> dict[Any, list[Span]]:
    found: dict[Any, list[Span]] = defaultdict(list)
    for k, start, end in frame.select(key, "start_ts", "end_ts").iter_rows():
        found[k].append((as_utc(start), as_utc(end)))
    return found


RESERVATION_COLUMNS: dict[str, pl.DataType | type[pl.DataType]] = {
    "claim_uid": pl.String, "pod": pl.String, "start_ts": pl.Datetime("us", "UTC"),
    "end_ts": pl.Datetime("us", "UTC")}
"""Who reserved a claim when, as the bill reads it."""


def rebuilt_claims(wh: ReadableWarehouse, window: Window) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Steps 1-3 for the claims rebuilt from Prometheus history in `window`: (claim rows, as
    `CLAIM_COLUMNS`, each clipped to the window; their pods: `claim_uid`, `pod`, `start_ts`,
    `end_ts`)."""
    empty = pl.DataFrame(schema=CLAIM_COLUMNS)
    no_pods = pl.DataFrame(schema=RESERVATION_COLUMNS)
    evidence = queries.prometheus_evidence(wh, window.start, window.end, PROMETHEUS_UID_PREFIX)
    if evidence.is_empty():
        return empty, no_pods
    uids = evidence["claim_uid"].unique().to_list()
    reservations = queries.reservations_of(wh, uids)
    lo = as_utc(evidence["start_ts"].min())  # type: ignore[arg-type]
    hi = as_utc(evidence["end_ts"].max())  # type: ignore[arg-type]
    refs = queries.pod_references(wh, min(lo, window.start), max(hi, window.end)).with_columns(
        pl.concat_str(pl.lit(PROMETHEUS_UID_PREFIX), "namespace", pl.lit("/"), "claim").alias("claim_uid"))
    refs = refs.filter(pl.col("claim_uid").is_in(uids))
    reserved, referenced = _spans(reservations, "claim_uid"), _spans(refs, "claim_uid")
    api = _spans(queries.api_device_spans(wh, window.start, window.end).with_columns(
        pl.concat_str("driver", "pool", "device", separator="/").alias("_d")), "_d")
    devices = DeviceCards(queries.devices(wh))
    rows: list[dict[str, Any]] = []
    by_device = evidence.group_by("claim_uid", "namespace", "claim", "driver", "pool", "device",
                                  maintain_order=True).agg(pl.col("start_ts"), pl.col("end_ts"))
    for r in by_device.iter_rows(named=True):
        device = devices.find(r["driver"], r["pool"], r["device"])
        if device is None:
            continue  # no series ever placed this device on a card: `unplaced_claims` names it
        seen = [(as_utc(s), as_utc(e)) for s, e in zip(r["start_ts"], r["end_ts"], strict=True)]
        held = held_spans(seen, reserved.get(r["claim_uid"], []), referenced.get(r["claim_uid"], []))
        held = minus(held, merged(api.get(f"{r['driver']}/{r['pool']}/{r['device']}", [])))
        for held_from, held_to in held:
            start, end = max(held_from, window.start), min(held_to, window.end)
            if start < end:
                rows.append({
                    "claim_uid": r["claim_uid"], "namespace": r["namespace"], "claim": r["claim"],
                    "device_class": None, "sharing": "unknown", "start_ts": start, "end_ts": end,
                    "uuid": device["uuid"], "kind": device["kind"], "profile": device["profile"],
                    "placement": device["placement"], "source": PROMETHEUS_SOURCE,
                })
    pods = reservations.select("claim_uid", "pod", "start_ts", "end_ts")
    with_reservations = set(pods["claim_uid"].to_list())
    pods = pl.concat([pods, refs.filter(~pl.col("claim_uid").is_in(list(with_reservations)))
                      .select("claim_uid", "pod", "start_ts", "end_ts")], how="vertical_relaxed")
    return pl.DataFrame(rows, schema=CLAIM_COLUMNS), pods


def claimed_devices(wh: ReadableWarehouse, window: Window) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Every allocated device of every claim held in `window` (`CLAIM_COLUMNS`): the API's
    claims and those rebuilt from Prometheus history; and who reserved each (`claim_uid`,
    `pod`, `start_ts`, `end_ts`)."""
    if not queries.holds_claims(wh):
        return pl.DataFrame(schema=CLAIM_COLUMNS), pl.DataFrame(schema=RESERVATION_COLUMNS)
    listed = queries.claimed_devices(wh, window.start, window.end).with_columns(
        pl.lit(API_SOURCE).alias("source"))
    pods = queries.claim_reservations(wh, window.start, window.end)
    rebuilt, rebuilt_pods = rebuilt_claims(wh, window)
    claims = pl.concat([listed.select(list(CLAIM_COLUMNS)).cast(CLAIM_COLUMNS),  # type: ignore[arg-type]
                        rebuilt], how="vertical")
    return claims, pl.concat([pods.cast(rebuilt_pods.schema), rebuilt_pods], how="vertical")


def unplaced_claims(wh: ReadableWarehouse, window: Window) -> list[str]:
    """Each claim Prometheus history shows held in `window` that cannot be placed on a card:
    `namespace/name (driver/pool/device)` where no series placed its device, `namespace/name
    (reserved by <pod>, device never seen)` where only its pods' reservations show it."""
    if not queries.holds_claims(wh):
        return []
    evidence = queries.prometheus_evidence(wh, window.start, window.end, PROMETHEUS_UID_PREFIX)
    cards = DeviceCards(queries.devices(wh)) if evidence.height else None
    lost = {f"{r['namespace']}/{r['claim']} ({r['driver']}/{r['pool']}/{r['device']})"
            for r in evidence.iter_rows(named=True)
            if cards is not None and cards.find(r["driver"], r["pool"], r["device"]) is None}
    unseen = queries.reserved_unseen(wh, window.start, window.end, PROMETHEUS_UID_PREFIX)
    lost |= {f"{uid[len(PROMETHEUS_UID_PREFIX):]} (reserved by {pod}, device never seen)"
             for uid, pod in unseen.iter_rows()}
    return sorted(lost)


def api_devices_only(wh: ReadableWarehouse, frames: Mapping[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
    """`frames` without the rebuilt `dra_devices` rows of devices a ResourceSlice listed: the
    API's row (with its memory, dynamic flag and UUID) is never replaced by a poorer one."""
    out = dict(frames)
    devices = out.get("dra_devices")
    if devices is None or devices.is_empty() or "source" not in devices.columns:
        return out
    rebuilt = devices.filter(pl.col("source") == PROMETHEUS_SOURCE)
    if rebuilt.is_empty():
        return out
    listed = queries.api_device_keys(wh)
    kept = rebuilt.join(listed, on=["driver", "pool", "device"], how="anti")
    out["dra_devices"] = pl.concat([devices.filter(pl.col("source").ne_missing(PROMETHEUS_SOURCE)), kept])
    return out


CLAIM_KEY = ("claim_uid", "request", "driver", "pool", "device")
RESERVATION_KEY = ("claim_uid", "namespace", "pod")
REFERENCE_KEY = ("namespace", "pod", "claim")


def claims_seen_since(wh: ReadableWarehouse, claims: pl.DataFrame, since: datetime) -> set[tuple[Any, ...]]:
    """The keys of `claims` (`dra_claims` rows of a new list) whose stored span reaches the
    previous list at `since`: the claims that list saw allocated (`collectors.dra.continue_claims`)."""
    if claims.is_empty():
        return set()
    stored = queries.stored_spans(wh, "dra_claims", list(CLAIM_KEY), claims["claim_uid"].unique().to_list())
    return {tuple(r[:-2]) for r in stored.iter_rows() if as_utc(r[-1]) >= since}


def _uncovered(new: pl.DataFrame, stored: pl.DataFrame,
               keys: tuple[str, ...]) -> dict[tuple[Any, ...], list[Span]]:
    """Per key, the parts of the new spans no stored span of that key covers."""
    old: dict[tuple[Any, ...], list[Span]] = defaultdict(list)
    for r in stored.select(*keys, "start_ts", "end_ts").iter_rows():
        old[tuple(r[:-2])].append((as_utc(r[-2]), as_utc(r[-1])))
    out: dict[tuple[Any, ...], list[Span]] = defaultdict(list)
    for r in new.select(*keys, "start_ts", "end_ts").iter_rows():
        key = tuple(r[:-2])
        out[key].extend(minus([(as_utc(r[-2]), as_utc(r[-1]))], merged(old.get(key, []))))
    return out


def changed_span(wh: ReadableWarehouse, frames: Mapping[str, pl.DataFrame]) -> Window | None:
    """The time the DRA rows of `frames` would change once loaded, from the first moment to the
    last (None: nothing): the parts of their spans no stored span of the same key covers, a
    rebuilt claim's new evidence back to the first reservation or reference it joins (step 1),
    and every claim on a device whose card or placement is new."""
    changed: list[Span] = []
    claims = frames.get("dra_claims", pl.DataFrame())
    uids = claims["claim_uid"].unique().to_list() if claims.height else []
    reservations = frames.get("dra_reservations", pl.DataFrame())
    uids += reservations["claim_uid"].unique().to_list() if reservations.height else []
    if claims.height:
        stored = queries.stored_spans(wh, "dra_claims", list(CLAIM_KEY), uids)
        ends = {(*r[:-2], as_utc(r[-1])) for r in stored.select(*CLAIM_KEY, "start_ts", "end_ts").iter_rows()}
        for key, spans in _uncovered(claims, stored, CLAIM_KEY).items():
            changed.extend(spans)
            # Evidence that only continues a stored span joins nothing new; a fresh one may
            # make the claim held back to the start of a reservation or reference it meets.
            fresh = [s for s, _ in spans if (*key, s) not in ends]
            if fresh and str(key[0]).startswith(PROMETHEUS_UID_PREFIX):
                changed.extend(_joined(wh, str(key[0]), frames, min(fresh)))
    if reservations.height:
        stored = queries.stored_spans(wh, "dra_reservations", list(RESERVATION_KEY), uids)
        grown = _uncovered(reservations, stored, RESERVATION_KEY)
        changed.extend(s for spans in grown.values() for s in spans)
    refs = frames.get("dra_pod_claims", pl.DataFrame())
    if refs.height:
        names = refs.select(pl.concat_str("namespace", "claim", separator="/")).to_series().unique().to_list()
        stored = queries.stored_references(wh, names)
        changed.extend(s for spans in _uncovered(refs, stored, REFERENCE_KEY).values() for s in spans)
    changed.extend(_moved_devices(wh, frames.get("dra_devices", pl.DataFrame()), claims))
    if not changed:
        return None
    return Window(min(s for s, _ in changed), max(e for _, e in changed))


def _joined(wh: ReadableWarehouse, uid: str, frames: Mapping[str, pl.DataFrame], at: datetime) -> list[Span]:
    """The reservations and references of the rebuilt claim `uid` that end at or after `at`
    (new evidence at `at` can make them held back to their start)."""
    namespace, _, claim = uid[len(PROMETHEUS_UID_PREFIX):].partition("/")
    found = [*queries.reservations_of(wh, [uid]).select("start_ts", "end_ts").iter_rows(),
             *queries.stored_references(wh, [f"{namespace}/{claim}"]).select(
                 "start_ts", "end_ts").iter_rows()]
    for name, match in (("dra_reservations", pl.col("claim_uid") == uid),
                        ("dra_pod_claims", (pl.col("namespace") == namespace) & (pl.col("claim") == claim))):
        frame = frames.get(name)
        if frame is not None and frame.height:
            found.extend(frame.filter(match).select("start_ts", "end_ts").iter_rows())
    return [(as_utc(s), as_utc(e)) for s, e in found if as_utc(e) >= at]


def _moved_devices(wh: ReadableWarehouse, devices: pl.DataFrame, claims: pl.DataFrame) -> list[Span]:
    """The spans of every claim (stored or new) on a device new to the warehouse or placed anew."""
    if devices.is_empty():
        return []
    stored = queries.devices(wh)
    facts = ["uuid", "kind", "profile", "placement"]
    new = devices.select("driver", "pool", "device", pl.col("parent_uuid").alias("uuid"), "kind", "profile",
                         pl.col("placement").fill_null(-1))
    where = ["driver", "pool", "device"]
    moved = new.join(stored.select(*where, *facts), on=[*where, *facts],
                     how="anti", nulls_equal=True)
    if moved.is_empty():
        return []
    names = moved.select(pl.concat_str("driver", "pool", "device", separator="/")).to_series().to_list()
    spans = [*queries.claim_spans_on(wh, names).iter_rows()]
    if claims.height:
        spans += claims.filter(pl.concat_str("driver", "pool", "device", separator="/").is_in(names)).select(
            "start_ts", "end_ts").iter_rows()
    return [(as_utc(s), as_utc(e)) for s, e in spans]
