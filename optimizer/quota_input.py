"""What the quota optimizer plans over: Kueue ClusterQueues, capacity and demand history.

ClusterQueues are Kueue `v1beta2` objects (or their `spec`): `cohortName`,
`fairSharing.weight`, and `resourceGroups[].flavors[].resources[]` with `nominalQuota`,
`borrowingLimit`, `lendingLimit`. Capacity per (cohort, flavor, resource) is given explicitly or,
by default, the sum of the current nominal quotas in the cohort (plans then move quota between
queues at equal capacity). Only GPU resources (`nvidia.com/gpu`, `nvidia.com/mig-*`) are
planned; cpu, memory and the like are left exactly as they are. Demand history is one row per
(time, queue, flavor, resource) with the amount admitted plus pending, in resource units.

Sources: a queues file (`--queues`, YAML) plus a history CSV (`--history`), or the warehouse
(tables `queues`, `queue_samples`, `pods`, `namespaces`); see `docs/guide/optimizer.md`.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
import yaml

from gpuledger.core.errors import InputError
from gpuledger.optimizer.plan_render import duration_text

if TYPE_CHECKING:
    from gpuledger.warehouse import Warehouse

Key = tuple[str, str]
"""(flavor, resource)."""
GPU = "nvidia.com/gpu"


@dataclass(frozen=True, slots=True)
class Quota:
    nominal: float
    borrowing_limit: float | None = None
    lending_limit: float | None = None


@dataclass(frozen=True)
class QueueSpec:
    """One ClusterQueue: its cohort, fair-sharing weight and quota per (flavor, resource)."""

    name: str
    cohort: str | None
    weight: float
    quotas: Mapping[Key, Quota]
    resource_groups: tuple[dict[str, Any], ...]
    resource_version: str | None = None
    team: str | None = None

    @property
    def pool(self) -> str:
        """Queues without a cohort share with nobody: each is its own pool."""
        return self.cohort or f"(no cohort: {self.name})"


@dataclass(frozen=True)
class QuotaInputs:
    queues: tuple[QueueSpec, ...]
    capacity: Mapping[tuple[str, str, str], float]
    history: pl.DataFrame
    step: timedelta
    guaranteed: Mapping[str, int] = field(default_factory=dict)
    source: str = "file"

    def queue(self, name: str) -> QueueSpec:
        for q in self.queues:
            if q.name == name:
                return q
        raise InputError(f"ClusterQueue {name!r} is not among the inputs")


# 1. Quantities and ClusterQueue objects ---------------------------------------------------------
_QUANTITY = re.compile(r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(m|k|M|G|Ki|Mi|Gi)?$")
_SUFFIX = {None: 1.0, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "Ki": 1024.0, "Mi": 1024.0**2,
           "Gi": 1024.0**3}


def parse_quantity(value: Any, where: str) -> float:
    if isinstance(value, bool) or value is None:
        raise InputError(f"{where}: expected a quantity, got {value!r}")
    if isinstance(value, int | float):
        return float(value)
    match = _QUANTITY.match(str(value).strip())
    if not match:
        raise InputError(f"{where}: {value!r} is not a Kubernetes quantity (e.g. 8, 500m)")
    return float(match.group(1)) * _SUFFIX[match.group(2)]


def queue_from_object(obj: Mapping[str, Any], where: str) -> QueueSpec:
    """A ClusterQueue object (or a mapping with `name` and `spec`) → QueueSpec."""
    meta = obj.get("metadata") or {}
    name = meta.get("name") or obj.get("name")
    if not name:
        raise InputError(f"{where}: a ClusterQueue needs metadata.name")
    spec = obj.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise InputError(f"{where}: ClusterQueue {name}: spec must be a mapping")
    weight_raw = (spec.get("fairSharing") or {}).get("weight", 1)
    weight = parse_quantity(weight_raw, f"{where}: ClusterQueue {name} fairSharing.weight")
    quotas: dict[Key, Quota] = {}
    groups = spec.get("resourceGroups") or []
    if not isinstance(groups, list):
        raise InputError(f"{where}: ClusterQueue {name}: resourceGroups must be a list")
    for g, group in enumerate(groups):
        for flavor in group.get("flavors") or []:
            fname = flavor.get("name")
            for res in flavor.get("resources") or []:
                if not is_gpu_resource(str(res.get("name"))):
                    continue  # cpu, memory, ...: not planned, left exactly as they are
                rwhere = f"{where}: ClusterQueue {name} resourceGroups[{g}] flavor {fname} {res.get('name')}"
                if "nominalQuota" not in res:
                    raise InputError(f"{rwhere}: nominalQuota is required")
                quotas[(str(fname), str(res["name"]))] = Quota(
                    nominal=parse_quantity(res["nominalQuota"], rwhere + " nominalQuota"),
                    borrowing_limit=_optional(res.get("borrowingLimit"), rwhere + " borrowingLimit"),
                    lending_limit=_optional(res.get("lendingLimit"), rwhere + " lendingLimit"),
                )
    return QueueSpec(
        name=str(name), cohort=spec.get("cohortName"), weight=weight, quotas=quotas,
        resource_groups=tuple(groups), resource_version=meta.get("resourceVersion"),
        team=obj.get("team"),
    )


def is_gpu_resource(name: str) -> bool:
    """Resources the quota optimizer plans: whole GPUs and MIG instances."""
    return name == GPU or name.startswith("nvidia.com/mig-")


def _optional(value: Any, where: str) -> float | None:
    return None if value is None else parse_quantity(value, where)


def default_capacity(queues: Sequence[QueueSpec]) -> dict[tuple[str, str, str], float]:
    """Sum of current nominal quotas per (cohort, flavor, resource)."""
    cap: dict[tuple[str, str, str], float] = defaultdict(float)
    for q in queues:
        for (f, r), quota in q.quotas.items():
            cap[(q.pool, f, r)] += quota.nominal
    return dict(cap)


def check_history(frame: pl.DataFrame, where: str) -> tuple[pl.DataFrame, timedelta]:
    """Validate columns, sort, and infer the sampling step."""
    need = ["ts", "cluster_queue", "flavor", "resource", "demand"]
    missing = [c for c in need if c not in frame.columns]
    if missing:
        raise InputError(f"{where}: history is missing columns {', '.join(missing)} "
                         f"(expected {', '.join(need)})")
    if frame.is_empty():
        raise InputError(f"{where}: the demand history is empty")
    out = frame.select(
        pl.col("ts").cast(pl.Datetime("us", "UTC")), pl.col("cluster_queue").cast(pl.String),
        pl.col("flavor").cast(pl.String), pl.col("resource").cast(pl.String),
        pl.col("demand").cast(pl.Float64).fill_null(0.0),
    ).sort("ts")
    if (out["demand"] < 0).any():
        raise InputError(f"{where}: demand must not be negative")
    times = out["ts"].unique().sort()
    if times.len() < 2:
        raise InputError(f"{where}: the demand history needs at least two sample times")
    step = times.diff().drop_nulls().median()
    assert isinstance(step, timedelta)
    return out, step


# 2. Files -------------------------------------------------------------------------------------
def load_quota_inputs(
    queues_path: Path, history_path: Path | None, *, guaranteed: Mapping[str, int] | None = None
) -> QuotaInputs:
    """A queues file (YAML: `clusterQueues`, optional `capacity`, `teams`) and a history CSV."""
    try:
        data = yaml.safe_load(queues_path.read_text())
    except OSError as exc:
        raise InputError(f"{queues_path}: cannot read the queues file ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        raise InputError(f"{queues_path}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    if not isinstance(data, Mapping) or not isinstance(data.get("clusterQueues"), list):
        raise InputError(f"{queues_path}: expected a mapping with a list 'clusterQueues'")
    queues = tuple(
        queue_from_object(obj, f"{queues_path}: clusterQueues[{i}]")
        for i, obj in enumerate(data["clusterQueues"])
    )
    teams = data.get("teams") or {}
    queues = tuple(_with_team(q, teams.get(q.name)) for q in queues)
    capacity = default_capacity(queues)
    for i, row in enumerate(data.get("capacity") or []):
        where = f"{queues_path}: capacity[{i}]"
        if not isinstance(row, Mapping) or not {"flavor", "resource", "amount"} <= set(row):
            raise InputError(f"{where}: expected cohort, flavor, resource, amount")
        users = [q.pool for q in queues if (row["flavor"], row["resource"]) in q.quotas]
        cohort = row.get("cohort") or (users[0] if users else None)
        if cohort is None:
            raise InputError(f"{where}: no ClusterQueue uses flavor {row['flavor']} for {row['resource']}")
        amount = parse_quantity(row["amount"], where)
        capacity[(str(cohort), str(row["flavor"]), str(row["resource"]))] = amount
    if history_path is None:
        raise InputError(f"{queues_path}: --queues needs --history (a CSV of ts, cluster_queue, flavor, "
                         "resource, demand)")
    try:
        raw = pl.read_csv(history_path, try_parse_dates=True)
    except (OSError, pl.exceptions.PolarsError) as exc:
        first = str(exc).splitlines()[0]
        raise InputError(f"{history_path}: cannot read the history CSV ({first})") from None
    history, step = check_history(raw, str(history_path))
    gmins = {**(data.get("guaranteed") or {}), **(guaranteed or {})}
    return QuotaInputs(queues, capacity, history, step, {str(k): int(v) for k, v in gmins.items()},
                       f"{queues_path} + {history_path}")


def _with_team(q: QueueSpec, team: str | None) -> QueueSpec:
    if team is None:
        return q
    return QueueSpec(q.name, q.cohort, q.weight, q.quotas, q.resource_groups, q.resource_version, team)


# 3. The warehouse -------------------------------------------------------------------------------
def quota_inputs_from_warehouse(wh: Warehouse, lookback: timedelta,
                                guaranteed: Mapping[str, int] | None = None) -> QuotaInputs:
    """ClusterQueues from table `queues`, demand from `queue_samples` over `lookback`.

    Kueue reports pending work per ClusterQueue as a number of workloads without a flavor; it
    is turned into resource units with the queue's mean pod request and spread over the queue's
    (flavor, resource) pairs in proportion to their usage in the window.
    """
    frame = wh.query(
        "SELECT name, spec, resource_version FROM queues WHERE kind = 'ClusterQueue' ORDER BY name"
    )
    if frame.is_empty():
        raise InputError(
            f"{wh.path}: no ClusterQueues in table queues; collect Kueue objects or pass --queues"
        )
    teams = _queue_teams(wh)
    queues = tuple(
        _with_team(
            queue_from_object(
                {"metadata": {"name": r["name"], "resourceVersion": r["resource_version"]},
                 "spec": json.loads(r["spec"] or "{}")},
                f"{wh.path}: queues",
            ),
            teams.get(r["name"]),
        )
        for r in frame.iter_rows(named=True)
    )
    last = wh.scalar("SELECT max(ts) FROM queue_samples")
    if last is None:
        raise InputError(f"{wh.path}: table queue_samples is empty; no demand history (pass --history)")
    samples = wh.query(
        "SELECT ts, cluster_queue, flavor, resource, usage, pending_workloads FROM queue_samples "
        "WHERE ts > ? ORDER BY ts", [last - lookback],
    )
    sizes = _mean_request(wh)
    share = samples.group_by("cluster_queue", "flavor", "resource").agg(pl.col("usage").sum().alias("u"))
    share = share.with_columns(
        (pl.col("u") / pl.col("u").sum().over("cluster_queue")).fill_nan(None).alias("share"),
        (1.0 / pl.len().over("cluster_queue")).alias("even"),
    ).select("cluster_queue", "flavor", "resource", pl.coalesce("share", "even").alias("share"))
    history = samples.join(share, on=["cluster_queue", "flavor", "resource"], how="left").with_columns(
        (pl.col("usage").fill_null(0.0)
         + pl.col("pending_workloads").fill_null(0.0)
         * pl.col("cluster_queue").replace_strict(sizes, default=1.0, return_dtype=pl.Float64)
         * pl.col("share").fill_null(0.0)).alias("demand")
    ).select("ts", "cluster_queue", "flavor", "resource", "demand")
    checked, step = check_history(history, f"{wh.path}: queue_samples")
    source = f"warehouse {wh.path} (last {duration_text(lookback)} of queue_samples)"
    return QuotaInputs(queues, default_capacity(queues), checked, step, dict(guaranteed or {}), source)


def _queue_teams(wh: Warehouse) -> dict[str, str]:
    """ClusterQueue → team, through LocalQueues and their namespaces' team label."""
    frame = wh.query(
        "SELECT q.spec, n.team FROM queues q JOIN namespaces n ON n.namespace = q.namespace "
        "WHERE q.kind = 'LocalQueue' AND n.team IS NOT NULL"
    )
    teams: dict[str, set[str]] = defaultdict(set)
    for r in frame.iter_rows(named=True):
        cq = (json.loads(r["spec"] or "{}")).get("clusterQueue")
        if cq:
            teams[cq].add(r["team"])
    return {cq: next(iter(t)) for cq, t in teams.items() if len(t) == 1}


def _mean_request(wh: Warehouse) -> dict[str, float]:
    """Mean request per pod of each ClusterQueue in whole GPUs or MIG instances (HAMi's
    `gpumem`/`gpucores` are not counts and are left out), through its LocalQueues."""
    frame = wh.query(
        "SELECT q.spec, p.gpu_requests FROM pods p JOIN queues q ON q.kind = 'LocalQueue' "
        "AND q.namespace = p.namespace AND q.name = p.queue WHERE p.gpu_requests IS NOT NULL"
    )
    totals: dict[str, list[float]] = defaultdict(list)
    for r in frame.iter_rows(named=True):
        cq = (json.loads(r["spec"] or "{}")).get("clusterQueue")
        requests = json.loads(r["gpu_requests"] or "{}")
        amount = sum(float(v) for k, v in requests.items()
                     if isinstance(v, int | float) and (k == GPU or k.startswith("nvidia.com/mig-")))
        if cq and amount > 0:
            totals[cq].append(amount)
    return {cq: sum(v) / len(v) for cq, v in totals.items()}
