"""THE team-resolution rule: a namespace's team label, else the configured fallback rules.

Why one home: the collectors resolve a team when they store a namespace, and the bill resolves
it again at billing time (so a fallback rule added after collection, or a namespace the
inventory never saw, still lands on a team without re-collecting). Both must apply exactly the
same rule, or the bill and the inventory disagree about who owns a namespace.

The rule, in order:
1. the value of the label `Settings.teams.label_key`, under its raw Kubernetes key, or under
   the name kube-state-metrics gives it (`ksm_key`: every character outside `[a-zA-Z0-9_]`
   becomes `_`, then snake case, `team.example.com/teamName` → `team_example_com_team_name`;
   KSM names the series label `label_team_example_com_team_name`, see `ksm_label`). Where two
   keys of one object map to that name, KSM suffixes them `_conflict1`, `_conflict2`, … in the
   order of the raw keys, which the reader cannot see: their value is taken only when they
   all agree (else the namespace is not resolved by its label: nobody can tell which is ours);
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
_KSM_CAPITAL = re.compile(r"([a-z0-9])([A-Z])")
_CONFLICT = re.compile(r"^(.*)_conflict[0-9]+$")


def ksm_key(key: str) -> str:
    """A Kubernetes label key as kube-state-metrics names it after `label_`: `SanitizeLabelName`
    (`[^a-zA-Z0-9_]` → `_`), then `toSnakeCase` (`_` between a lower-case letter or digit and
    the capital after it, then lower case): `teamName` → `team_name`, `app.kubernetes.io/Name`
    → `app_kubernetes_io_name` (kube-state-metrics `internal/store/utils.go` `labelName`)."""
    return _KSM_CAPITAL.sub(r"\1_\2", _KSM_INVALID.sub("_", key)).lower()


def ksm_label(key: str) -> str:
    """The kube-state-metrics series label name of a Kubernetes label key (`label_` + `ksm_key`)."""
    return "label_" + ksm_key(key)


def ksm_value(labels: Mapping[str, object], key: str) -> object:
    """The value of Kubernetes label `key` in a label set read back from kube-state-metrics (the
    `label_` prefix dropped): under `ksm_key(key)`, else under its `_conflictN` names when their
    values all agree (step 1); None otherwise."""
    name = ksm_key(key)
    value = labels.get(name)
    if value:
        return value
    clashing = {str(v) for k, v in labels.items() if v and (m := _CONFLICT.match(k)) and m.group(1) == name}
    return clashing.pop() if len(clashing) == 1 else None


def label_team(labels: Mapping[str, object], teams: TeamSettings) -> str | None:
    """Step 1: the team label's value (raw key, else as KSM names it); None when absent or empty."""
    value = labels.get(teams.label_key) or ksm_value(labels, teams.label_key)
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
