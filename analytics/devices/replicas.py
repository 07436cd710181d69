"""How many replicas a time-sliced card is cut into: configuration, never a guess.

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

from gpuledger.warehouse.queries.devices import node_label_rows

if TYPE_CHECKING:
    from gpuledger.core.window import Window
    from gpuledger.warehouse import Warehouse

REPLICAS_LABEL = "nvidia.com/gpu.replicas"
"""GFD's node label with the time-slicing replica count per card."""
TIMESLICE = "timeslice"
_SCHEMA = {"node": pl.String, "configured_replicas": pl.Int64}


def _count(labels: object) -> int | None:
    """The label's value as a positive count, None when absent or not a number."""
    try:
        data = json.loads(str(labels)) if labels is not None else {}
        value = int(str(data.get(REPLICAS_LABEL, "")).strip())
    except (ValueError, TypeError, AttributeError):
        return None
    return value if value >= 1 else None


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
