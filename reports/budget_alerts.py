"""Budget alerts to a webhook: one POST of generic JSON that Slack also understands.

The body is `{"text": "...", "alerts": [...]}`: Slack (and Mattermost, Teams' incoming
webhooks, most chat bridges) shows `text`; anything else reads `alerts`, the records of
`analytics.billing.budgets.alerts`. The URL is a secret (`finance.budget_webhook`: a Slack URL carries
its token), so it is never logged nor echoed: errors name the host only; it is validated when
the config loads (`core.config_budgets.check_webhook_url`), and a redirect is reported as not
delivered, never followed (urllib would re-send the POST as a GET and drop the alert).

Why a POST per run and no "already sent" memory: whoever schedules it (the collect CronJob,
`gpuledger budgets --notify`) decides how often; Prometheus' alert rules
(the chart's `deploy/helm/gpuledger/files/gpuledger-rules.yaml`) are the de-duplicated, routed path.
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

from gpuledger.core.config_budgets import check_webhook_url
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


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A 3xx is an answer, not a new address: urllib would re-send a POST as a GET to the
    `Location` (the alert dropped, "sent (HTTP 200)" reported), and the Location may carry a
    token of its own. The answer comes back as an `HTTPError` with the 3xx code instead."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def post(url: str, body: dict[str, Any], timeout_s: float = TIMEOUT_S) -> int:
    """POST `body` as JSON; returns the HTTP status (2xx only: anything else, a redirect
    included, is `ReportError`, not delivered). Errors name the host, never the URL."""
    try:
        url = check_webhook_url(url)
    except ValueError as exc:
        raise InputError(f"finance.budget_webhook: {exc}") from None
    host = urlsplit(url).hostname
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), method="POST",
        headers={"Content-Type": "application/json", "User-Agent": "gpuledger"},
    )
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(request, timeout=timeout_s) as answer:
            status = int(answer.status)
    except urllib.error.HTTPError as exc:
        if 300 <= exc.code < 400:
            raise ReportError(f"budget webhook at {host} answered {exc.code} (a redirect): alerts "
                              "not delivered; set finance.budget_webhook to the final URL") from None
        raise ReportError(f"budget webhook at {host} answered {exc.code}: alerts not delivered") from None
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:
        reason = getattr(exc, "reason", None) or type(exc).__name__
        raise ReportError(f"budget webhook at {host} unreachable ({reason})") from None
    if not 200 <= status < 300:
        raise ReportError(f"budget webhook at {host} answered {status}: alerts not delivered")
    return status
