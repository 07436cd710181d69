"""dcgm-exporter series → `gpu_samples` rows, and what they reveal about the devices.

Label facts handled here (see DESIGN.md and tests/fixtures/dcgm/SOURCES.md): the node is
`Hostname` or `hostname` (`unknown` when an old exporter sends neither); MIG series carry the
parent `UUID` plus `GPU_I_ID` and `GPU_I_PROFILE` (a profile name the model's catalog spells
otherwise, `7g.79gb`, is mapped by `core.mig.canonical_profile`); DRA MIG series may carry only
`dra_mig_profile` and `dra_mig_device_uuid` (see `dra_instance_id`), and a DRA series without
workload labels is attributed to `dra_claim_namespace` (its pod comes from the claim's
reservations, `analytics.devices.dra_rows`); time-sliced replicas carry
`vgpu`; the workload is `pod`/`namespace`/`container`, or their `exported_` forms when a
ServiceMonitor with honorLabels false renamed them. Then plain `pod` names the exporter's own
pod, so in `auto` mode a series uses `exported_*` when it has them, or when its plain pod is
one the node's exported series name as the exporter (or its container is the exporter's own).
The rule is per series, so a rename mid-chunk (`pod` → `exported_pod`) keeps the holder. A
series with empty workload labels is an unattributed device: kept, with NULL namespace/pod.

Steps of `build_gpu_samples`:
1. Merge HA replica copies per field (`prom_parse.merge_replicas`, the one HA rule, shared
   with the token and queue series: series equal but for a replica label become one, the
   copy's samples at the same instant counted `ha_duplicate`); stack the fields; map labels
   to device keys once per series, noting series without `UUID`, `modelName` or node.
2. Screen samples (clock skew and unattributable dropped; NaN/negative/out-of-range nulled
   and marked; all counted).
3. Scatter samples into dense (instant x device) arrays per field; where two series land on
   the same device and instant (duplicate series) keep an attributed one, then the lowest
   series id, and count the rest `duplicate_series`, except a dropped copy whose value was
   bad: step 2 counted it already. Every read lands in exactly one place (stored, or one
   reason): a bad value is counted as bad wherever it is, a duplicate only when it was good.
4. Keep the rows present in any field; gather the series attributes by id.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
import polars as pl

from gpuledger.collectors.chunks import Chunk
from gpuledger.collectors.prom_parse import REPLICA_LABELS, Matrix, merge_replica_fields
from gpuledger.collectors.promql import NODE_LABELS
from gpuledger.collectors.quality import Quality
from gpuledger.collectors.screen import FUTURE_TOLERANCE
from gpuledger.core.frames import GPU_SAMPLES, WHOLE_GPU, polars_schema
from gpuledger.core.mig import canonical_profile

WORKLOAD = ("namespace", "pod", "container")
EXPORTER_CONTAINERS = ("nvidia-dcgm-exporter", "dcgm-exporter")
DRA_LABELS = ("dra_mig_profile", "dra_mig_device_uuid", "dra_claim_namespace", "dra_claim_name",
              "dra_driver_name", "dra_pool_name", "dra_device_name")
"""dcgm-exporter's DRA labels: the MIG ones and the claim namespace attribute samples here; all
of them rebuild the claims from Prometheus history (`collectors.dra_prometheus`)."""
SERIES_LABELS: tuple[str, ...] = (
    "UUID", "gpu", "modelName", "GPU_I_ID", "GPU_I_PROFILE", *NODE_LABELS, "vgpu",
    *WORKLOAD, *(f"exported_{w}" for w in WORKLOAD), *DRA_LABELS,
)
UNKNOWN_NODE = "unknown"
"""The node of a series with neither `Hostname` nor `hostname` (old exporters)."""
DRA_INSTANCE_BASE = 1000
"""Instance ids synthesized for DRA MIG devices start here, above any real GPU_I_ID (0..14)."""
BOUNDS: dict[str, tuple[float, float]] = {
    "gr_engine_active": (0.0, 1.0),
    "sm_active": (0.0, 1.0),
    "tensor_active": (0.0, 1.0),
    "dram_active": (0.0, 1.0),
    "gpu_util": (0.0, 100.0),
    "fb_used_mib": (0.0, 2.0**21),
    "fb_free_mib": (0.0, 2.0**21),
    "power_w": (0.0, 5000.0),
    "gpu_temp_c": (0.0, 200.0),
}
VALUE_REASONS = ("nan", "negative", "out_of_range")
"""Bad values, nulled and counted (`quality`); their marks are 1, 2, 3 in `_Screened.bad`."""
DEVICE_KEY = ("uuid", "gpu_i_id", "vgpu")
ATTRIBUTES = ("node", "mig_profile", "namespace", "pod", "container", "gpu_index", "model_name")


@dataclass(frozen=True)
class GpuBuild:
    samples: pl.DataFrame
    """Rows of `gpu_samples`."""
    devices: pl.DataFrame
    """One row per device series seen: DEVICE_KEY + node, mig_profile, gpu_index, model_name,
    first_ts, last_ts, fb_total_mib (max of used + free)."""


def fetch_labels(replica_labels: tuple[str, ...] = REPLICA_LABELS) -> tuple[str, ...]:
    """The labels to keep from each DCGM series: the device's, then the replica labels."""
    return (*SERIES_LABELS, *(r for r in replica_labels if r not in SERIES_LABELS))


def dra_instance_id(mig_device_uuid: str) -> int:
    """A stable GPU instance id for a DRA MIG device that carries no `GPU_I_ID`.

    The NVIDIA DRA driver's MIG series may name the instance only by `dra_mig_device_uuid`;
    the warehouse keys instances by (parent UUID, integer id), so the id is derived from the
    MIG UUID (CRC-32, offset past real ids): the same instance keeps the same id in every run.
    """
    return DRA_INSTANCE_BASE + zlib.crc32(mig_device_uuid.encode()) % 1_000_000


def _use_exported(series: pl.DataFrame, mode: str) -> pl.Expr:
    """Per series: read the workload from `exported_*` (see the module docstring)."""
    if mode in ("exported", "direct"):
        return pl.lit(mode == "exported")
    has_exported = pl.any_horizontal(*(pl.col(f"exported_{w}").is_not_null() for w in WORKLOAD))
    exporter_pods = series.filter(has_exported & pl.col("pod").is_not_null()).select("node", "pod")
    names_exporter = pl.struct("node", "pod").is_in(exporter_pods.unique().to_struct().implode())
    exporter_self = pl.col("container").is_in(EXPORTER_CONTAINERS).fill_null(False)
    return has_exported | names_exporter.fill_null(False) | exporter_self


def map_series(series: pl.DataFrame, mode: str) -> pl.DataFrame:
    """Label columns → device keys and attributes (one row per series)."""
    series = series.with_columns(
        pl.coalesce(*(pl.col(n) for n in NODE_LABELS), pl.lit(UNKNOWN_NODE)).alias("node"))
    use_exported = _use_exported(series, mode)
    dra_id = pl.col("dra_mig_device_uuid").map_elements(dra_instance_id, return_dtype=pl.Int32)
    profile = pl.coalesce("GPU_I_PROFILE", "dra_mig_profile")
    out = series.with_columns(
        pl.col("UUID").alias("uuid"),
        pl.coalesce(pl.col("GPU_I_ID").cast(pl.Int32, strict=False), dra_id, pl.lit(WHOLE_GPU, pl.Int32))
        .alias("gpu_i_id"),
        _canonical_profiles(series.select(profile.alias("p"), pl.col("modelName").alias("m"))),
        pl.col("gpu").cast(pl.Int32, strict=False).alias("gpu_index"),
        pl.col("modelName").alias("model_name"),
        *(
            pl.when(use_exported).then(pl.col(f"exported_{w}")).otherwise(pl.col(w)).alias(w)
            for w in WORKLOAD
        ),
    ).with_columns(pl.coalesce("namespace", "dra_claim_namespace").alias("namespace"))
    return out.select("sid", "field", "uuid", "gpu_i_id", "vgpu", *ATTRIBUTES)


def _canonical_profiles(pairs: pl.DataFrame) -> pl.Series:
    """`core.mig.canonical_profile` per series, called once per distinct (profile, model) pair:
    a chunk has thousands of series (nine fields per device) but a handful of pairs, and a
    Python call per series was the largest cost of `map_series`."""
    distinct = pairs.filter(pl.col("p").is_not_null()).unique()
    mapped = distinct.with_columns(pl.Series(
        "mig_profile", [canonical_profile(m, p) for p, m in distinct.iter_rows()], dtype=pl.String))
    joined = pairs.join(mapped, on=["p", "m"], how="left", nulls_equal=True, maintain_order="left")
    return joined["mig_profile"]


def stack(
    matrices: dict[str, Matrix], labels: tuple[str, ...] = SERIES_LABELS,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Concatenate per-field matrices, renumbering series ids to be unique.

    Series rows get a `field` name; sample rows a `f` index into the order of `matrices`."""
    series_parts, sample_parts = [], []
    offset = 0
    for index, (field_name, matrix) in enumerate(matrices.items()):
        s = matrix.series.select(
            (pl.col("sid").cast(pl.Int64) + offset).alias("sid"), pl.lit(field_name).alias("field"),
            *(pl.col(c) if c in matrix.series.columns else pl.lit(None, pl.String).alias(c)
              for c in labels),
        )
        series_parts.append(s)
        sample_parts.append(matrix.samples.select(
            (pl.col("sid").cast(pl.Int64) + offset).alias("sid"), pl.lit(index, pl.Int8).alias("f"),
            "ts", "value"))
        offset += matrix.series.height
    series = pl.concat(series_parts) if series_parts else pl.DataFrame(
        schema={"sid": pl.Int64, "field": pl.String, **{c: pl.String for c in labels}})
    samples = pl.concat(sample_parts) if sample_parts else pl.DataFrame(
        schema={"sid": pl.Int64, "f": pl.Int8, "ts": pl.Datetime("us", "UTC"), "value": pl.Float64})
    return series, samples


def _count(quality: Quality, fields: list[str], f: np.ndarray, mask: np.ndarray, reason: str) -> None:
    if mask.any():
        for index, n in enumerate(np.bincount(f[mask], minlength=len(fields))):
            quality.add(GPU_SAMPLES.name, fields[index], reason, int(n))


@dataclass(frozen=True)
class _SeriesIds:
    """Step 1: per raw series id, its device (`did`, -1 when unusable) and attribute set."""

    series: pl.DataFrame
    n_dev: int
    did_of: np.ndarray
    aid_of: np.ndarray
    unattributed_of: np.ndarray


@dataclass(frozen=True)
class _Screened:
    """Step 2: the samples kept, as parallel arrays (series, field, instant, value, device,
    bad-value mark; bad values are already nulled and counted)."""

    sid: np.ndarray
    f: np.ndarray
    instant: np.ndarray
    """Per sample: its instant's index in the chunk (0 .. points-1)."""
    value: np.ndarray
    did: np.ndarray
    bad: np.ndarray
    """Per sample: 0 a good value, else 1 + the index of its reason in `VALUE_REASONS`."""


def build_gpu_samples(
    matrices: dict[str, Matrix], chunk: Chunk, now: datetime, mode: str, quality: Quality, *,
    replica_labels: tuple[str, ...] = REPLICA_LABELS,
) -> GpuBuild:
    """Per-field range answers (field = `gpu_samples` column) → rows and device facts.

    The rows are assembled by scattering samples into dense (instant x device) arrays, one per
    field: linear in the number of samples, with no sort, hash join or pivot on the hot path.
    """
    fields = list(matrices)
    raw_series, raw_samples = stack(merge_replica_fields(matrices, replica_labels, quality, GPU_SAMPLES.name))
    _note_series(raw_series, quality)
    ids = _series_ids(raw_series, mode)
    kept = _screen(raw_samples, ids, fields, chunk, now=now, quality=quality)
    columns, aid_row = _scatter(kept, ids, fields, chunk, quality)
    # 4. Rows present in any field, with their attributes gathered by id.
    n_dev = max(ids.n_dev, 1)
    present = np.nonzero(aid_row >= 0)[0]
    attrs = ids.series.unique("aid").sort("aid").select(*DEVICE_KEY, *ATTRIBUTES)
    wide = attrs[aid_row[present]].with_columns(
        pl.Series("ts", _us(chunk.start) + (present // n_dev) * _us_of(chunk.step))
        .cast(pl.Datetime("us", "UTC")),
        pl.Series("did", present % n_dev),
        *(pl.Series(name, columns[name][present]).fill_nan(None) for name in fields),
    )
    schema = polars_schema(GPU_SAMPLES)
    out = wide.select(
        *(pl.col(c).cast(schema[c]) if c in wide.columns else pl.lit(None, schema[c]).alias(c)
          for c in GPU_SAMPLES.column_names)
    )
    return GpuBuild(out, _devices(wide, chunk))


def _note_series(raw_series: pl.DataFrame, quality: Quality) -> None:
    """1. Count the distinct series (label sets, fields aside) lacking UUID, modelName or node."""
    labels = raw_series.drop("sid", "field").unique()
    no_node = pl.all_horizontal(*(pl.col(n).is_null() for n in NODE_LABELS))
    for reason, missing in (("missing_uuid", pl.col("UUID").is_null()),
                            ("missing_model_name", pl.col("modelName").is_null()),
                            ("missing_node", no_node)):
        quality.add_series(GPU_SAMPLES.name, reason, labels.filter(missing).height)


def _series_ids(raw_series: pl.DataFrame, mode: str) -> _SeriesIds:
    """1. Series → device ids (`did`) and attribute-set ids (`aid`), once per series."""
    series = map_series(raw_series, mode).filter(pl.col("uuid").is_not_null())
    series = _dense_id(_dense_id(series, list(DEVICE_KEY), "did"), [*DEVICE_KEY, *ATTRIBUTES], "aid")
    n_dev = int(series.select(pl.col("did").max()).item()) + 1 if series.height else 0
    size = int(raw_series["sid"].to_numpy().max()) + 1 if raw_series.height else 0
    did_of = np.full(size, -1, dtype=np.int64)
    aid_of = np.zeros(size, dtype=np.int64)
    unattributed_of = np.zeros(size, dtype=np.int8)
    sids = series["sid"].to_numpy()
    did_of[sids] = series["did"].to_numpy()
    aid_of[sids] = series["aid"].to_numpy()
    unattributed_of[sids] = series["pod"].is_null().to_numpy().astype(np.int8)
    return _SeriesIds(series, n_dev, did_of, aid_of, unattributed_of)


def _screen(
    raw_samples: pl.DataFrame, ids: _SeriesIds, fields: list[str], chunk: Chunk, *, now: datetime,
    quality: Quality,
) -> _Screened:
    """2. Unattributable series, clock skew (dropped); NaN/negative/out of range (nulled and
    marked, so that step 3 does not count a bad copy it drops a second time)."""
    sid = raw_samples["sid"].to_numpy()
    f = raw_samples["f"].to_numpy()
    ts_us = raw_samples["ts"].dt.epoch("us").to_numpy()
    value = np.asarray(raw_samples["value"].to_numpy(), dtype=np.float64)
    did = ids.did_of[sid] if sid.size else sid
    orphan = did < 0
    _count(quality, fields, f, orphan, "unattributable")
    start_us, step_us = _us(chunk.start), _us_of(chunk.step)
    rel = ts_us - start_us
    instant = rel // step_us
    # Before the start, at or past the end, or past now + tolerance: one unsigned comparison
    # (a negative offset wraps past any limit).
    limit = min(_us(chunk.end), _us(now + FUTURE_TOLERANCE) + 1) - start_us
    skewed = ~orphan & ((rel.view(np.uint64) >= max(limit, 0)) | (instant * step_us != rel))
    _count(quality, fields, f, skewed, "clock_skew")
    drop = orphan | skewed
    if drop.any():  # five gathers over every sample: the costliest step, so only when needed
        keep = ~drop
        sid, f, instant, value, did = sid[keep], f[keep], instant[keep], value[keep], did[keep]
    bad = _bad_values(value, f, fields)
    if bad.any():
        for index, reason in enumerate(VALUE_REASONS):
            _count(quality, fields, f, bad == index + 1, reason)
        value = value.astype(np.float64, copy=True)
        value[bad > 0] = np.nan
    return _Screened(sid, f, instant, value, did, bad)


def _bad_values(value: np.ndarray, f: np.ndarray, fields: list[str]) -> np.ndarray:
    """Per sample: 0 a good value, else 1 + the index of its reason in `VALUE_REASONS`."""
    bounds = np.array([BOUNDS.get(name, (0.0, np.inf)) for name in fields]).reshape(-1, 2)
    bad = np.zeros(value.size, dtype=np.int8)
    if not value.size:
        return bad
    lo = bounds[0, 0] if (bounds[:, 0] == bounds[0, 0]).all() else bounds[f, 0]
    nan = ~np.isfinite(value)
    negative = ~nan & (value < lo)
    over = ~nan & ~negative & (value > bounds[f, 1])
    bad[nan], bad[negative], bad[over] = 1, 2, 3
    return bad


def _scatter(
    kept: _Screened, ids: _SeriesIds, fields: list[str], chunk: Chunk, quality: Quality,
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """3. Dense rows (instant-major) per field; duplicate series per row and field resolved."""
    n_rows = chunk.points * ids.n_dev
    row = kept.instant * ids.n_dev + kept.did
    columns: dict[str, np.ndarray] = {}
    aid_row = np.full(n_rows, -1, dtype=np.int64)
    for name, positions in zip(fields, _by_field(kept.f, len(fields)), strict=True):
        sel, target = positions, row[positions]
        owner = np.full(n_rows, -1, dtype=np.int64)
        owner[target] = sel
        if (owner[target] != sel).any():
            sel = _resolve_duplicates(sel, target, kept, ids.unattributed_of, quality=quality, name=name)
            target = row[sel]
        column = np.full(n_rows, np.nan)
        column[target] = kept.value[sel]
        columns[name] = column
        aid_row[target] = ids.aid_of[kept.sid[sel]]
    return columns, aid_row


def _by_field(f: np.ndarray, n_fields: int) -> list[np.ndarray]:
    """The positions of each field's samples. `stack` concatenates the fields in order and
    step 2 keeps that order, so each is one run found by binary search (one check of the
    order, not a scan per field); any other order by a scan per field."""
    if f.size < 2 or bool((f[1:] >= f[:-1]).all()):
        edges = np.searchsorted(f, np.arange(n_fields + 1))
        return [np.arange(edges[i], edges[i + 1], dtype=np.int64) for i in range(n_fields)]
    return [np.nonzero(f == i)[0] for i in range(n_fields)]


def _dense_id(frame: pl.DataFrame, columns: list[str], name: str) -> pl.DataFrame:
    """Number the distinct combinations of `columns` 0..k-1 (NULLs equal) into column `name`."""
    ids = frame.select(columns).unique(maintain_order=True).with_row_index(name)
    return frame.join(ids.with_columns(pl.col(name).cast(pl.Int64)), on=columns, how="left",
                      nulls_equal=True, maintain_order="left")


def _us(moment: datetime) -> int:
    return round(moment.timestamp() * 1_000_000)


def _us_of(step: timedelta) -> int:
    return int(step.total_seconds() * 1_000_000)


def _resolve_duplicates(
    sel: np.ndarray, target: np.ndarray, kept: _Screened, unattributed_of: np.ndarray, *,
    quality: Quality, name: str,
) -> np.ndarray:
    """Keep one sample per row: an attributed series first, then the lowest series id.

    The dropped samples with a good value are `duplicate_series`; a dropped bad one was
    counted by its value's reason in step 2 and is not counted again."""
    sid = kept.sid[sel]
    order = np.lexsort((sid, unattributed_of[sid], target))
    ranked_rows = target[order]
    first = np.ones(order.size, dtype=bool)
    first[1:] = ranked_rows[1:] != ranked_rows[:-1]
    dropped = sel[order[~first]]
    quality.add(GPU_SAMPLES.name, name, "duplicate_series", int((kept.bad[dropped] == 0).sum()))
    return sel[order[first]]


def _devices(wide: pl.DataFrame, chunk: Chunk) -> pl.DataFrame:
    fb = [c for c in ("fb_used_mib", "fb_free_mib") if c in wide.columns]
    total = pl.col(fb[0]) + pl.col(fb[1]) if len(fb) == 2 else pl.lit(None, pl.Float64)
    return (
        wide.with_columns(total.alias("_fb_total"))
        .group_by("did")
        .agg(
            *(pl.col(k).first() for k in DEVICE_KEY),
            pl.col("node").last(), pl.col("mig_profile").last(), pl.col("gpu_index").last(),
            pl.col("model_name").last(),
            pl.col("ts").min().alias("first_ts"),
            (pl.col("ts").max() + chunk.step).alias("last_ts"),
            pl.col("_fb_total").max().alias("fb_total_mib"),
        )
        .drop("did")
    )
