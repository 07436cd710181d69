"""Node configuration over time: how a `nodes` load extends `node_history` (docs/decisions/0207).

Why: `nodes` keeps one row per node, replaced by every collect, so a day's bill read whatever
labels the last collect stored: a node re-labelled on day 2 (3 time-slice replicas instead of 2,
another pool) re-priced day 1 (issue 31 item 7). The history keeps every configuration a node
had, each from its `valid_from` to the node's next row; the per-hour readers
(`analytics.devices.replicas`) take the row in force in each hour.

The rules (one home, here):
1. `valid_from` is the source's `valid_from` (a Prometheus chunk's start: its labels are those
   of the chunk), else `observed_at` (the moment the Kubernetes API was read), else the load's
   time. A node's first row also stands for the time before it: nothing earlier is known, and
   an upgraded warehouse (v014: one row per node) bills what it billed before.
2. A row is added only where the configuration differs from the one in force at its
   `valid_from`: a collect every 15 minutes adds nothing while nothing changes. Before a node's
   first row the first row is in force (docs/decisions/0227): an older observation (a backfill
   loaded after newer ones) that agrees with it adds nothing; one that differs is the better
   evidence for the time before the first row, becomes the new first row and re-prices that
   time (marked for a re-roll, rule 4). Either way it is stored (rule 5): evidence that the
   configuration held earlier than was known. Configuration is
   pool, model, card count, sharing mode, replicas, MIG config and state and the label set, less
   the labels that change on every relabelling without changing anything (`VOLATILE_LABELS`);
   capacity, allocatable and the resource version are state, not configuration.
3. A row with the same node and `valid_from` is replaced (a re-collect of the same chunk corrects
   it); rows at other times are never touched, so re-running a load changes nothing.
4. Hours already rolled up that a new row re-configures are marked for a re-roll (`changed_from`,
   the store's `ROLLUP_DIRTY`, docs/decisions/0185): from its `valid_from`, or, where it is the
   node's first row (it stands for the time before it), from the node's first rolled-up hour.
"""

from __future__ import annotations

import json

from gpuledger.core.frames import NODE_CONFIG_COLUMNS
from gpuledger.warehouse.config_history import ConfigHistory

VOLATILE_LABELS: tuple[str, ...] = ("nvidia.com/gfd.timestamp",)
"""Node labels rewritten on every relabelling without any change of configuration (GPU feature
discovery stamps each run, NVIDIA/k8s-device-plugin `gpu-feature-discovery` `--no-timestamp`)."""

CONFIG_COLUMNS = NODE_CONFIG_COLUMNS
"""The columns besides `labels` that are configuration (rule 2; declared with the table, `core.frames`)."""

_PATCH = json.dumps(dict.fromkeys(VOLATILE_LABELS))


def _stable(alias: str) -> str:
    """`alias.labels` without the volatile labels (an RFC 7396 merge patch of nulls removes them)."""
    return (f"CASE WHEN {alias}.labels IS NULL THEN NULL "
            f"ELSE CAST(json_merge_patch({alias}.labels, '{_PATCH}') AS VARCHAR) END")


NODE_HISTORY = ConfigHistory("node_history", "node", CONFIG_COLUMNS, _stable,
                             "coalesce(valid_from, observed_at, now())")
"""`node_history`'s rows (rules 1-3, 5) by the shared SQL (`warehouse.config_history`)."""


def changed_from(view: str) -> str:
    """The query of the first moment the new rows of a `nodes` batch (`view`) re-configure
    (rule 4); NULL when they change nothing already rolled up on their nodes. Run before
    `NODE_HISTORY.insert`."""
    return f"""
        WITH {NODE_HISTORY.fresh(view, first_before=True)}
        SELECT min(CASE WHEN EXISTS (SELECT 1 FROM node_history p
                                     WHERE p.node = fresh.node AND p.valid_from < fresh._from)
                        THEN fresh._from
                        ELSE (SELECT min(c.ts) FROM card_hours_hourly c WHERE c.node = fresh.node) END)
        FROM fresh
    """
