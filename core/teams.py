"""THE team-resolution rule: a namespace's team label, else the configured fallback rules.

Why one home: the collectors resolve a team when they store a namespace, and the bill resolves
it again at billing time (so a fallback rule added after collection, or a namespace the
inventory never saw, still lands on a team without re-collecting). Both must apply exactly the
same rule, or the bill and the inventory disagree about who owns a namespace.

The rule, in order:
1. the value of the label `Settings.teams.label_key`, under its raw Kubernetes key or under the
   key as kube-state-metrics sanitizes it (every character outside `[a-zA-Z0-9_]` becomes `_`:
   `team.example.com/name` → `team_example_com_name`; KSM names the series label
   `label_team_example_com_name`, see `ksm_label`);
2. otherwise the first fallback rule whose regex matches the whole namespace (its team may use
   groups, `\\1`);
3. otherwise no team (None): billed as `unattributed` downstream.

Pure Python over plain mappings: no heavy import.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from gpuledger.core.config import TeamSettings

_KSM_INVALID = re.compile(r"[^a-zA-Z0-9_]")


def ksm_label(key: str) -> str:
    """The kube-state-metrics series label name of a Kubernetes label key."""
    return "label_" + _KSM_INVALID.sub("_", key)


def label_team(labels: Mapping[str, object], teams: TeamSettings) -> str | None:
    """Step 1: the team label's value (raw or KSM-sanitized key); None when absent or empty."""
    value = labels.get(teams.label_key) or labels.get(_KSM_INVALID.sub("_", teams.label_key))
    return str(value) if value else None


def fallback_team(namespace: str, teams: TeamSettings) -> str | None:
    """Step 2: the team of the first fallback rule matching the whole namespace, if any."""
    for rule in teams.fallback:
        match = re.fullmatch(rule.namespace_regex, namespace)
        if match:
            return match.expand(rule.team)
    return None


def resolve_team(namespace: str, labels: Mapping[str, object], teams: TeamSettings) -> str | None:
    """Team of `namespace` given its labels: steps 1-3 of the module docstring."""
    return label_team(labels, teams) or fallback_team(namespace, teams)


def stored_labels(text: str | None) -> dict[str, object]:
    """A `labels` JSON column value as a mapping; empty when NULL, not JSON or not an object.

    Why lenient: the column is written by our own collectors, but old warehouse files and
    hand-loaded rows may hold anything; a broken label set must not stop a bill (the namespace
    then falls through to the fallback rules like an unlabeled one).
    """
    if not text:
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}
