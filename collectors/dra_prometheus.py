"""DRA claims and devices from Prometheus history: what dcgm-exporter and kube-state-metrics
show of them, as `source = prometheus` rows of the DRA tables (docs/decisions/0163).

Why: a history collected from Prometheus alone (no API listing for the past, or none at all)
has no ResourceClaims and no ResourceSlices, so the bill could not see a claim's capacity
where its telemetry is missing (an exporter down for hours, a pod pending on a prepared claim,
a MIG device created after its claim). Prometheus holds three kinds of evidence, each read per
chunk into spans by the pod history's rule (`prom_parse.sample_runs`, decision 0212: the
kube-state-metrics families as raw samples at their scrape times, a span from the first
sample to the last plus the series' scrape interval, a gap past the staleness bound ending it;
never the query step; the warehouse stitches spans across chunks):

1. dcgm-exporter with `KUBERNETES_ENABLE_DRA` labels each claimed device's series with
   `dra_claim_name, dra_claim_namespace, dra_driver_name, dra_pool_name, dra_device_name`
   (plus `dra_mig_profile, dra_mig_device_uuid` for MIG, keyed to the parent `UUID`): the
   device lies on that card (`dra_devices`), the claim held it then (`dra_claims`), and the
   series' pod used it then (`dra_reservations`).
2. kube-state-metrics' opt-in claim families (`--resources=resourceclaims`, watching
   `v1beta1`): `kube_resourceclaim_allocation_device_info{resourceclaim,namespace,request,
   driver,pool,device}` is the allocation itself (`dra_claims`), and
   `kube_resourceclaim_status_reserved_for{...,consumer_resource,consumer_name}` the
   reservations (`dra_reservations`). No device attributes: the card comes from (1).
3. kube-state-metrics' `kube_pod_resourceclaim_info` (2.20+, collected as `dra_pod_claims`) with
   `kube_pod_status_scheduled_time`: a pod referencing a claim that has been scheduled has
   reserved it since its scheduling (the scheduler allocates and reserves the claim in that
   cycle), until the pod is gone (`dra_reservations`).

A claim rebuilt here has the UID `prometheus:<namespace>/<name>` (Prometheus carries no UIDs),
request `""`, no DeviceClass and sharing `unknown`; its held spans are assembled at read time
(`analytics.devices.dra_history`), where an API listing of the same device wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

import polars as pl

from gpuledger.collectors.dra_objects import NVIDIA_DRIVER
from gpuledger.collectors.prom_parse import Matrix, sample_runs, sample_spacing
from gpuledger.core.dra_names import device_name
from gpuledger.core.frames import polars_schema
from gpuledger.core.frames_dra import (
    DRA_CLAIMS,
    DRA_DEVICES,
    DRA_RESERVATIONS,
    PROMETHEUS_SOURCE,
    PROMETHEUS_UID_PREFIX,
)
from gpuledger.core.mig import canonical_model, canonical_profile

SOURCE = PROMETHEUS_SOURCE
UID_PREFIX = PROMETHEUS_UID_PREFIX
DCGM_LABELS: tuple[str, ...] = (
    "dra_claim_name", "dra_driver_name", "dra_pool_name", "dra_device_name",
)
"""The dcgm-exporter DRA labels read here beyond those `collectors.dcgm` reads anyway."""
ALLOC_LABELS: tuple[str, ...] = (
    "namespace", "exported_namespace", "resourceclaim", "driver", "pool", "device",
)
RESERVED_LABELS: tuple[str, ...] = (
    "namespace", "exported_namespace", "resourceclaim", "consumer_resource", "consumer_name",
)
SCHEDULED_LABELS: tuple[str, ...] = ("namespace", "exported_namespace", "pod", "exported_pod")


def claim_uid(namespace: str, claim: str) -> str:
    """The UID a claim rebuilt from Prometheus is stored under."""
    return f"{UID_PREFIX}{namespace}/{claim}"


def _dcgm_sightings(gpu_fields: Mapping[str, Matrix], fallback: timedelta) -> tuple[pl.DataFrame, timedelta]:
    """One row per (series, instant) of every dcgm series that names a DRA claim, and how long
    one stands: the series' sample spacing, as a dcgm row stands for its card's (the sampling
    model, `analytics.sampling.sweep`), never the query step."""
    parts: list[pl.DataFrame] = []
    spacings: list[timedelta] = []
    for matrix in gpu_fields.values():
        if matrix.empty or "dra_claim_name" not in matrix.series.columns:
            continue
        series = matrix.series.filter(pl.col("dra_claim_name").is_not_null()
                                      & (pl.col("dra_claim_name") != ""))
        if series.height == 0:
            continue
        parts.append(matrix.samples.select("sid", "ts").join(series, on="sid").drop("sid"))
        spacings.append(sample_spacing(matrix, fallback))
    if not parts:
        return pl.DataFrame(), fallback
    return pl.concat(parts, how="diagonal_relaxed"), max(spacings)


def _col(frame: pl.DataFrame, name: str) -> pl.Expr:
    return pl.col(name) if name in frame.columns else pl.lit(None, pl.String).alias(name)


def _dcgm_frames(seen: pl.DataFrame, spacing: timedelta, at: datetime) -> dict[str, pl.DataFrame]:
    """Devices, claim spans and pod spans from the DRA-labelled dcgm series (module step 1)."""
    node = pl.coalesce(_col(seen, "Hostname"), _col(seen, "hostname")).alias("node")
    pod_ns = pl.coalesce(_col(seen, "exported_namespace"), _col(seen, "namespace"))
    rows = seen.select(
        pl.col("dra_claim_namespace").alias("namespace"), pl.col("dra_claim_name").alias("claim"),
        pl.col("dra_driver_name").fill_null(NVIDIA_DRIVER).alias("driver"),
        pl.col("dra_pool_name").alias("pool"), pl.col("dra_device_name").alias("device"),
        node, pl.col("UUID").alias("parent_uuid"), _col(seen, "modelName").alias("model_name"),
        pl.coalesce(_col(seen, "dra_mig_profile"), _col(seen, "GPU_I_PROFILE")).alias("mig_profile"),
        _col(seen, "dra_mig_device_uuid").alias("mig_uuid"),
        pod_ns.alias("pod_namespace"),
        pl.coalesce(_col(seen, "exported_pod"), _col(seen, "pod")).alias("pod"), "ts",
    ).filter(pl.col("namespace").is_not_null() & pl.col("pool").is_not_null()
             & pl.col("device").is_not_null() & pl.col("parent_uuid").is_not_null())
    return {
        "dra_devices": _devices(rows, at),
        "claims": sample_runs(rows, ["namespace", "claim", "driver", "pool", "device"], spacing),
        "pods": sample_runs(rows.filter(pl.col("pod").is_not_null() & (pl.col("pod") != "")
                                        & (pl.col("pod_namespace") == pl.col("namespace"))),
                            ["namespace", "claim", "pod"], spacing),
    }


def _devices(rows: pl.DataFrame, at: datetime) -> pl.DataFrame:
    """`dra_devices` rows: the card (parent `UUID`), node, model, MIG profile and placement
    (from the device's name) of each device the series name, its newest sighting's facts."""
    latest = rows.sort("ts").group_by("driver", "pool", "device").agg(
        pl.col("node", "parent_uuid", "model_name", "mig_profile", "mig_uuid").drop_nulls().last())
    out = []
    for r in latest.iter_rows(named=True):
        mig = bool(r["mig_profile"])
        model = canonical_model(r["model_name"]) if r["model_name"] else None
        placement = device_name(r["device"]).placement if mig else -1
        out.append({
            "driver": r["driver"], "pool": r["pool"], "device": r["device"], "node": r["node"],
            "kind": "mig" if mig else "gpu", "uuid": r["mig_uuid"] if mig else r["parent_uuid"],
            "parent_uuid": r["parent_uuid"],
            "profile": canonical_profile(r["model_name"], r["mig_profile"]) if mig else None,
            "placement": placement if placement is not None else -1, "model": model,
            "memory_mib": None, "dynamic": 0, "observed_at": at, "source": SOURCE,
        })
    return pl.DataFrame(out, schema=polars_schema(DRA_DEVICES))


def _namespace(matrix: Matrix) -> pl.Expr:
    return pl.coalesce(_col(matrix.series, "exported_namespace"), _col(matrix.series, "namespace"))


def _ksm_claims(alloc: Matrix, fallback: timedelta) -> pl.DataFrame:
    """Claim spans from `kube_resourceclaim_allocation_device_info` (module step 2)."""
    if alloc.empty:
        return pl.DataFrame()
    series = alloc.series.select(
        "sid", _namespace(alloc).alias("namespace"), pl.col("resourceclaim").alias("claim"),
        "driver", "pool", "device").drop_nulls()
    live = alloc.samples.filter(pl.col("value") > 0).select("sid", "ts").join(series, on="sid")
    keys = ["namespace", "claim", "driver", "pool", "device"]
    return sample_runs(live, keys, sample_spacing(alloc, fallback))


def _ksm_reservations(reserved: Matrix, fallback: timedelta) -> pl.DataFrame:
    """Pod spans from `kube_resourceclaim_status_reserved_for` (module step 2)."""
    if reserved.empty:
        return pl.DataFrame()
    series = reserved.series.filter(pl.col("consumer_resource") == "pods").select(
        "sid", _namespace(reserved).alias("namespace"), pl.col("resourceclaim").alias("claim"),
        pl.col("consumer_name").alias("pod")).drop_nulls()
    live = reserved.samples.filter(pl.col("value") > 0).select("sid", "ts").join(series, on="sid")
    return sample_runs(live, ["namespace", "claim", "pod"], sample_spacing(reserved, fallback))


def scheduled_times(result: list[dict[str, object]]) -> pl.DataFrame:
    """`namespace`, `pod`, `scheduled_ts` from an instant vector of
    `kube_pod_status_scheduled_time` (its value is the Unix time the pod was bound)."""
    rows = []
    for item in result:
        metric = item.get("metric") or {}
        assert isinstance(metric, dict)
        ns = metric.get("exported_namespace") or metric.get("namespace")
        pod = metric.get("exported_pod") or metric.get("pod")
        value = item.get("value")
        if ns and pod and isinstance(value, list) and len(value) == 2:
            try:
                seconds = float(value[1])
            except (TypeError, ValueError):
                continue
            if seconds > 0:
                rows.append({"namespace": ns, "pod": pod, "scheduled_ts": seconds})
    frame = pl.DataFrame(rows, schema={"namespace": pl.String, "pod": pl.String, "scheduled_ts": pl.Float64})
    return frame.group_by("namespace", "pod").agg(pl.col("scheduled_ts").min()).select(
        "namespace", "pod", (pl.col("scheduled_ts") * 1e6).cast(pl.Int64).cast(pl.Datetime("us", "UTC"))
        .alias("scheduled_ts"))


def _scheduled_refs(refs: pl.DataFrame, scheduled: pl.DataFrame) -> pl.DataFrame:
    """Pod spans from a pod's claim references once it was scheduled (module step 3)."""
    if refs.height == 0 or scheduled.height == 0:
        return pl.DataFrame()
    joined = refs.join(scheduled, on=["namespace", "pod"], how="inner").filter(
        pl.col("scheduled_ts") < pl.col("end_ts"))
    return joined.select("namespace", "claim", "pod",
                         pl.max_horizontal("start_ts", "scheduled_ts").alias("start_ts"), "end_ts")


def prometheus_frames(
    gpu_fields: Mapping[str, Matrix], alloc: Matrix, reserved: Matrix, refs: pl.DataFrame, *,
    scheduled: pl.DataFrame, step: timedelta, at: datetime,
) -> dict[str, pl.DataFrame]:
    """The chunk's `dra_devices`, `dra_claims` and `dra_reservations` rows rebuilt from its
    series (module docstring); `refs` are the chunk's `dra_pod_claims` rows, `at` the chunk's
    end (the devices' `observed_at`)."""
    seen, spacing = _dcgm_sightings(gpu_fields, step)
    dcgm = _dcgm_frames(seen, spacing, at) if seen.height else {}
    claims = _stack([dcgm.get("claims"), _ksm_claims(alloc, step)],
                    ["namespace", "claim", "driver", "pool", "device", "start_ts", "end_ts"])
    pods = _stack([dcgm.get("pods"), _ksm_reservations(reserved, step), _scheduled_refs(refs, scheduled)],
                  ["namespace", "claim", "pod", "start_ts", "end_ts"])
    claims = union(claims, ["namespace", "claim", "driver", "pool", "device"])
    pods = union(pods, ["namespace", "claim", "pod"])
    uid = pl.concat_str(pl.lit(UID_PREFIX), "namespace", pl.lit("/"), "claim").alias("claim_uid")
    claim_rows = claims.select(
        uid, pl.lit("").alias("request"), "driver", "pool", "device", "namespace", "claim",
        pl.lit(None, pl.String).alias("device_class"), pl.lit(None, pl.String).alias("template"),
        pl.lit("unknown").alias("sharing"), "start_ts", "end_ts", pl.lit(SOURCE).alias("source"))
    reservations = pods.select(uid, "namespace", "pod", "start_ts", "end_ts")
    return {
        "dra_devices": dcgm.get("dra_devices", pl.DataFrame(schema=polars_schema(DRA_DEVICES))),
        "dra_claims": _typed(claim_rows, DRA_CLAIMS.name),
        "dra_reservations": _typed(reservations, DRA_RESERVATIONS.name),
    }


def union(spans: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Per `keys`, the union of the `[start_ts, end_ts)` spans: overlapping or touching ones
    become one (what the warehouse's interval load does across loads, done within the batch)."""
    if spans.height == 0:
        return spans
    ordered = spans.sort([*keys, "start_ts", "end_ts"]).with_columns(
        pl.col("end_ts").cum_max().shift(1).over(keys).alias("_reach"))
    opened = pl.col("_reach").is_null() | (pl.col("start_ts") > pl.col("_reach"))
    return (ordered.with_columns(opened.cast(pl.Int32).cum_sum().over(keys).alias("_island"))
            .group_by(*keys, "_island", maintain_order=True)
            .agg(pl.col("start_ts").min(), pl.col("end_ts").max()).drop("_island"))


def _stack(frames: list[pl.DataFrame | None], columns: list[str]) -> pl.DataFrame:
    found = [f.select(columns) for f in frames if f is not None and f.height]
    if not found:
        schema = {c: (pl.Datetime("us", "UTC") if c.endswith("_ts") else pl.String) for c in columns}
        return pl.DataFrame(schema=schema)
    return pl.concat([f.with_columns(pl.col("start_ts", "end_ts").cast(pl.Datetime("us", "UTC")))
                      for f in found], how="vertical_relaxed")


def _typed(frame: pl.DataFrame, table: str) -> pl.DataFrame:
    from gpuledger.core.frames import TABLES

    schema = polars_schema(TABLES[table])
    return frame.select([pl.col(c).cast(schema[c]) for c in TABLES[table].column_names])
