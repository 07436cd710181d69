"""Read queries of the device sources (`analytics.devices`): MIG instances over a window, node
labels, pods on given nodes, and which node each card is on.

Why here: only `warehouse/` speaks SQL. The share math and the holders of shared cards are
`analytics.devices` rules (`capacity` for stranded MIG slices, `mig` for the `max_normalized`
layout factors, `replicas` for the time-slicing count, `unlabeled` for shared cards without
`vgpu` labels, `dra_rows` for claim rows); they read the inventory only through these. Windows
are half-open `[start, end)`: an interval is in one when `end_ts > start AND start_ts < end`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

    from gpuledger.warehouse.protocols import ReadableWarehouse


def mig_instances_between(wh: ReadableWarehouse, start: datetime, end: datetime) -> pl.DataFrame:
    """MIG instances alive in `[start, end)` as recorded (`mig_instances`): `uuid`, `gpu_i_id`,
    `profile`, `start_ts`, `end_ts`."""
    return wh.query(
        "SELECT uuid, gpu_i_id, profile, start_ts, end_ts FROM mig_instances "
        "WHERE end_ts > ? AND start_ts < ?",
        [start, end],
    )


def node_label_rows(wh: ReadableWarehouse) -> pl.DataFrame:
    """Every stored node: `node`, `labels` (the label set as JSON text, or NULL)."""
    return wh.query("SELECT node, CAST(labels AS VARCHAR) AS labels FROM nodes")


def pods_on_nodes(
    wh: ReadableWarehouse, start: datetime, end: datetime, nodes: Sequence[str],
) -> pl.DataFrame:
    """Pods alive in `[start, end)` on one of `nodes`: `namespace`, `pod`, `node`, `requests`
    (the pod's GPU requests as JSON text, or NULL), `start_ts`, `end_ts`."""
    return wh.query(
        "SELECT namespace, pod, node, CAST(gpu_requests AS VARCHAR) AS requests, start_ts, end_ts "
        "FROM pods WHERE end_ts > ? AND start_ts < ? AND list_contains(?, node)",
        [start, end, list(nodes)],
    )


def card_nodes(wh: ReadableWarehouse) -> pl.DataFrame:
    """Every inventoried card and its node: `uuid`, `node`."""
    return wh.query("SELECT uuid, node FROM gpus")
