"""The typed boundary between stages: the frames collectors and the simulator produce and
the warehouse stores, declared once.

Each `TableSpec` names its columns with DuckDB types, its key, and how a load replaces old
rows, which is what makes every load idempotent:

- `timeseries`: rows carry a `ts`; a load owns a window and replaces the rows inside it
  (the warehouse deletes `[start, end)` for the window's days, then inserts);
- `interval`: rows are half-open `[start_ts, end_ts)` spans keyed by `key`; a load coalesces
  the new spans with the stored spans of the same key that overlap or touch them (earliest
  start, latest end), so chunked collection stitches up, while a span that starts after a gap
  (a MIG instance recreated, a pod name reused) stays a span of its own;
- `dimension`: rows keyed by `key`; a load replaces the row with that key, except columns whose
  `merge` is `earliest`/`latest` (first/last seen), which keep the earlier/later of the stored and
  the new value: loading another month must never move when a card was first or last seen;
- `append`: rows are only ever added (the audit log).

Timestamps are `TIMESTAMPTZ` in UTC; Polars frames carry `Datetime("us", "UTC")`. `gpu_i_id`
is -1 for a whole GPU (not NULL, so it can be part of a key). Ratios are 0..1, memory is MiB.
The module imports no heavy library; `polars_schema()` converts lazily where one is needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

LoadKind = Literal["timeseries", "interval", "dimension", "append"]
MergeRule = Literal["replace", "earliest", "latest"]
WHOLE_GPU = -1
"""`gpu_i_id` of a sample or allocation that concerns the whole card."""


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: str
    nullable: bool = True
    doc: str = ""
    merge: MergeRule = "replace"  # how a dimension load combines new and stored values


@dataclass(frozen=True, slots=True)
class TableSpec:
    name: str
    kind: LoadKind
    columns: tuple[Column, ...]
    key: tuple[str, ...] = ()
    doc: str = ""

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def ddl(self) -> str:
        cols = [
            f"{c.name} {c.type}{'' if c.nullable else ' NOT NULL'}" for c in self.columns
        ]
        if self.key and self.kind == "dimension":
            cols.append(f"PRIMARY KEY ({', '.join(self.key)})")
        elif self.key and self.kind == "interval":
            cols.append(f"PRIMARY KEY ({', '.join((*self.key, 'start_ts'))})")
        return f"CREATE TABLE IF NOT EXISTS {self.name} (\n  " + ",\n  ".join(cols) + "\n)"


def _c(name: str, type_: str, nullable: bool = True, doc: str = "", merge: MergeRule = "replace") -> Column:
    return Column(name, type_, nullable, doc, merge)


TS = "TIMESTAMPTZ"
METRIC_COLUMNS: tuple[str, ...] = (
    "gr_engine_active", "sm_active", "gpu_util", "fb_used_mib", "fb_free_mib",
    "power_w", "tensor_active", "dram_active", "gpu_temp_c",
)
"""Sample columns, in the order of DCGM fields: GR_ENGINE_ACTIVE, SM_ACTIVE, GPU_UTIL (0-100),
FB_USED, FB_FREE, POWER_USAGE, PIPE_TENSOR_ACTIVE, DRAM_ACTIVE, GPU_TEMP."""

DCGM_FIELDS: dict[str, str] = {
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "gr_engine_active", "DCGM_FI_PROF_SM_ACTIVE": "sm_active",
    "DCGM_FI_DEV_GPU_UTIL": "gpu_util", "DCGM_FI_DEV_FB_USED": "fb_used_mib",
    "DCGM_FI_DEV_FB_FREE": "fb_free_mib", "DCGM_FI_DEV_POWER_USAGE": "power_w",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "tensor_active", "DCGM_FI_PROF_DRAM_ACTIVE": "dram_active",
    "DCGM_FI_DEV_GPU_TEMP": "gpu_temp_c",
}

GPU_SAMPLES = TableSpec(
    "gpu_samples", "timeseries",
    (
        _c("ts", TS, False),
        _c("node", "VARCHAR", False),
        _c("uuid", "VARCHAR", False, "parent GPU UUID"),
        _c("gpu_i_id", "INTEGER", False, "MIG GPU instance id; -1 = whole GPU"),
        _c("mig_profile", "VARCHAR", True, "GPU_I_PROFILE, e.g. 3g.40gb"),
        _c("vgpu", "VARCHAR", True, "time-slice replica id (--kubernetes-virtual-gpus)"),
        _c("namespace", "VARCHAR", True, "NULL when no pod holds the device"),
        _c("pod", "VARCHAR"),
        _c("container", "VARCHAR"),
        *(_c(m, "DOUBLE") for m in METRIC_COLUMNS),
    ),
    key=("ts", "uuid", "gpu_i_id", "vgpu"),
    doc="One row per device (GPU, MIG instance or time-slice replica) per sample time.",
)

TOKEN_SAMPLES = TableSpec(
    "token_samples", "timeseries",
    (
        _c("ts", TS, False),
        _c("namespace", "VARCHAR", False),
        _c("pod", "VARCHAR", False),
        _c("model_name", "VARCHAR", False),
        _c("prompt_tokens_total", "DOUBLE", doc="raw counter (may reset)"),
        _c("generation_tokens_total", "DOUBLE", doc="raw counter (may reset)"),
    ),
    key=("ts", "namespace", "pod", "model_name"),
    doc="vLLM token counters per serving pod and model.",
)

QUEUE_SAMPLES = TableSpec(
    "queue_samples", "timeseries",
    (
        _c("ts", TS, False),
        _c("cluster_queue", "VARCHAR", False),
        _c("flavor", "VARCHAR", False),
        _c("resource", "VARCHAR", False),
        _c("nominal_quota", "DOUBLE"),
        _c("usage", "DOUBLE"),
        _c("pending_workloads", "DOUBLE"),
        _c("admission_wait_s", "DOUBLE", doc="mean admission wait of workloads admitted in the step"),
    ),
    key=("ts", "cluster_queue", "flavor", "resource"),
    doc="Kueue metrics per ClusterQueue, flavor and resource.",
)

GPUS = TableSpec(
    "gpus", "dimension",
    (
        _c("uuid", "VARCHAR", False),
        _c("node", "VARCHAR", False),
        _c("gpu_index", "INTEGER", False),
        _c("model", "VARCHAR", False, "canonical model, e.g. H100-80GB"),
        _c("model_name", "VARCHAR", doc="modelName as dcgm-exporter reports it"),
        _c("memory_mib", "DOUBLE"),
        _c("pool", "VARCHAR"),
        _c("sharing_mode", "VARCHAR", False, "exclusive | mig | timeslice | vgpu"),
        _c("replicas", "INTEGER", doc="time-slicing replicas per card"),
        _c("first_seen", TS, merge="earliest"),
        _c("last_seen", TS, merge="latest"),
    ),
    key=("uuid",),
)

NODES = TableSpec(
    "nodes", "dimension",
    (
        _c("node", "VARCHAR", False),
        _c("pool", "VARCHAR"),
        _c("model", "VARCHAR"),
        _c("gpu_count", "INTEGER"),
        _c("sharing_mode", "VARCHAR"),
        _c("replicas", "INTEGER"),
        _c("mig_config", "VARCHAR", doc="nvidia.com/mig.config"),
        _c("mig_config_state", "VARCHAR", doc="nvidia.com/mig.config.state"),
        _c("labels", "JSON"),
        _c("capacity", "JSON"),
        _c("allocatable", "JSON"),
        _c("resource_version", "VARCHAR"),
        _c("observed_at", TS),
    ),
    key=("node",),
)

NAMESPACES = TableSpec(
    "namespaces", "dimension",
    (
        _c("namespace", "VARCHAR", False),
        _c("team", "VARCHAR", doc="value of the team label; NULL when unlabeled"),
        _c("labels", "JSON"),
        _c("observed_at", TS),
    ),
    key=("namespace",),
)

MIG_INSTANCES = TableSpec(
    "mig_instances", "interval",
    (
        _c("uuid", "VARCHAR", False),
        _c("gpu_i_id", "INTEGER", False),
        _c("profile", "VARCHAR", False),
        _c("start_ts", TS, False),
        _c("end_ts", TS, False),
    ),
    key=("uuid", "gpu_i_id", "profile"),
    doc="MIG instances as seen over time; a reconfiguration ends one span and starts another.",
)

PODS = TableSpec(
    "pods", "interval",
    (
        _c("namespace", "VARCHAR", False),
        _c("pod", "VARCHAR", False),
        _c("node", "VARCHAR"),
        _c("queue", "VARCHAR", doc="kueue.x-k8s.io/queue-name"),
        _c("owner_kind", "VARCHAR"),
        _c("owner_name", "VARCHAR"),
        _c("gpu_requests", "JSON", doc="resource name -> amount, e.g. {\"nvidia.com/gpu\": 1}"),
        _c("labels", "JSON"),
        _c("start_ts", TS, False),
        _c("end_ts", TS, False),
    ),
    key=("namespace", "pod"),
    doc="Pods that requested GPU resources, with their observed lifetime.",
)

ALLOCATIONS = TableSpec(
    "allocations", "timeseries",
    (
        _c("ts", TS, False, "interval start (intervals are split at UTC midnight)"),
        _c("end_ts", TS, False),
        _c("uuid", "VARCHAR", False),
        _c("gpu_i_id", "INTEGER", False),
        _c("vgpu", "VARCHAR"),
        _c("node", "VARCHAR", False),
        _c("namespace", "VARCHAR"),
        _c("pod", "VARCHAR"),
        _c("sharing_mode", "VARCHAR", False),
        _c("share", "DOUBLE", False, "fraction of the card held"),
        _c("queue", "VARCHAR"),
    ),
    key=("ts", "uuid", "gpu_i_id", "vgpu"),
    doc="Who held which device when, as half-open intervals (derived by analytics).",
)

CARD_HOURS_HOURLY = TableSpec(
    "card_hours_hourly", "timeseries",
    (
        _c("ts", TS, False, "hour start"),
        _c("uuid", "VARCHAR", False),
        _c("gpu_i_id", "INTEGER", False),
        _c("vgpu", "VARCHAR"),
        _c("profile", "VARCHAR", doc="MIG profile of the instance; NULL for a whole card"),
        _c("node", "VARCHAR", False),
        _c("model", "VARCHAR", False),
        _c("pool", "VARCHAR"),
        _c("sharing_mode", "VARCHAR", False),
        _c("namespace", "VARCHAR"),
        _c("pod", "VARCHAR"),
        _c("queue", "VARCHAR"),
        _c("share", "DOUBLE", False),
        _c("held_hours", "DOUBLE", False, "wall hours the device was held in this hour"),
        _c("card_hours", "DOUBLE", False, "held_hours x share"),
        _c("idle_card_hours", "DOUBLE", False),
        _c("held_idle_card_hours", "DOUBLE", False, "idle card-hours with framebuffer in use"),
        _c("active_ratio", "DOUBLE"),
        _c("fb_used_max_mib", "DOUBLE"),
    ),
    key=("ts", "uuid", "gpu_i_id", "vgpu", "namespace", "pod"),
    doc="Hourly roll-up of card-hours; kept after raw samples age out.",
)

QUEUES = TableSpec(
    "queues", "dimension",
    (
        _c("kind", "VARCHAR", False, "ClusterQueue | LocalQueue | ResourceFlavor | Cohort"),
        _c("name", "VARCHAR", False),
        _c("namespace", "VARCHAR", False, "'' for cluster-scoped objects"),
        _c("cohort", "VARCHAR"),
        _c("spec", "JSON"),
        _c("resource_version", "VARCHAR"),
        _c("observed_at", TS),
    ),
    key=("kind", "namespace", "name"),
)

PRICE_BOOK = TableSpec(
    "price_book", "dimension",
    (
        _c("model", "VARCHAR", False), _c("effective_from", "DATE", False),
        _c("unit_price", "DOUBLE", False), _c("currency", "VARCHAR", False),
        _c("version", "VARCHAR", False),
    ),
    key=("model", "effective_from"),
)

PLANS = TableSpec(
    "plans", "dimension",
    (
        _c("plan_id", "VARCHAR", False),
        _c("kind", "VARCHAR", False, "mig | quota"),
        _c("status", "VARCHAR", False),
        _c("created_at", TS, False),
        _c("updated_at", TS, False),
        _c("fingerprint", "VARCHAR", False),
        _c("body", "JSON", False, "the frozen Plan as JSON"),
        _c("progress", "JSON", doc="actuator's per-step progress, for resuming"),
    ),
    key=("plan_id",),
)

AUDIT_LOG = TableSpec(
    "audit_log", "append",
    (
        _c("seq", "BIGINT", False),
        _c("occurred_at", TS, False),
        _c("actor", "VARCHAR", False),
        _c("plan_id", "VARCHAR"),
        _c("action", "VARCHAR", False),
        _c("object", "VARCHAR"),
        _c("before_state", "JSON"),
        _c("after_state", "JSON"),
        _c("result", "VARCHAR", False),
        _c("detail", "VARCHAR"),
    ),
)

WATERMARKS = TableSpec(
    "watermarks", "dimension",
    (
        _c("source", "VARCHAR", False),
        _c("watermark", TS, False, "everything before this instant is loaded"),
        _c("updated_at", TS, False),
    ),
    key=("source",),
)

REPORT_ISSUES = TableSpec(
    "report_issues", "dimension",
    (
        _c("period", "VARCHAR", False), _c("version", "INTEGER", False),
        _c("finalized_at", TS, False), _c("manifest_sha256", "VARCHAR", False),
        _c("inputs_sha256", "VARCHAR", False), _c("fleet_cost", "DOUBLE", False),
        _c("reason", "VARCHAR"), _c("path", "VARCHAR"),
    ),
    key=("period", "version"),
)

REPORT_LINES = TableSpec(
    "report_lines", "dimension",
    (
        _c("period", "VARCHAR", False, "the issued report's period (YYYY-MM)"),
        _c("version", "INTEGER", False, "the issue's version (1 = first finalize)"),
        _c("line_no", "INTEGER", False),
        _c("line", "VARCHAR", False, "team | unallocated | unattributed | sharing_discount | adjustment"),
        _c("for_period", "VARCHAR", False, "month the amounts belong to (earlier for an adjustment)"),
        _c("team", "VARCHAR"),
        _c("model", "VARCHAR"),
        _c("sharing_mode", "VARCHAR"),
        _c("card_hours", "DOUBLE", False),
        _c("list_cost", "DOUBLE", False),
        _c("sharing_discount", "DOUBLE", False),
        _c("utilization_adjustment", "DOUBLE", False),
        _c("redistributed_cost", "DOUBLE", False),
        _c("cost", "DOUBLE", False),
        _c("idle_card_hours", "DOUBLE", False),
        _c("idle_cost", "DOUBLE", False),
    ),
    key=("period", "version", "line_no"),
    doc="The summary lines of each finalized report issue: the baseline late data is measured against.",
)

REPORT_INTENTS = TableSpec(
    "report_intents", "dimension",
    (
        _c("period", "VARCHAR", False), _c("version", "INTEGER", False),
        _c("recorded_at", TS, False, "when finalize sealed the folder, before renaming it"),
        _c("manifest_sha256", "VARCHAR", False), _c("inputs_sha256", "VARCHAR", False),
        _c("signature", "VARCHAR", doc="HMAC-SHA256 of the manifest; NULL when unsigned"),
        _c("previous_manifest_sha256", "VARCHAR", doc="the chain: the issue recorded before"),
        _c("coverage", "DOUBLE", doc="share of the month's hours with samples"),
        _c("path", "VARCHAR"),
    ),
    key=("period", "version"),
    doc="Recorded before the rename: crash recovery adopts only folders matching an intent.",
)

TABLES: dict[str, TableSpec] = {
    t.name: t
    for t in (
        GPU_SAMPLES, TOKEN_SAMPLES, QUEUE_SAMPLES, GPUS, NODES, NAMESPACES, MIG_INSTANCES, PODS,
        ALLOCATIONS, CARD_HOURS_HOURLY, QUEUES, PRICE_BOOK, PLANS, AUDIT_LOG, WATERMARKS,
        REPORT_ISSUES, REPORT_LINES, REPORT_INTENTS,
    )
}

_POLARS_TYPES = {
    "VARCHAR": "String", "INTEGER": "Int32", "BIGINT": "Int64", "DOUBLE": "Float64",
    "DATE": "Date", "JSON": "String",
}


def polars_schema(spec: TableSpec) -> dict[str, Any]:
    """The Polars schema of a table's frame (JSON columns travel as strings)."""
    import polars as pl

    out: dict[str, Any] = {}
    for col in spec.columns:
        if col.type == TS:
            out[col.name] = pl.Datetime("us", "UTC")
        else:
            out[col.name] = getattr(pl, _POLARS_TYPES[col.type])
    return out
