"""Budget alerts to a webhook: one POST of generic JSON that Slack also understands.

The body is `{"text": "...", "alerts": [...]}`: Slack (and Mattermost, Teams' incoming
webhooks, most chat bridges) shows `text`; anything else reads `alerts`, the records of
`analytics.billing.budgets.alerts`. The URL is a secret (`finance.budget_webhook`: a Slack URL carries
its token), so it is never logged nor echoed: errors name the host only.

Why a POST per run and no "already sent" memory: whoever schedules it (the collect CronJob,
`gpuledger budgets --notify`) decides how often; Prometheus' alert rules
(the chart's `deploy/helm/gpuledger/files/gpuledger-rules.yaml`) are the de-duplicated, routed path.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

from gpuledger.core.errors import InputError, ReportError

TIMEOUT_S = 10.0


def payload(alerts: list[dict[str, Any]], period: str) -> dict[str, Any]:
    """The JSON body: a readable `text` (one line per alert) and the `alerts` themselves."""
    if not alerts:
        text = f"gpuledger: no team has reached a budget threshold in {period}."
    else:
        text = f"gpuledger budget alerts for {period}:\n" + "\n".join(
            f"• [{a['severity']}] {a['summary']}" for a in alerts)
    return {"text": text, "period": period, "alerts": alerts}


def post(url: str, body: dict[str, Any], timeout_s: float = TIMEOUT_S) -> int:
    """POST `body` as JSON; returns the HTTP status. Errors name the host, never the URL."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError("finance.budget_webhook: expected an http:// or https:// URL")
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), method="POST",
        headers={"Content-Type": "application/json", "User-Agent": "gpuledger"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        raise ReportError(f"budget webhook at {parts.hostname} answered {exc.code}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ReportError(f"budget webhook at {parts.hostname} unreachable ({reason})") from None
