"""What the quota optimizer plans over: queues, capacity and demand history.

The planning model is neutral about the queue system: a `QueueSpec` is a queue with a cohort,
a fair-sharing weight and a quota per (flavor, resource). The queue system's own object shape
(Kueue ClusterQueues today) is read and re-written by its `QuotaReader`
(`optimizer.quota.queues.<system>`). Capacity per (cohort, flavor, resource) is given explicitly or,
by default, the sum of the current nominal quotas in the cohort (plans then move quota between
queues at equal capacity). Only GPU resources (`nvidia.com/gpu`, `nvidia.com/mig-*`) are
planned. Demand history is one row per (time, queue, flavor, resource) with the amount
admitted plus pending, in resource units.

Sources: a queues file (`--queues`, YAML) plus a history CSV (`--history`), or the warehouse
(tables `queues`, `queue_samples`, `pods`, `namespaces`, read through
`warehouse.queries.optimizer`); see `docs/guide/optimizer.md`.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from gpuledger.core.errors import InputError
from gpuledger.core.queues import DEFAULT_QUEUE_SYSTEM
from gpuledger.core.yamlfile import load_yaml_file, refuse_unknown_keys
from gpuledger.optimizer.plan.render import duration_text
from gpuledger.optimizer.quota.demand import RESOLUTION, Demand, demand_from_sums, demand_of
from gpuledger.optimizer.quota.queues import QuotaReader, quota_reader
from gpuledger.optimizer.quota.spec import MAX_QUANTITY, QueueSpec, default_capacity, parse_quantity
from gpuledger.warehouse.queries.optimizer import (
    last_queue_sample,
    queue_objects,
    queue_sample_sums,
    queue_sample_times,
)

if TYPE_CHECKING:
    from gpuledger.warehouse import Warehouse

@dataclass(frozen=True)
class QuotaInputs:
    queues: tuple[QueueSpec, ...]
    capacity: Mapping[tuple[str, str, str], float]
    history: pl.DataFrame
    step: timedelta
    guaranteed: Mapping[str, int] = field(default_factory=dict)
    source: str = "file"
    queue_system: str = DEFAULT_QUEUE_SYSTEM
    """Whose `QuotaReader` reads and re-writes these queues' objects."""
    _demand: Demand | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def reader(self) -> QuotaReader:
        return quota_reader(self.queue_system)

    @property
    def demand(self) -> Demand:
        """The history as one dense grid at `step` (`optimizer.quota.demand`), built on first
        use; every planned series has a column, named in the history or not."""
        if self._demand is None:
            keys = [(q.name, f, r) for q in self.queues for f, r in q.quotas]
            object.__setattr__(self, "_demand", demand_of(self.history, self.step, keys))
        assert self._demand is not None
        return self._demand

    def with_demand(self, demand: Demand) -> QuotaInputs:
        """These inputs with `demand` as their history (its long form as `history`)."""
        return _seeded(replace(self, history=demand.frame(), step=demand.step), demand)

    def window(self, start: datetime | None = None, end: datetime | None = None) -> QuotaInputs:
        """These inputs with only the history's buckets starting in [start, end): a backtest
        origin's past, cut on the same grid (no re-bucketing)."""
        grid = self.demand.window(start, end)
        frame = self.history.filter((pl.col("ts") >= grid.start) & (pl.col("ts") < grid.end))
        return _seeded(replace(self, history=frame), grid)

    def queue(self, name: str) -> QueueSpec:
        for q in self.queues:
            if q.name == name:
                return q
        raise InputError(f"ClusterQueue {name!r} is not among the inputs")


def _seeded(inputs: QuotaInputs, demand: Demand) -> QuotaInputs:
    object.__setattr__(inputs, "_demand", demand)
    return inputs


HISTORY_COLUMNS = ("ts", "cluster_queue", "flavor", "resource", "demand")
_FILE_KEYS = ("capacity", "teams", "guaranteed")
_CAPACITY_KEYS = ("cohort", "flavor", "resource", "amount")


def check_history(frame: pl.DataFrame, where: str,
                  queues: tuple[QueueSpec, ...] | None = None) -> tuple[pl.DataFrame, timedelta]:
    """Validate columns, rows and (given `queues`) queue names; sort; infer the sampling step.

    Why so strict: a repeated (ts, queue, flavor, resource) row would be summed into demand
    nobody had, a queue the file does not define would be dropped from the forecast, and a NaN
    or 1e300 would turn the forecast itself into NaN.
    """
    missing = [c for c in HISTORY_COLUMNS if c not in frame.columns]
    if missing:
        raise InputError(f"{where}: history is missing columns {', '.join(missing)} "
                         f"(expected {', '.join(HISTORY_COLUMNS)})")
    refuse_unknown_keys(dict.fromkeys(frame.columns), HISTORY_COLUMNS, f"{where}: column")
    if frame.is_empty():
        raise InputError(f"{where}: the demand history is empty")
    try:
        out = frame.select(
            pl.col("ts").cast(pl.Datetime("us", "UTC")), pl.col("cluster_queue").cast(pl.String),
            pl.col("flavor").cast(pl.String), pl.col("resource").cast(pl.String),
            pl.col("demand").cast(pl.Float64).fill_null(0.0),
        ).sort("ts")
    except pl.exceptions.PolarsError as exc:
        first = " ".join(str(exc).split())[:200]
        raise InputError(f"{where}: history columns have the wrong types ({first})") from None
    _check_rows(out, where, queues)
    times = out["ts"].unique().sort()
    if times.len() < 2:
        raise InputError(f"{where}: the demand history needs at least two sample times")
    step = times.diff().drop_nulls().median()
    assert isinstance(step, timedelta)
    return out, step


def _check_rows(out: pl.DataFrame, where: str, queues: tuple[QueueSpec, ...] | None) -> None:
    for column in ("ts", "cluster_queue", "flavor", "resource"):
        if out[column].null_count():
            raise InputError(f"{where}: column {column} has empty or unreadable values")
    demand = out["demand"]
    if not demand.is_finite().all() or (demand < 0).any() or (demand > MAX_QUANTITY).any():
        raise InputError(f"{where}: demand must be a number from 0 to {MAX_QUANTITY:,.0f} "
                         "(no NaN or infinity)")
    keys = ["ts", "cluster_queue", "flavor", "resource"]
    repeated = out.filter(out.select(keys).is_duplicated())
    if not repeated.is_empty():
        r = repeated.row(0, named=True)
        raise InputError(f"{where}: row ({r['ts']}, {r['cluster_queue']}, {r['flavor']}, "
                         f"{r['resource']}) appears more than once")
    if queues is not None:
        known = {q.name for q in queues}
        unknown = sorted(set(out["cluster_queue"].unique().to_list()) - known)
        if unknown:
            raise InputError(f"{where}: history for queue {unknown[0]!r}, which the queues file "
                             f"does not define (queues: {', '.join(sorted(known))})")


# 2. Files -------------------------------------------------------------------------------------
def load_quota_inputs(
    queues_path: Path, history_path: Path | None, *, guaranteed: Mapping[str, int] | None = None,
    queue_system: str = DEFAULT_QUEUE_SYSTEM, dra: Collection[str] = (),
) -> QuotaInputs:
    """A queues file (YAML: the queue system's object list, for Kueue `clusterQueues`;
    optional `capacity`, `teams`, `guaranteed`) and a history CSV; `dra`: DRA quota resources
    planned besides GPUs (`queues.kueue_dra_resources`)."""
    reader = quota_reader(queue_system)
    data = load_yaml_file(queues_path, what="queues")
    key = reader.file_key
    if not isinstance(data, Mapping) or not isinstance(data.get(key), list):
        raise InputError(f"{queues_path}: expected a mapping with a list '{key}'")
    refuse_unknown_keys(data, (key, *_FILE_KEYS), str(queues_path))
    queues = tuple(
        reader.queue_from_object(obj, f"{queues_path}: {key}[{i}]", dra) for i, obj in enumerate(data[key])
    )
    names = [q.name for q in queues]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise InputError(f"{queues_path}: queue {twice[0]!r} is defined more than once")
    teams = _names_map(data.get("teams"), f"{queues_path}: teams")
    queues = tuple(_with_team(q, teams.get(q.name)) for q in queues)
    capacity = _file_capacity(queues, data.get("capacity") or [], queues_path)
    if history_path is None:
        raise InputError(f"{queues_path}: --queues needs --history (a CSV of ts, cluster_queue, flavor, "
                         "resource, demand)")
    try:
        raw = pl.read_csv(history_path, try_parse_dates=True)
    except (OSError, pl.exceptions.PolarsError) as exc:
        first = str(exc).splitlines()[0]
        raise InputError(f"{history_path}: cannot read the history CSV ({first})") from None
    history, step = check_history(raw, str(history_path), queues)
    gmins = {**_guaranteed_map(data.get("guaranteed"), f"{queues_path}: guaranteed"), **(guaranteed or {})}
    return QuotaInputs(queues, capacity, history, step, gmins, f"{queues_path} + {history_path}",
                       queue_system)


def _names_map(raw: Any, where: str) -> dict[str, str]:
    """`teams:` queue → team, both names."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping) or not all(isinstance(v, str) and v for v in raw.values()):
        raise InputError(f"{where}: expected a mapping queue: team (names)")
    return {str(k): v for k, v in raw.items()}


def _guaranteed_map(raw: Any, where: str) -> dict[str, int]:
    """`guaranteed:` team → GPUs, whole non-negative numbers no larger than MAX_QUANTITY."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise InputError(f"{where}: expected a mapping team: GPUs")
    out = {}
    for team, gpus in raw.items():
        if isinstance(gpus, bool) or not isinstance(gpus, int) or not 0 <= gpus <= MAX_QUANTITY:
            raise InputError(f"{where}.{team}: {gpus!r} must be a whole number of GPUs from 0 to "
                             f"{MAX_QUANTITY:,.0f}")
        out[str(team)] = gpus
    return out


def _file_capacity(queues: tuple[QueueSpec, ...], rows: Any, queues_path: Path
                   ) -> dict[tuple[str, str, str], float]:
    """The default capacity, overridden per (cohort, flavor, resource) by the file's rows."""
    capacity = default_capacity(queues)
    if not isinstance(rows, list):
        raise InputError(f"{queues_path}: capacity must be a list of rows")
    for i, row in enumerate(rows):
        where = f"{queues_path}: capacity[{i}]"
        if not isinstance(row, Mapping) or not {"flavor", "resource", "amount"} <= set(row):
            raise InputError(f"{where}: expected cohort, flavor, resource, amount")
        refuse_unknown_keys(row, _CAPACITY_KEYS, where)
        users = [q.pool for q in queues if (row["flavor"], row["resource"]) in q.quotas]
        cohort = row.get("cohort") or (users[0] if users else None)
        if cohort is None:
            raise InputError(f"{where}: no ClusterQueue uses flavor {row['flavor']} for {row['resource']}")
        amount = parse_quantity(row["amount"], where)
        capacity[(str(cohort), str(row["flavor"]), str(row["resource"]))] = amount
    for (cohort, flavor, resource), amount in capacity.items():
        if amount > MAX_QUANTITY:
            raise InputError(f"{queues_path}: capacity of {cohort} {flavor} {resource} adds up to "
                             f"{amount:,.0f}, above {MAX_QUANTITY:,.0f}")
    return capacity


def _with_team(q: QueueSpec, team: str | None) -> QueueSpec:
    if team is None:
        return q
    return replace(q, team=team)


# 3. The warehouse -------------------------------------------------------------------------------
def quota_inputs_from_warehouse(wh: Warehouse, lookback: timedelta,
                                guaranteed: Mapping[str, int] | None = None, *,
                                queue_system: str = DEFAULT_QUEUE_SYSTEM,
                                dra: Collection[str] = ()) -> QuotaInputs:
    """Queues from table `queues`, demand from `queue_samples` over `lookback`.

    The queue system reports pending work per queue as a number of workloads without a flavor;
    it is turned into resource units with the queue's mean pod request and spread over the
    queue's (flavor, resource) pairs in proportion to their usage in the window. The samples
    are summed per `RESOLUTION` bucket by the warehouse (a month of one-minute samples is
    millions of rows; the plan replays at that bucket anyway), or per sampling step when that
    is coarser.
    """
    reader = quota_reader(queue_system)
    queues = _warehouse_queues(wh, reader, dra)
    last = last_queue_sample(wh)
    if last is None:
        raise InputError(f"{wh.path}: table queue_samples is empty; no demand history (pass --history)")
    where = f"{wh.path}: queue_samples"
    times = queue_sample_times(wh, last - lookback)["ts"]
    if times.len() < 2:
        raise InputError(f"{where}: the demand history needs at least two sample times")
    raw_step = times.diff().drop_nulls().median()
    assert isinstance(raw_step, timedelta)
    step = max(raw_step, RESOLUTION)
    origin = times[0]
    micro = int(step / timedelta(microseconds=1))
    offsets = ((times - origin).dt.total_microseconds() // micro).to_numpy()
    counts = np.bincount(offsets, minlength=int(offsets[-1]) + 1)
    sums = queue_sample_sums(wh, last - lookback, origin, micro)
    sizes = reader.request_sizes(wh)
    queues = tuple(replace(q, units=sizes.smallest.get(q.name, {})) for q in queues)
    bucket, series, summed, used, keys = _warehouse_cells(sums, counts, sizes.mean, queues, where)
    demand = demand_from_sums(origin, step, keys, bucket=bucket, series=series, demand=summed, counts=counts,
                              running=used)
    _check_grid(demand, where)
    source = f"warehouse {wh.path} (last {duration_text(lookback)} of queue_samples)"
    inputs = QuotaInputs(queues, default_capacity(queues), pl.DataFrame(), step, dict(guaranteed or {}),
                         source, queue_system)
    return inputs.with_demand(demand)


def _warehouse_cells(sums: pl.DataFrame, counts: np.ndarray, sizes: Mapping[str, float],
                     queues: tuple[QueueSpec, ...], where: str
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[tuple[str, str, str]]]:
    """Per bucket and series the summed demand and usage: (bucket, index into the returned keys,
    demand, usage).
    Demand is usage + pending workloads x the queue's mean pod size x the series' share of the
    queue's usage in the window (even over its series when it used none); it is linear in usage
    and pending workloads, so the rule applies to the bucket sums as to the samples. A series
    with more samples in a bucket than the bucket has sample times is a repeated row. In numpy
    over series codes: the sums are a row per bucket and series (half a million on the demo's
    month), and joins on three string columns cost more than the rest (decision 0205)."""
    bucket = sums["b"].to_numpy()
    over = np.flatnonzero(sums["rows"].to_numpy() > counts[bucket])
    if over.size:
        r = sums.row(int(over[0]), named=True)
        raise InputError(f"{where}: row ({r['cluster_queue']}, {r['flavor']}, {r['resource']}) appears more "
                         "than once at one sample time")
    label = sums.select(pl.concat_str("cluster_queue", "flavor", "resource", separator="\x00"))
    code = label.to_series().cast(pl.Categorical).to_physical().to_numpy().astype(np.int64)
    _, first, code = np.unique(code, return_index=True, return_inverse=True)
    names = sums.select("cluster_queue", "flavor", "resource")[first].rows()
    usage = sums["usage"].fill_null(0.0).to_numpy()
    pending = sums["pending_workloads"].fill_null(0.0).to_numpy()
    share = _usage_shares(names, np.bincount(code, weights=usage, minlength=len(names)))
    size = np.array([float(sizes.get(n[0], 1.0)) for n in names])
    keys = sorted(set(names) | {(q.name, f, r) for q in queues for f, r in q.quotas})
    at = {k: i for i, k in enumerate(keys)}
    index = np.array([at[n] for n in names], dtype=np.int64)
    demand = usage + pending * (size * share)[code]
    return bucket, index[code], demand, usage, keys


def _usage_shares(names: list[tuple[str, str, str]], used: np.ndarray) -> np.ndarray:
    """Each series' share of its queue's usage; even over the queue's series when it used none."""
    queue = np.unique(np.array([n[0] for n in names], dtype=object), return_inverse=True)[1]
    total = np.bincount(queue, weights=used)[queue]
    series = np.bincount(queue)[queue]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, used / total, 1.0 / series)


def _check_grid(demand: Demand, where: str) -> None:
    values = demand.values
    if not np.isfinite(values).all() or (values < 0).any() or (values > MAX_QUANTITY).any():
        raise InputError(f"{where}: demand must be a number from 0 to {MAX_QUANTITY:,.0f} "
                         "(no NaN or infinity)")


def _warehouse_queues(wh: Warehouse, reader: QuotaReader, dra: Collection[str]
                      ) -> tuple[QueueSpec, ...]:
    """The stored quota objects as `QueueSpec`s, each with its one owning team (if any)."""
    frame = queue_objects(wh, reader.object_kind)
    if frame.is_empty():
        raise InputError(
            f"{wh.path}: no {reader.object_kind}s in table queues; collect {reader.name} objects "
            "or pass --queues"
        )
    teams = reader.queue_teams(wh)
    return tuple(
        _with_team(
            reader.queue_from_object(
                {"metadata": {"name": r["name"], "resourceVersion": r["resource_version"]},
                 "spec": json.loads(r["spec"] or "{}")},
                f"{wh.path}: queues", dra,
            ),
            teams.get(r["name"]),
        )
        for r in frame.iter_rows(named=True)
    )
