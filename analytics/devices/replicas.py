"""Which cards the device plugin replicates (time-slicing, MPS) and into how many replicas:
configuration, never a guess.

Whether a card is replicated is what GPU feature discovery's node labels say (`core.gfd`, the
one rule): dcgm-exporter shows a replicated card as ONE series labelled with one of its pods
(`--kubernetes-virtual-gpus` adds a `vgpu` series per pod, and none for a card no pod uses),
so the inventory's mode (`gpus.sharing_mode`, from the series seen) says `exclusive` for a
time-sliced card exported the default way, and that pod was billed the whole card (issue 29).
`cards` reads the inventory with the mode the node's stored labels give (`nodes.labels`, from
the Kubernetes API or kube-state-metrics' `kube_node_labels`): a whole card on a replicated
node is `timeslice`, MPS included (its shares are 1 / replicas too, enforced by the MPS control
daemon; docs/decisions/0167); MIG, vGPU and DRA cards keep their mode.

The NVIDIA device plugin's time-slicing config sets the count, and GPU feature discovery
publishes it as the node label `nvidia.com/gpu.replicas`; the Kubernetes API collector stores
node labels in `nodes.labels`, and kube-state-metrics' `kube_node_labels` (as
`label_nvidia_com_gpu_replicas`) feeds the same column where the API is not reachable. The
number of distinct `vgpu` labels seen is only a lower bound: a card configured for 4 replicas
with 2 in use would bill each pod half a card and hide the unallocated half. So the share of a
replica is 1 / the configured count; only where no node says so does the bill fall back to the
inventory's count (which a Prometheus-only collector derives from the replicas it saw), and it
names those nodes (`replicas_unknown_nodes`) instead of guessing silently.

Configuration changes over time (issue 31 item 7, docs/decisions/0207): the labels are read from
`node_history`, each set with its validity interval, and an hour is priced by the set in force
at the hour's start (`at_hour`): a node re-labelled on day 2 never re-prices day 1. `cards`
gives the per-card facts a window needs once (the set in force at the window's end, what the
capacity rows use); the hourly frame re-reads mode, pool and replicas per hour.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import polars as pl

from gpuledger.core.gfd import replica_count, replicated
from gpuledger.core.labels import pool_of
from gpuledger.warehouse.queries.devices import node_config_rows
from gpuledger.warehouse.queries.usage import gpu_inventory

if TYPE_CHECKING:
    from gpuledger.core.window import Window
    from gpuledger.warehouse import Warehouse

TIMESLICE = "timeslice"
EXCLUSIVE = "exclusive"
_SCHEMA = pl.Schema({"node": pl.String, "configured_replicas": pl.Int64})
_FACTS = pl.Schema({"_node_pool": pl.String, "_replicated": pl.Boolean, "configured_replicas": pl.Int64})
_EVER = datetime(1, 1, 1, tzinfo=UTC)
"""Where a node's first configuration starts: it stands for the time before it too."""


def _labels(text: object) -> dict[str, object]:
    """A stored `labels` JSON value as a mapping (empty when NULL or not a JSON object)."""
    try:
        data = json.loads(str(text)) if text is not None else {}
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _count(labels: object) -> int | None:
    """The label's value as a positive count, None when absent or not a number."""
    value = replica_count(_labels(labels))
    return value if value is not None and value >= 1 else None


def node_configs(wh: Warehouse | None, window: Window | None = None) -> pl.DataFrame:
    """`gpu_node`, `valid_from` (NULL: since ever), `valid_to` (NULL: still), `_node_pool`,
    `_replicated`, `configured_replicas`: each node configuration in force somewhere in `window`
    (every one when None), by node then time; each distinct label set parsed once."""
    schema = pl.Schema([("gpu_node", pl.String()), ("valid_from", pl.Datetime("us", "UTC")),
                        ("valid_to", pl.Datetime("us", "UTC")), *_FACTS.items()])
    if wh is None:
        return pl.DataFrame(schema=schema)
    rows = node_config_rows(wh, *((window.start, window.end) if window is not None else (None, None)))
    distinct = rows["labels"].unique().to_list()
    parsed = [_labels(text) for text in distinct]
    facts = pl.DataFrame({
        "labels": pl.Series(distinct, dtype=pl.String),
        "_node_pool": pl.Series([pool_of(p) for p in parsed], dtype=pl.String),
        "_replicated": pl.Series([replicated(p) is not None for p in parsed], dtype=pl.Boolean),
        "configured_replicas": pl.Series([_count(t) for t in distinct], dtype=pl.Int64),
    })
    frame = rows.join(facts, on="labels", how="left", nulls_equal=True, maintain_order="left")
    return frame.select(pl.col("node").alias("gpu_node"), "valid_from", "valid_to", *_FACTS).cast(schema)


def _in_force_at_end(configs: pl.DataFrame) -> pl.DataFrame:
    """Per node, the configuration in force last (the rows are by node, then time)."""
    return configs.unique("gpu_node", keep="last", maintain_order=True).drop("valid_from", "valid_to")


def _node_facts() -> list[pl.Expr]:
    """`card_mode` and `pool` from the inventory's and the node configuration's columns: a whole
    card on a replicated node is `timeslice`; a card without a pool is in its node's pool."""
    shared = (pl.col("inventory_mode") == EXCLUSIVE) & pl.col("_replicated").fill_null(False)
    return [pl.when(shared).then(pl.lit(TIMESLICE)).otherwise(pl.col("inventory_mode")).alias("card_mode"),
            pl.coalesce("inventory_pool", "_node_pool").alias("pool")]


def cards(wh: Warehouse, window: Window | None = None, *,
          configs: pl.DataFrame | None = None) -> pl.DataFrame:
    """The inventory as the bill joins it (`gpu_inventory`: `uuid`, `gpu_node`, `model`, `pool`,
    `card_mode`, ...) with what its node's labels in force at the end of `window` say (the
    latest when None): a whole card on a replicated node is `timeslice` (module docstring), and a
    card without a pool is in its node's pool (`core.labels.pool_of`: ours, else the
    autoscaler's or cloud's node-pool label). `inventory_mode` and `inventory_pool` keep what the
    inventory says, for `at_hour`. `configs`: `node_configs(wh, window)` when the caller read
    it already (a bill reads it once for `cards`, `at_hour`, `at_day` and
    `replicas_unknown_nodes`)."""
    gpus = gpu_inventory(wh).with_columns(
        pl.col("card_mode").alias("inventory_mode"), pl.col("pool").alias("inventory_pool"))
    configs = node_configs(wh, window) if configs is None else configs
    if gpus.is_empty() or configs.is_empty():
        return gpus
    nodes = _in_force_at_end(configs).drop("configured_replicas")
    return gpus.join(nodes, on="gpu_node", how="left", maintain_order="left").with_columns(
        _node_facts()).drop("_node_pool", "_replicated")


def _by_hour(frame: pl.DataFrame, configs: pl.DataFrame, node: str) -> pl.DataFrame:
    """`frame` with the columns of the configuration of its `node` in force at its `ts`."""
    if configs.group_by("gpu_node").len()["len"].max() in (None, 1):  # no change in the window
        return frame.join(_in_force_at_end(configs).rename({"gpu_node": node}), on=node, how="left",
                          maintain_order="left")
    since = pl.col("valid_from").fill_null(_EVER).alias("_from")
    right = configs.select(pl.col("gpu_node").alias(node), since, *_FACTS).sort("_from")
    rows = frame.with_row_index("_row").sort("ts")
    joined = rows.join_asof(right, left_on="ts", right_on="_from", by=node, strategy="backward",
                            check_sortedness=False)
    return joined.sort("_row").drop("_row", "_from")


def at_hour(frame: pl.DataFrame, wh: Warehouse, window: Window, *,
            configs: pl.DataFrame | None = None) -> pl.DataFrame:
    """Held rows (`gpu_node`, `ts`: the hour, and the `cards` columns) with `card_mode`, `pool`
    and `configured_replicas` as the node's configuration in force at the hour's start says.
    `configs`: `node_configs` of `window` or of a window around it (a bill's, for a part of
    it), read once by the caller; read here when None."""
    configs = node_configs(wh, window) if configs is None else configs
    if configs.is_empty() or "inventory_mode" not in frame.columns:
        return frame
    frame = _by_hour(frame.drop([c for c in _FACTS if c in frame.columns]), configs, "gpu_node")
    return frame.with_columns(_node_facts()).drop("_node_pool", "_replicated")


def at_day(frame: pl.DataFrame, wh: Warehouse, window: Window, *,
           configs: pl.DataFrame | None = None) -> pl.DataFrame:
    """Card-day rows (`uuid`, `day`: a date, and the `cards` columns) with `card_mode` and `pool`
    as the node's configuration in force at the day's start says, where a node's configuration
    changed inside `window` (else `frame` as it is: the `cards` values hold for every day).
    `configs`: `node_configs(wh, window)` when the caller read it already."""
    configs = node_configs(wh, window) if configs is None else configs
    if configs.is_empty() or configs.group_by("gpu_node").len()["len"].max() in (None, 1) \
            or "inventory_mode" not in frame.columns:
        return frame
    hourly = frame.with_columns(pl.col("day").cast(pl.Datetime("us")).dt.replace_time_zone("UTC").alias("ts"))
    return at_hour(hourly, wh, window, configs=configs).drop("ts")


def configured_replicas(wh: Warehouse | None, window: Window | None = None) -> pl.DataFrame:
    """`node`, `configured_replicas`: one row per node whose labels in force at the end of
    `window` (the latest when None) state the count."""
    configs = node_configs(wh, window)
    last = _in_force_at_end(configs).filter(pl.col("configured_replicas").is_not_null())
    return last.select(pl.col("gpu_node").alias("node"), "configured_replicas").cast(_SCHEMA)


def with_configured_replicas(frame: pl.DataFrame, wh: Warehouse | None, window: Window | None,
                             node: str) -> pl.DataFrame:
    """`frame` with `configured_replicas` of its `node`: per row by its hour (`ts`) where it has
    one, else as the labels in force at the end of `window` say."""
    configs = node_configs(wh, window)
    if configs.is_empty() or "ts" not in frame.columns:
        return frame.join(configured_replicas(wh, window).rename({"node": node}), on=node, how="left")
    return _by_hour(frame, configs, node).drop("_node_pool", "_replicated")


def replicas_unknown_nodes(wh: Warehouse, gpus: pl.DataFrame, window: Window, *,
                           configs: pl.DataFrame | None = None) -> tuple[str, ...]:
    """Nodes with a time-sliced card present in `window` whose replica count no label in force
    in `window` states (`configs`: `node_configs(wh, window)` when the caller read it already)."""
    if gpus.is_empty():
        return ()
    present = (
        (pl.col("first_seen").is_null() | (pl.col("first_seen") < _utc(window.end)))
        & (pl.col("last_seen").is_null() | (pl.col("last_seen") >= _utc(window.start)))
    )
    shared = gpus.filter((pl.col("card_mode") == TIMESLICE) & present)
    configs = node_configs(wh, window) if configs is None else configs
    known = configs.filter(pl.col("configured_replicas").is_not_null())["gpu_node"].unique()
    nodes = shared.filter(~pl.col("gpu_node").is_in(known.implode()))["gpu_node"].unique().to_list()
    return tuple(sorted(str(n) for n in nodes if n is not None))


def _utc(moment: datetime) -> pl.Expr:
    return pl.lit(moment).cast(pl.Datetime("us", "UTC"))
