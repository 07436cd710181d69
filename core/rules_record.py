"""The rules a stored fact records, as its reader finds them (docs/decisions/0150).

Why a second module beside `core.rules`: `Rules` is what the writer computes under; a reader
holds something else, the record a serving result, a lake partition or a statement carries,
which may be from an older release (no record at all: "rules not recorded"), or from a newer
one whose rule set this code cannot rebuild. So the record keeps the fingerprint and the
one-line description the writer made (`Rules.describe`) beside the full rule values
(`Rules.to_dict`): a reader compares fingerprints and prints the description, and never has
to rebuild `Rules` to say which rules old numbers carry. One home for how such numbers are
labelled (`label`, `differs`), so every reader words it the same way.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpuledger.core.rules import Rules

NOT_RECORDED = "rules not recorded"
"""What a reader says of a fact stored before its rules were (or whose record is unreadable)."""


@dataclass(frozen=True, slots=True)
class RecordedRules:
    """One stored fact's rules: both fingerprints, the description and the full values."""

    fingerprint: str
    rollup_fingerprint: str
    description: str
    rules: dict[str, Any]

    @classmethod
    def of(cls, rules: Rules) -> RecordedRules:
        return cls(rules.fingerprint, rules.rollup_fingerprint, rules.describe(), rules.to_dict())

    def to_dict(self) -> dict[str, Any]:
        return {"fingerprint": self.fingerprint, "rollup_fingerprint": self.rollup_fingerprint,
                "description": self.description, "rules": self.rules}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> RecordedRules | None:
        """A stored record, or None when there is none or it is not one (read as not recorded:
        an unreadable record must never pass for today's rules)."""
        if not isinstance(data, Mapping):
            return None
        fingerprint, rules = data.get("fingerprint"), data.get("rules")
        if not isinstance(fingerprint, str) or not fingerprint or not isinstance(rules, Mapping):
            return None
        return cls(fingerprint, str(data.get("rollup_fingerprint") or ""),
                   str(data.get("description") or "rules not described"), dict(rules))

    @classmethod
    def from_json(cls, text: str | None) -> RecordedRules | None:
        if not text:
            return None
        try:
            return cls.from_dict(json.loads(text))
        except ValueError:
            return None

    @property
    def short(self) -> str:
        """`1124e8bbe2e7 (idle < 5% for >= 30 min, …)`: the fingerprint and what it means."""
        return f"{self.fingerprint} ({self.description})"


def label(recorded: RecordedRules | None) -> str:
    """`rules 1124e8bbe2e7 (…)`, or `rules not recorded`."""
    return NOT_RECORDED if recorded is None else f"rules {recorded.short}"


AS_COMPUTED = "as computed: the rules the roll-up was stored under, not the settings in force when issued"
"""What a statement billed `--as-computed` adds to its rules line (docs/decisions/0158)."""


def computed_under(recorded: RecordedRules | None, *, as_computed: bool = False) -> str:
    """The statement line: `Computed under: idle < 5% for >= 30 min, …; rules 1124e8bbe2e7`,
    with `(as computed: …)` before the full stop when billed `--as-computed`."""
    how = f" ({AS_COMPUTED})" if as_computed else ""
    if recorded is None:
        return f"Computed under: {NOT_RECORDED} (rolled up before rules were recorded){how}."
    return f"Computed under: {recorded.description}; rules {recorded.fingerprint}{how}."


def differs(recorded: RecordedRules | None, current: Rules) -> bool:
    """Whether numbers stored under `recorded` are not what `current` computes (unknown
    rules differ: they cannot be shown as current)."""
    return recorded is None or recorded.fingerprint != current.fingerprint
