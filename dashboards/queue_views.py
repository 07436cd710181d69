"""Kueue series for the Queues and My-team pages, in GPU-equivalents the bill agrees with; and
the Volcano Queues table (`volcano_queues`).

Why this module: Kueue counts MIG quota and usage per resource (`nvidia.com/mig-3g.40gb`); to
add them to whole GPUs each unit must weigh what the bill charges for that instance. That
weight is the MIG share of `analytics.devices.shares` under `sharing.mig_share_basis` (compute slices
/ 7, memory slices / 8, or the larger), on the GPU model of the flavor's nodes, never a second
copy of the rule. A whole `nvidia.com/gpu` counts 1.

1. Find each ResourceFlavor's GPU model: the one model of the nodes its `nodeLabels` select
   (no single model: the profile is weighed without one, by its compute slices).
2. Weigh each (flavor, resource) pair seen in the window.
3. Sum per ClusterQueue and hour in the warehouse (`warehouse.queries.dashboards.queue_hourly`).

Under `max_normalized` the bill divides shares by what a card's layout holds at each moment;
a quota has no layout, so the queue views use the raw share.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import polars as pl

from gpuledger.analytics.devices.shares import raw_mig_share
from gpuledger.core.errors import InputError
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.queries import dashboards as q
from gpuledger.warehouse.queries.optimizer import queue_objects


def _json_object(text: object) -> dict[str, object]:
    if isinstance(text, dict):
        return text
    try:
        value = json.loads(str(text)) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def flavor_models(flavors: pl.DataFrame, nodes: pl.DataFrame) -> dict[str, str]:
    """Step 1: flavor name → GPU model, from `flavors` (`name, spec`) and `nodes` (`node,
    model, labels`); flavors whose nodes have no single model are left out."""
    node_rows = [(r["model"], _json_object(r["labels"])) for r in nodes.iter_rows(named=True)]
    out: dict[str, str] = {}
    for row in flavors.iter_rows(named=True):
        selector = _json_object(row["spec"]).get("nodeLabels")
        if not isinstance(selector, dict) or not selector:
            continue
        models = {m for m, labels in node_rows if m and all(labels.get(k) == v for k, v in selector.items())}
        if len(models) == 1:
            out[row["name"]] = models.pop()
    return out


def unit_weight(resource: str, model: str | None, basis: str) -> float:
    """Step 2: GPUs one unit of `resource` stands for (1 for anything not a MIG profile or a
    profile name that cannot be read)."""
    if not resource.startswith(q.MIG_RESOURCE_PREFIX):
        return 1.0
    try:
        return raw_mig_share(model or "", resource.removeprefix(q.MIG_RESOURCE_PREFIX), basis)
    except InputError:
        return 1.0


def resource_weights(
    pairs: pl.DataFrame, models: Mapping[str, str], basis: str
) -> list[tuple[str, str, float]]:
    """Step 2 for every `flavor, resource` row of `pairs`."""
    return [(f, r, unit_weight(r, models.get(f), basis)) for f, r in pairs.iter_rows()]


def queue_series(wh: Warehouse, window: Window, basis: str) -> pl.DataFrame:
    """Steps 1-3: hourly ClusterQueue series (columns of `queries.dashboards.queue_hourly`)."""
    models = flavor_models(q.resource_flavor_rows(wh), q.node_labels(wh))
    weights = resource_weights(q.queue_gpu_resources(wh, window.start, window.end), models, basis)
    return q.queue_hourly(wh, window.start, window.end, weights)


VOLCANO_COLUMNS = ("queue", "parent", "weight", "reclaimable", "guarantee_gpus", "deserved_gpus",
                   "capability_gpus", "teams")


def _gpus(value: object) -> float | None:
    """A Volcano quota amount of `nvidia.com/gpu` (plain numbers; quantity strings read too)."""
    from gpuledger.optimizer.quota.spec import parse_quantity

    if value is None:
        return None
    try:
        return parse_quantity(value, "queue")
    except InputError:
        return None


def volcano_queues(wh: Warehouse) -> pl.DataFrame:
    """Every stored Volcano Queue: parent, weight, reclaimable, guarantee/deserved/capability in
    GPUs, and the teams whose PodGroups submit to it (`analytics.teams.volcano`), by name."""
    from gpuledger.analytics.teams.volcano import volcano_queue_team_sets
    from gpuledger.optimizer.quota.queues.volcano import GPU_RESOURCE, quota_body

    teams = volcano_queue_team_sets(wh)
    rows = []
    for name, spec_text in queue_objects(wh, "Queue").select("name", "spec").iter_rows():
        spec = _json_object(spec_text)
        body = quota_body(spec)
        rows.append({
            "queue": name, "parent": spec.get("parent"), "weight": spec.get("weight", 1),
            "reclaimable": spec.get("reclaimable"),
            "guarantee_gpus": _gpus(body["guarantee"]["resource"].get(GPU_RESOURCE)),
            "deserved_gpus": _gpus(body["deserved"].get(GPU_RESOURCE)),
            "capability_gpus": _gpus(body["capability"].get(GPU_RESOURCE)),
            "teams": ", ".join(sorted(teams.get(name, frozenset()))),
        })
    schema = {"queue": pl.String, "parent": pl.String, "weight": pl.Int64, "reclaimable": pl.Boolean,
              "guarantee_gpus": pl.Float64, "deserved_gpus": pl.Float64, "capability_gpus": pl.Float64,
              "teams": pl.String}
    return pl.DataFrame(rows, schema=schema)
