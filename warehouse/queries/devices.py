"""Read queries of the device sources (`analytics.devices`): MIG instances over a window, node
configurations over time, pods on given nodes, and which node each card is on.

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


def node_config_rows(
    wh: ReadableWarehouse, start: datetime | None = None, end: datetime | None = None,
) -> pl.DataFrame:
    """Each configuration of each node with its validity interval (`node_history`, rules in
    `warehouse.node_history`), those in force somewhere in `[start, end)` when given: `node`,
    `valid_from` (NULL on a node's first row: it stands for the time before it too), `valid_to`
    (the node's next row's `valid_from`; NULL: still in force), `pool`, `labels` (JSON text, or
    NULL); by node, then time."""
    return wh.query(
        """
        SELECT node, valid_from, valid_to, pool, labels FROM (
            SELECT node,
                   CASE WHEN row_number() OVER w = 1 THEN NULL ELSE valid_from END AS valid_from,
                   lead(valid_from) OVER w AS valid_to, pool, CAST(labels AS VARCHAR) AS labels
            FROM node_history WINDOW w AS (PARTITION BY node ORDER BY valid_from)
        )
        WHERE (CAST(? AS TIMESTAMPTZ) IS NULL OR valid_to IS NULL OR valid_to > ?)
          AND (CAST(? AS TIMESTAMPTZ) IS NULL OR valid_from IS NULL OR valid_from < ?)
        ORDER BY node, valid_from NULLS FIRST
        """,
        [start, start, end, end],
    )


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
