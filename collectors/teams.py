"""Which team a namespace belongs to: its team label, else the configured fallback rules.

The label key comes from `Settings.teams.label_key`. Through kube-state-metrics the label
arrives as `label_<key>` with every character outside `[a-zA-Z0-9_]` replaced by `_`
(`team.example.com/name` → `label_team_example_com_name`), so the key is sanitized the same
way before the lookup. Fallback rules (regex on the namespace → team, `\\1` allowed) apply in
order when the label is absent or empty; no match leaves the team NULL (billed as
`unattributed` downstream).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from gpuledger.core.config import TeamSettings

_KSM_INVALID = re.compile(r"[^a-zA-Z0-9_]")


def ksm_label(key: str) -> str:
    """The kube-state-metrics label name of a Kubernetes label key."""
    return "label_" + _KSM_INVALID.sub("_", key)


def resolve_team(namespace: str, labels: Mapping[str, str], teams: TeamSettings) -> str | None:
    """Team of `namespace` given its labels (raw keys, or KSM-sanitized keys)."""
    value = labels.get(teams.label_key) or labels.get(_KSM_INVALID.sub("_", teams.label_key))
    if value:
        return value
    for rule in teams.fallback:
        match = re.fullmatch(rule.namespace_regex, namespace)
        if match:
            return match.expand(rule.team)
    return None
