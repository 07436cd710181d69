"""The DRA pool's series as an OpenMetrics file: dcgm-exporter with `KUBERNETES_ENABLE_DRA` and
kube-state-metrics, written the way those exporters write them (tests/fixtures/planes/dra).

Why apart from `simulator.openmetrics` (the device-plugin fleet's writer): the DRA pool is a
plan of claims, not a schedule of pods on cards, and its exporters' shapes are their own.
What each minute of each repetition (`simulator.dra.DraPool`) emits:

- dcgm-exporter, every card, unless the node's exporter is down (`DraField.exporter_down`):
  labels in its order (`gpu, UUID, pci_bus_id, device, modelName, [GPU_I_PROFILE, GPU_I_ID],
  Hostname`, then the attributes sorted by name: `container, dra_*, namespace, pod`). A device a
  claim holds while the claim's pod runs carries the claim's `dra_*` labels and the pod's
  (MIG devices keyed to the parent `UUID`, with `dra_mig_profile` and `dra_mig_device_uuid`);
  any other device has no pod and no `dra_*` labels (a pending pod's device included). A
  static MIG card has a series per instance; a dynamic one only for the MIG devices that
  exist (from their creation, `DraPool.device_created`, to their claim's release); every MIG
  card also has its GPU-level `DCGM_FI_DEV_FB_USED` without `GPU_I_*`.
- kube-state-metrics (`ksm`): `kube_pod_resourceclaim_info` for each pod from its creation
  to its end (2.20+, PR 3005), `kube_pod_status_scheduled_time` (value: the Unix time it was
  bound) from its scheduling, and `kube_namespace_labels{label_team}`. With `claim_families`
  (`--resources=resourceclaims,resourceslices`) also `kube_resourceclaim_info`, `_created`,
  `_status_allocated`, `_status_reserved_for`, `_allocation_device_info`, and
  `kube_resourceslice_info`, `kube_resourceslice_device_info`.

Exporters write no timestamps; the file carries each minute's (Prometheus' scrape time), so
promtool can backfill it. Each family is one block; the file ends with `# EOF`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from gpuledger.simulator.dra import (
    BLOCK_MINUTES,
    BUSY,
    CARDS,
    CLAIMS,
    DRIVER,
    PRODUCT,
    TEAMS,
    Card,
    ClaimPlan,
    DraPool,
    _idle,
    device_name,
    gpu_instance_id,
    slice_name,
)

DCGM_ORDER = ("gpu", "UUID", "pci_bus_id", "device", "modelName", "GPU_I_PROFILE", "GPU_I_ID", "Hostname")
ACTIVE, FB = "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_FB_USED"
Line = tuple[str, str, float, int]
"""(family, label text, value, unix seconds)."""


def label_text(pairs: Iterable[tuple[str, object]]) -> str:
    return ",".join(f'{k}="{v}"' for k, v in pairs)


def dcgm_labels(labels: dict[str, str]) -> str:
    """dcgm-exporter's order: the device's labels, then the attributes sorted by name."""
    head = [(k, labels[k]) for k in DCGM_ORDER if k in labels]
    tail = sorted((k, v) for k, v in labels.items() if k not in DCGM_ORDER)
    return label_text([*head, *tail])


def _card_labels(card: Card) -> dict[str, str]:
    return {"gpu": str(card.index), "UUID": card.uuid, "pci_bus_id": f"0000{card.pci_bus_id.upper()}",
            "device": f"nvidia{card.index}", "modelName": PRODUCT, "Hostname": card.node}


def _instance(card: Card, profile: str, placement: int) -> dict[str, str]:
    return {**_card_labels(card), "GPU_I_PROFILE": profile,
            "GPU_I_ID": str(gpu_instance_id(profile, placement))}


Series = tuple[dict[str, str], float, float]
"""(labels, GR_ENGINE_ACTIVE, FB_USED MiB) of one device series at one minute."""


def _held(pool: DraPool, claim: ClaimPlan, minute: int, workload: bool) -> Series:
    """The claim's device series at `minute` while its runner shows: labels, activity, memory."""
    labels = pool.labels(claim, claim.pods[0])
    if not workload:
        labels = {k: v for k, v in labels.items() if k not in ("pod", "namespace", "container")}
    return labels, (0.0 if _idle(claim.pods[0], minute) else BUSY), 4096.0


def dcgm_minute(pool: DraPool, minute: int, workload: bool = True) -> Iterator[Series]:
    """Every device series at `minute` (module docstring); the GPU-level memory-only series of a
    MIG card has activity NaN (no activity line is written for it)."""
    shown = {c.name: set(pool.shown(c)) for c in CLAIMS}
    live = [c for c in CLAIMS if c.start <= minute < c.end]
    for card in CARDS:
        if pool.field.down(card.node, minute):
            continue
        mine = [c for c in live if c.card == card]
        if not card.static_mig and not card.dynamic:
            showing = [c for c in mine if minute in shown[c.name]]
            if showing:
                yield from (_held(pool, c, minute, workload) for c in showing)
            else:
                yield _card_labels(card), 0.0, 0.0
            continue
        used = 0.0
        devices = (card.static_mig if card.static_mig else
                   [(c.profile, c.placement) for c in mine if minute >= pool.device_created(c)])
        for profile, placement in devices:
            holder = next((c for c in mine if (c.profile, c.placement) == (profile, placement)), None)
            if holder is not None and minute in shown[holder.name]:
                labels, active, fb = _held(pool, holder, minute, workload)
                used += fb
                yield labels, active, fb
            else:
                yield _instance(card, str(profile), placement), 0.0, 0.0
        yield _card_labels(card), float("nan"), used  # GPU-level: memory only (NaN: no activity line)


def _dcgm_lines(pool: DraPool, minutes: range, workload: bool) -> Iterator[Line]:
    base = int(pool.start.timestamp())
    for minute in minutes:
        t = base + 60 * minute
        for labels, active, fb in dcgm_minute(pool, minute, workload):
            text = dcgm_labels(labels)
            if not math.isnan(active):  # not the GPU-level memory-only series
                yield ACTIVE, text, active, t
            yield FB, text, fb, t


def _ksm_lines(pool: DraPool, minutes: range, claim_families: bool) -> Iterator[Line]:
    base = int(pool.start.timestamp())
    for minute in minutes:
        t = base + 60 * minute
        for ns, team in TEAMS.items():
            yield "kube_namespace_labels", label_text([("namespace", ns), ("label_team", team)]), 1, t
        for claim in CLAIMS:
            for p in claim.pods:
                pod = [("namespace", claim.namespace), ("pod", p.name), ("uid", pool.uid("pod", p.name))]
                if p.created_at <= minute < p.end:
                    yield "kube_pod_resourceclaim_info", label_text([
                        *pod, ("claim_name", "gpu"), ("resourceclaim_name", claim.name),
                        ("resourceclaim_template_name", "")]), 1, t
                if p.start <= minute < p.end:
                    bound = int(pool.at(p.start).timestamp())
                    yield "kube_pod_status_scheduled_time", label_text(pod), bound, t
            if claim_families:
                yield from _claim_lines(pool, claim, minute, t)
        if claim_families:
            yield from _slice_lines(minute, t)


def _claim_lines(pool: DraPool, claim: ClaimPlan, minute: int, t: int) -> Iterator[Line]:
    """kube-state-metrics' `kube_resourceclaim_*` (resourceclaim.go) at `minute`."""
    if not claim.created_at <= minute < claim.end:
        return
    me = [("resourceclaim", claim.name), ("namespace", claim.namespace)]
    yield "kube_resourceclaim_info", label_text(me), 1, t
    yield "kube_resourceclaim_created", label_text(me), int(pool.at(claim.created_at).timestamp()), t
    allocated = minute >= claim.start
    yield "kube_resourceclaim_status_allocated", label_text(me), int(allocated), t
    if not allocated:
        return
    for p in claim.pods:
        if p.start <= minute < p.end:
            yield "kube_resourceclaim_status_reserved_for", label_text([
                *me, ("consumer_apigroup", ""), ("consumer_resource", "pods"), ("consumer_name", p.name),
                ("consumer_uid", pool.uid("pod", p.name))]), 1, t
    yield "kube_resourceclaim_allocation_device_info", label_text([
        *me, ("request", "gpu"), ("driver", DRIVER), ("pool", claim.card.node),
        ("device", device_name(claim.card, claim.profile, claim.placement))]), 1, t


def _slice_lines(minute: int, t: int) -> Iterator[Line]:
    """kube-state-metrics' `kube_resourceslice_*` (resourceslice.go): the devices, no attributes."""
    del minute
    for card in CARDS:
        where = [("resourceslice", slice_name(card.node)), ("driver", DRIVER), ("pool_name", card.node),
                 ("node_name", card.node)]
        if card.index == 0:
            yield "kube_resourceslice_info", label_text([*where, ("all_nodes", "false")]), 1, t
        names = ([device_name(card, p, s) for p, s in card.static_mig] if card.static_mig else
                 [device_name(card, None, -1), *sorted({device_name(card, c.profile, c.placement)
                                                        for c in CLAIMS if c.card == card and c.profile})])
        for name in names:
            yield "kube_resourceslice_device_info", label_text([*where, ("device_name", name)]), 1, t


def write_openmetrics(pools: Sequence[DraPool], path: Path, *, workload_labels: bool = True,
                      ksm: bool = False, claim_families: bool = False,
                      minutes: Sequence[range] | None = None) -> dict[str, int]:
    """Write the pools' series to `path` (module docstring); `minutes` limits each pool's
    minutes (default: its whole plan). Returns the number of samples per family."""
    families: dict[str, list[str]] = defaultdict(list)
    for i, pool in enumerate(pools):
        span = minutes[i] if minutes is not None else range(BLOCK_MINUTES)
        lines = list(_dcgm_lines(pool, span, workload_labels))
        if ksm or claim_families:
            lines += _ksm_lines(pool, span, claim_families)
        for family, labels, value, t in lines:
            families[family].append(f"{family}{{{labels}}} {_number(value)} {t}\n")
    with path.open("w") as out:
        for family, rows in families.items():
            out.write(f"# TYPE {family} gauge\n")
            out.writelines(rows)
        out.write("# EOF\n")
    return {family: len(rows) for family, rows in families.items()}


def _number(value: float) -> str:
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return f"{value:.6f}"
