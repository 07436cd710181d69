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
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING

import polars as pl

from gpuledger.core.gfd import replica_count, replicated
from gpuledger.core.labels import pool_of
from gpuledger.warehouse.queries.devices import node_label_rows
from gpuledger.warehouse.queries.usage import gpu_inventory

if TYPE_CHECKING:
    from gpuledger.core.window import Window
    from gpuledger.warehouse import Warehouse

TIMESLICE = "timeslice"
EXCLUSIVE = "exclusive"
_SCHEMA = {"node": pl.String, "configured_replicas": pl.Int64}


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


def cards(wh: Warehouse) -> pl.DataFrame:
    """The inventory as the bill joins it (`gpu_inventory`: `uuid`, `gpu_node`, `model`, `pool`,
    `card_mode`, ...) with what its node's stored labels say: a whole card on a replicated node
    is `timeslice` (module docstring), and a card without a pool is in its node's pool
    (`core.labels.pool_of`: ours, else the autoscaler's or cloud's node-pool label)."""
    gpus = gpu_inventory(wh)
    rows = [(node, _labels(text)) for node, text in node_label_rows(wh).iter_rows()]
    if gpus.is_empty() or not rows:
        return gpus
    nodes = pl.DataFrame(
        [(node, pool_of(labels), replicated(labels) is not None) for node, labels in rows],
        schema={"gpu_node": pl.String, "_node_pool": pl.String, "_replicated": pl.Boolean}, orient="row",
    ).unique("gpu_node", keep="last")
    shared = (pl.col("card_mode") == EXCLUSIVE) & pl.col("_replicated").fill_null(False)
    return gpus.join(nodes, on="gpu_node", how="left", maintain_order="left").with_columns(
        pl.when(shared).then(pl.lit(TIMESLICE)).otherwise(pl.col("card_mode")).alias("card_mode"),
        pl.coalesce("pool", "_node_pool").alias("pool"),
    ).drop("_node_pool", "_replicated")


def configured_replicas(wh: Warehouse | None) -> pl.DataFrame:
    """`node`, `configured_replicas`: one row per node whose labels state the count."""
    if wh is None:
        return pl.DataFrame(schema=_SCHEMA)
    nodes = node_label_rows(wh)
    rows = [(node, _count(labels)) for node, labels in nodes.iter_rows()]
    return pl.DataFrame([r for r in rows if r[1] is not None], schema=_SCHEMA, orient="row")


def replicas_unknown_nodes(wh: Warehouse, gpus: pl.DataFrame, window: Window) -> tuple[str, ...]:
    """Nodes with a time-sliced card present in `window` whose replica count no label states."""
    if gpus.is_empty():
        return ()
    present = (
        (pl.col("first_seen").is_null() | (pl.col("first_seen") < _utc(window.end)))
        & (pl.col("last_seen").is_null() | (pl.col("last_seen") >= _utc(window.start)))
    )
    shared = gpus.filter((pl.col("card_mode") == TIMESLICE) & present)
    known = configured_replicas(wh)["node"].to_list()
    nodes = shared.filter(~pl.col("gpu_node").is_in(known))["gpu_node"].unique().to_list()
    return tuple(sorted(str(n) for n in nodes if n is not None))


def _utc(moment: datetime) -> pl.Expr:
    return pl.lit(moment).cast(pl.Datetime("us", "UTC"))
