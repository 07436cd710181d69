"""Read queries behind the dashboard pages: inventory, heatmap roll-up, MIG holders, Kueue
series, namespaces and the audit log.

Why here: only `warehouse/` speaks SQL, so the dashboard (which runs on a snapshot of the file)
asks for these by name. Each function takes anything with the warehouse's read methods
(`warehouse.protocols.ReadableWarehouse`), passes request values as parameters (never pasted
into SQL) and returns a Polars frame whose columns are listed in its docstring. Shares, the
activity rule and team rules are not computed here: the callers take them from analytics.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from gpuledger.warehouse.utc_sql import HOUR_US, utc_floor

if TYPE_CHECKING:
    import polars as pl

    from gpuledger.warehouse.protocols import ReadableWarehouse

HOLDER_LOOKBACK = timedelta(minutes=15)
"""A MIG instance's holder is the pod on its last sample this long before the moment asked."""
GPU_RESOURCE = "nvidia.com/gpu"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"


def node_table(wh: ReadableWarehouse) -> pl.DataFrame:
    """`node, pool, model, gpu_count, sharing_mode, mig_config, mig_config_state`, by node."""
    return wh.query(
        "SELECT node, pool, model, gpu_count, sharing_mode, mig_config, mig_config_state"
        " FROM nodes ORDER BY node"
    )


def node_labels(wh: ReadableWarehouse) -> pl.DataFrame:
    """`node, model, labels` (the node's labels as JSON text, or NULL), by node."""
    return wh.query("SELECT node, model, CAST(labels AS VARCHAR) AS labels FROM nodes ORDER BY node")


def gpu_table(wh: ReadableWarehouse) -> pl.DataFrame:
    """`uuid, node, gpu_index, model, pool, sharing_mode`, by node and index."""
    return wh.query(
        "SELECT uuid, node, gpu_index, model, pool, sharing_mode FROM gpus ORDER BY node, gpu_index"
    )


def rollup_active_card_hours(wh: ReadableWarehouse, start: datetime, end: datetime) -> pl.DataFrame:
    """`uuid, node, hour, active_card_hours` from the stored roll-up in `[start, end)`: per card
    and hour, Σ card-hours × active ratio (a holder without an activity reading counts 0)."""
    return wh.query(
        "SELECT uuid, node, ts AS hour, sum(card_hours * coalesce(active_ratio, 0)) AS active_card_hours"
        " FROM card_hours_hourly WHERE ts >= ? AND ts < ? GROUP BY uuid, node, ts",
        [start, end],
    )


def mig_instances_at(
    wh: ReadableWarehouse, at: datetime, lookback: timedelta = HOLDER_LOOKBACK
) -> pl.DataFrame:
    """MIG instances alive at `at` with their holder: `node, gpu_index, model, uuid, gpu_i_id,
    profile, namespace, pod` (NULL when nobody held it in `lookback`). The holder's team at `at`
    is the namespace history's (`analytics.teams.namespaces.with_teams_at`), not today's."""
    return wh.query(
        "WITH inst AS (SELECT uuid, gpu_i_id, profile FROM mig_instances"
        "   WHERE start_ts <= $at AND end_ts > $at),"
        " holder AS (SELECT uuid, gpu_i_id, arg_max(namespace, ts) AS namespace,"
        "   arg_max(pod, ts) AS pod FROM gpu_samples"
        "   WHERE ts > $since AND ts <= $at AND gpu_i_id >= 0 GROUP BY ALL)"
        " SELECT g.node, g.gpu_index, g.model, i.uuid, i.gpu_i_id, i.profile,"
        "   h.namespace, h.pod"
        " FROM inst i JOIN gpus g USING (uuid)"
        " LEFT JOIN holder h ON h.uuid = i.uuid AND h.gpu_i_id = i.gpu_i_id"
        " ORDER BY g.node, g.gpu_index, i.gpu_i_id",
        {"at": at, "since": at - lookback},
    )


def unlabeled_namespaces(wh: ReadableWarehouse) -> pl.DataFrame:
    """`namespace, observed_at` of namespaces stored without a team, by name."""
    return wh.query("SELECT namespace, observed_at FROM namespaces WHERE team IS NULL ORDER BY namespace")


def team_namespace_rows(wh: ReadableWarehouse) -> pl.DataFrame:
    """`team, namespace` of namespaces stored with a team, by team then namespace."""
    return wh.query("SELECT team, namespace FROM namespaces WHERE team IS NOT NULL ORDER BY 1, 2")


def queue_gpu_resources(wh: ReadableWarehouse, start: datetime, end: datetime) -> pl.DataFrame:
    """`flavor, resource` pairs with Kueue samples in `[start, end)` that count GPUs (whole
    `nvidia.com/gpu` or a MIG profile), sorted."""
    return wh.query(
        "SELECT DISTINCT flavor, resource FROM queue_samples WHERE ts >= ? AND ts < ?"
        " AND (resource = ? OR starts_with(resource, ?)) ORDER BY flavor, resource",
        [start, end, GPU_RESOURCE, MIG_RESOURCE_PREFIX],
    )


def queue_hourly(
    wh: ReadableWarehouse, start: datetime, end: datetime, weights: Sequence[tuple[str, str, float]]
) -> pl.DataFrame:
    """Kueue samples per ClusterQueue and hour in GPU-equivalents, in `[start, end)`.

    `weights` gives each `(flavor, resource, GPUs per unit)`; samples of pairs not listed are
    left out. Quota and usage are summed over flavors and resources at each sample time;
    pending workloads and admission wait are per ClusterQueue (repeated on each row), so the
    max is taken. Columns: `cluster_queue, hour, nominal_quota, usage, usage_max,
    pending_workloads, admission_wait_s, borrowed` (hourly means; `usage_max` the peak).
    """
    return wh.query(
        "WITH w AS (SELECT unnest($flavors) AS flavor, unnest($resources) AS resource,"
        "   unnest($weights) AS w),"
        " weighted AS (SELECT q.*, w.w FROM queue_samples q JOIN w USING (flavor, resource)"
        "   WHERE q.ts >= $start AND q.ts < $end),"
        " per_ts AS (SELECT ts, cluster_queue, sum(nominal_quota * w) AS nominal_quota,"
        "   sum(usage * w) AS usage, max(pending_workloads) AS pending_workloads,"
        "   max(admission_wait_s) AS admission_wait_s"
        "   FROM weighted GROUP BY ts, cluster_queue)"
        f" SELECT cluster_queue, {utc_floor('ts', HOUR_US)} AS hour,"
        "   avg(nominal_quota) AS nominal_quota, avg(usage) AS usage,"
        "   max(usage) AS usage_max, avg(pending_workloads) AS pending_workloads,"
        "   avg(admission_wait_s) AS admission_wait_s,"
        "   avg(greatest(usage - nominal_quota, 0)) AS borrowed"
        " FROM per_ts GROUP BY ALL ORDER BY cluster_queue, hour",
        {
            "flavors": [f for f, _, _ in weights] or [""],
            "resources": [r for _, r, _ in weights] or [""],
            "weights": [float(w) for _, _, w in weights] or [0.0],
            "start": start,
            "end": end,
        },
    )


def resource_flavor_rows(wh: ReadableWarehouse) -> pl.DataFrame:
    """`name, spec` (JSON text; `nodeLabels` select the flavor's nodes) of every ResourceFlavor."""
    return wh.query(
        "SELECT name, CAST(spec AS VARCHAR) AS spec FROM queues WHERE kind = 'ResourceFlavor' ORDER BY name"
    )


def cluster_queue_rows(wh: ReadableWarehouse) -> pl.DataFrame:
    """`name, cohort, spec` of every ClusterQueue, by name."""
    return wh.query("SELECT name, cohort, spec FROM queues WHERE kind = 'ClusterQueue' ORDER BY name")


def audit_records(wh: ReadableWarehouse, limit: int, plan_id: str | None = None) -> pl.DataFrame:
    """The newest `limit` audit records (of one plan when `plan_id` is given), newest first:
    `seq, occurred_at, actor, plan_id, action, object, result, detail`."""
    where, params = "", []
    if plan_id is not None:
        where, params = "WHERE plan_id = ?", [plan_id]
    return wh.query(
        "SELECT seq, occurred_at, actor, plan_id, action, object, result, detail"
        f" FROM audit_log {where} ORDER BY seq DESC LIMIT ?",
        [*params, limit],
    )
