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

from gpuledger.core.frames_dra import DRA_TABLES
from gpuledger.core.frames_hami import HAMI_TABLES
from gpuledger.core.frames_ledger import (
    AUDIT_LOG,
    PLANS,
    REPORT_INTENTS,
    REPORT_ISSUES,
    REPORT_LINES,
    WATERMARKS,
)
from gpuledger.core.frames_pending import PENDING_TABLES
from gpuledger.core.frames_preemption import POD_PRIORITIES, PREEMPTIONS
from gpuledger.core.table_spec import (
    TS,
    WHOLE_GPU,
    Column,
    LoadKind,
    MergeRule,
    TableSpec,
    polars_schema,
)
from gpuledger.core.table_spec import col as _c

__all__ = [  # what other modules import from here besides the declarations below
    "AUDIT_LOG", "PLANS", "REPORT_INTENTS", "REPORT_ISSUES", "REPORT_LINES", "TABLES", "TS",
    "WATERMARKS", "WHOLE_GPU", "Column", "LoadKind", "MergeRule", "TableSpec", "polars_schema",
]

_RULES_DOC = (
    "rollup fingerprint of the rules the row was computed under (`core.rules`, decision 0147; the "
    "full rules in `rule_sets`); NULL: computed before v010, rules not recorded"
)

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
        _c("num_requests_waiting", "DOUBLE", doc="gauge: requests queued (autoscaling advice)"),
        _c("num_requests_running", "DOUBLE", doc="gauge: requests in the running batch"),
    ),
    key=("ts", "namespace", "pod", "model_name"),
    doc="vLLM token counters and queue gauges per serving pod and model.",
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
        _c("valid_from", TS, doc="since when the labels held, where the source says (a Prometheus "
           "chunk's start: its labels are the chunk's); NULL: from `observed_at` (v014)"),
    ),
    key=("node",),
    doc="Each node as last collected (the `now` readers); per-hour readers use `node_history`.",
)

NODE_CONFIG_COLUMNS: tuple[str, ...] = (
    "pool", "model", "gpu_count", "sharing_mode", "replicas", "mig_config", "mig_config_state",
)
"""The `nodes` columns besides `labels` that are configuration: kept with their validity
interval in `node_history` (`warehouse.node_history` rule 2)."""


def _history_of(spec: TableSpec, name: str, config: tuple[str, ...], valid_from: str, doc: str) -> TableSpec:
    """A dimension's history table: its key, `valid_from`, its configuration columns `config`,
    `labels` and `observed_at`, each as the dimension declares it (one declaration per column)."""
    by_name = {c.name: c for c in spec.columns}
    key = spec.key[0]
    return TableSpec(
        name, "dimension",
        (by_name[key], _c("valid_from", TS, False, valid_from),
         *(by_name[c] for c in (*config, "labels", "observed_at"))),
        key=(key, "valid_from"), doc=doc,
    )


NODE_HISTORY = _history_of(
    NODES, "node_history", NODE_CONFIG_COLUMNS,
    "the configuration holds from here to the node's next row; a node's first row stands for the "
    "time before it too (nothing earlier is known)",
    "Node configuration with its validity interval, written by every `nodes` load when it "
    "differs from the one in force at its `valid_from` (`warehouse.node_history`, v014).",
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
    doc="Each namespace as last observed (the `now` readers); the bill reads `namespace_history`.",
)

NAMESPACE_CONFIG_COLUMNS: tuple[str, ...] = ("team",)
"""The `namespaces` columns besides `labels` kept with their validity interval in
`namespace_history` (`warehouse.namespace_history` rule 2)."""

NAMESPACE_HISTORY = _history_of(
    NAMESPACES, "namespace_history", NAMESPACE_CONFIG_COLUMNS,
    "the team holds from here to the namespace's next row; a namespace's first row stands for the "
    "time before it too (nothing earlier is known)",
    "Namespace team labels with their validity interval, written by every `namespaces` load "
    "when they differ from the ones in force at its time (`warehouse.namespace_history`, v015).",
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
        _c("rules", "VARCHAR", doc=_RULES_DOC),
    ),
    key=("ts", "uuid", "gpu_i_id", "vgpu", "namespace", "pod"),
    doc="Who held which device when, as half-open intervals (derived by analytics); a HAMi card "
        "has several holders at once (one row each), so the holder is part of the key.",
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
        _c("rules", "VARCHAR", doc=_RULES_DOC),
    ),
    key=("ts", "uuid", "gpu_i_id", "vgpu", "namespace", "pod"),
    doc="Hourly roll-up of card-hours; kept after raw samples age out.",
)

CARD_HOURS_DAILY = TableSpec(
    "card_hours_daily", "timeseries",
    (
        _c("ts", TS, False, "UTC day start"),
        _c("uuid", "VARCHAR", False),
        _c("gpu_i_id", "INTEGER", False),
        _c("vgpu", "VARCHAR"),
        _c("profile", "VARCHAR"),
        _c("namespace", "VARCHAR"),
        _c("pod", "VARCHAR"),
        _c("node", "VARCHAR", False),
        _c("model", "VARCHAR", False),
        _c("pool", "VARCHAR"),
        _c("sharing_mode", "VARCHAR", False),
        _c("queue", "VARCHAR"),
        _c("held_hours", "DOUBLE", False),
        _c("card_hours", "DOUBLE", False),
        _c("idle_card_hours", "DOUBLE", False),
        _c("held_idle_card_hours", "DOUBLE", False),
        _c("card_active", "DOUBLE", doc="sum of card_hours x active_ratio over the hours that know it"),
        _c("card_unknown", "DOUBLE", doc="card_hours of the hours with no activity reading"),
        _c("held_active", "DOUBLE", doc="sum of held_hours x active_ratio"),
        _c("held_known", "DOUBLE", doc="held_hours of the hours with an activity reading"),
        _c("fb_used_max_mib", "DOUBLE"),
    ),
    key=("ts", "uuid", "gpu_i_id", "vgpu", "profile", "namespace", "pod", "node", "model", "pool",
         "sharing_mode", "queue"),
    doc="`card_hours_hourly` summed per UTC day and row name (derived: the warehouse rewrites a "
        "day's rows whenever a load writes any hour of it, docs/decisions/0236); bills read whole "
        "days from it.",
)

ROLLUP_HOURS = TableSpec(
    "rollup_hours", "timeseries",
    (
        _c("ts", TS, False, "hour start"),
        _c("rules", "VARCHAR", False, "rollup fingerprint of the rules the hour was rolled up under"),
    ),
    key=("ts",),
    doc="One row per rolled-up hour, written with its `card_hours_hourly` and `allocations` rows: "
    "what a bill reads to learn the roll-up's rules without scanning the roll-up (0147). An hour "
    "the roll-up holds without a row here was rolled up before rules were recorded.",
)

RULE_SETS = TableSpec(
    "rule_sets", "dimension",
    (
        _c("fingerprint", "VARCHAR", False, "`core.rules.Rules.rollup_fingerprint`"),
        _c("rules", "JSON", False, "the full rules (`Rules.to_json`), to name and describe them"),
        _c("first_used", TS, False, "the earliest hour stored under them", merge="earliest"),
    ),
    key=("fingerprint",),
    doc="Every rule set a stored fact was computed under, by fingerprint.",
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

TABLES: dict[str, TableSpec] = {
    t.name: t
    for t in (
        GPU_SAMPLES, TOKEN_SAMPLES, QUEUE_SAMPLES, GPUS, NODES, NODE_HISTORY, NAMESPACES, NAMESPACE_HISTORY,
        MIG_INSTANCES, PODS,
        ALLOCATIONS, CARD_HOURS_HOURLY, CARD_HOURS_DAILY, ROLLUP_HOURS, RULE_SETS, QUEUES, PRICE_BOOK,
        PLANS, AUDIT_LOG,
        WATERMARKS, REPORT_ISSUES, REPORT_LINES, REPORT_INTENTS, *DRA_TABLES, POD_PRIORITIES, PREEMPTIONS,
        *HAMI_TABLES, *PENDING_TABLES,
    )
}
