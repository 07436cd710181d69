"""The view state that links carry: page, period, team, model, node and plan in the URL.

The URL is the single source of truth: the filter controls are set from it and write back to
it, so a copied link opens the same view. Everything in a query string is untrusted input: it
is parsed here into a `ViewState` with bounded, validated values, and it is never pasted into
SQL (queries take it as parameters) nor trusted for access (the callbacks check the principal).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from urllib.parse import parse_qs, urlencode

from gpuledger.core.errors import InputError
from gpuledger.core.period import Period

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,252}$")
_LABEL_VALUE = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?")
"""A Kubernetes label value (what a team, model or namespace name is): nothing that can break
a response header or a file name."""
FIELDS = ("period", "team", "model", "node", "plan")


def valid_period(text: str | None) -> bool:
    """A month spelled exactly `YYYY-MM` (`core.period.Period.exact`; no `last` in a link,
    since a link must name the same month tomorrow)."""
    if not text:
        return False
    try:
        return str(Period.exact(text)) == text
    except InputError:
        return False


def label_value(value: str | None, what: str) -> str | None:
    """A team/model/namespace name from a URL for a download or an API answer (None when
    absent); refused with `InputError` unless it is a Kubernetes label value, since it may end
    up in a Content-Disposition header."""
    if not value:
        return None
    if not _LABEL_VALUE.fullmatch(value):
        raise InputError(f"{what}: expected a name of letters, digits, '.', '_' or '-' (at most 63)")
    return value


def _name(value: str | None) -> str | None:
    """A team/model/node/plan name as typed in a URL, or None when absent or malformed."""
    if value is None:
        return None
    value = value.strip()
    return value if _NAME.match(value) else None


@dataclass(frozen=True, slots=True)
class ViewState:
    """What the user is looking at; `period` is `YYYY-MM` (UTC month)."""

    period: str
    team: str | None = None
    model: str | None = None
    node: str | None = None
    plan: str | None = None

    @classmethod
    def from_query(cls, search: str | None, default_period: str) -> ViewState:
        """Parse `?period=…&team=…`; bad or unknown values fall back to the defaults."""
        raw = parse_qs((search or "").lstrip("?"), keep_blank_values=False, max_num_fields=20)

        def first(key: str) -> str | None:
            values = raw.get(key)
            return values[0] if values else None

        period = first("period")
        return cls(
            period=period if period is not None and valid_period(period) else default_period,
            team=_name(first("team")),
            model=_name(first("model")),
            node=_name(first("node")),
            plan=_name(first("plan")),
        )

    @classmethod
    def from_dict(cls, data: dict[str, str | None] | None, default_period: str) -> ViewState:
        data = data or {}
        period = data.get("period")
        return cls(
            period=period if valid_period(period) else default_period,  # type: ignore[arg-type]
            team=_name(data.get("team")),
            model=_name(data.get("model")),
            node=_name(data.get("node")),
            plan=_name(data.get("plan")),
        )

    def to_dict(self) -> dict[str, str | None]:
        return {f: getattr(self, f) for f in FIELDS}

    def to_query(self) -> str:
        """`?period=2026-11&team=vision` (fields that are None are left out)."""
        pairs = [(f, v) for f, v in self.to_dict().items() if v]
        return "?" + urlencode(pairs) if pairs else ""

    def href(self, path: str) -> str:
        return path + self.to_query()

    def with_(self, **changes: str | None) -> ViewState:
        return replace(self, **changes)  # type: ignore[arg-type]
