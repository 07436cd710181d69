"""The `finance` settings section: budget alert thresholds, the alert webhook, cost centres.

Budget *amounts* stay where they always were (`teams.budgets`, one number per team per month);
this section says when a budget raises an alert and where finance books each team's charge.

Why its own module: `core/config.py` is at its size limit; `Settings.finance` is its one line
there. The base repeats `_Section`'s model config (unknown keys refused, no NaN/Inf) rather than
importing it, because `config.py` imports this module.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

Threshold = Annotated[float, Field(gt=0, le=10)]
"""A share of the budget (0.8 = 80 %); above 1 is allowed (an alert at 150 %)."""


class _FinanceSection(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class CostCentre(_FinanceSection):
    """Where finance books one team's charge (carried into CSV and FOCUS `x_CostCenter`)."""

    cost_centre: str = Field(min_length=1, max_length=64)
    gl_account: str | None = Field(default=None, min_length=1, max_length=64)


def _sorted_thresholds(values: tuple[float, ...]) -> tuple[float, ...]:
    if not values:
        raise ValueError("give at least one threshold (e.g. [0.8, 1.0])")
    return tuple(sorted(set(values)))


class FinanceSettings(_FinanceSection):
    """Budget alerts and the team → cost centre / GL account mapping."""

    budget_thresholds: tuple[Threshold, ...] = (0.8, 1.0)
    """Shares of a team's monthly budget that raise an alert (default 80 % and 100 %)."""
    team_thresholds: dict[str, tuple[Threshold, ...]] = Field(default_factory=dict)
    """Per-team thresholds replacing `budget_thresholds` for that team."""
    budget_webhook: SecretStr | None = None
    """Optional URL that budget alerts are POSTed to (generic JSON with a Slack `text` field);
    a secret because Slack-style URLs carry their token. Write `${GPULEDGER_BUDGET_WEBHOOK}`."""
    cost_centres: dict[str, CostCentre] = Field(default_factory=dict)
    """Team → cost centre (and GL account) for statements, CSV and FOCUS."""

    @field_validator("budget_webhook")
    @classmethod
    def _webhook(cls, value: SecretStr | None) -> SecretStr | None:
        return None if value is None else SecretStr(check_webhook_url(value.get_secret_value()))

    @field_validator("budget_thresholds")
    @classmethod
    def _fleet(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        return _sorted_thresholds(value)

    @field_validator("team_thresholds")
    @classmethod
    def _teams(cls, value: dict[str, tuple[float, ...]]) -> dict[str, tuple[float, ...]]:
        return {team: _sorted_thresholds(v) for team, v in value.items()}

    def thresholds_for(self, team: str) -> tuple[float, ...]:
        return self.team_thresholds.get(team, self.budget_thresholds)


def check_webhook_url(raw: str) -> str:
    """The webhook URL, surrounding whitespace stripped (a value read from a file or an
    environment variable often ends in a newline); `ValueError` naming at most the host when it
    is not an http(s) URL urllib can POST to. Why at load, not at send: a URL that fails inside
    urllib fails with an exception quoting its path, and the path is the secret (Slack's token);
    refused here, the message is ours and says what is wrong without showing it."""
    value = raw.strip()
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in value):
        raise ValueError("a space or control character inside the URL (not shown: it is secret)")
    try:
        parts = urlsplit(value)
        host, port = parts.hostname, parts.port
    except ValueError:
        raise ValueError("not a valid URL: a bad host (unclosed '[') or a port that is not a "
                         "number 1-65535 (not shown: it is secret)") from None
    if parts.scheme not in ("http", "https") or not host:
        raise ValueError("expected an http:// or https:// URL with a host (not shown: it is secret)")
    if port == 0:
        raise ValueError(f"port 0 at {host}: expected 1-65535")
    return value
