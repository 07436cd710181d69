"""The HTTP side of talking to a Prometheus-compatible engine.

`prometheus-api-client`'s `PrometheusConnect` configures each session: the auth header, TLS
verification, POST, the per-request timeout and a urllib3 retry adapter. The retry policy is
ours: only 5xx answers, timeouts and refused connections are retried, with exponential
backoff and a small bound, so a bad query (4xx) fails at once instead of causing a retry storm.
The body of a range query is returned as bytes: `prom_parse` reads it straight into Polars.
`send` is the one request primitive (forms, or a raw body with extra headers for remote read;
the response whatever its status, so a probe can read a 404 as "not served").

Every answer is read under a whole-request deadline (`prometheus.deadline_s`: `timeout_s` is per
socket read, which a trickling server never trips): its headers through `http_deadline`'s
connections, its body as it arrives (`_read_body`), with a cap on its decoded size
(`prometheus.max_response_mb`), each refused in one line naming the query and the setting,
nothing past the cap kept (docs/decisions/0184).

One client per worker thread: a `requests.Session` is not documented as thread-safe, and a
session per thread also gives each worker its own connection.

No secret in any error (`core.redact`): the URL is checked and shown without its userinfo, the
auth header is stripped and refused if it holds a line break (requests would raise an exception
quoting it), and every message, the engine's error body included (a proxy may echo the request
headers back), passes through the redactor built from these settings.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import requests
import urllib3
from prometheus_api_client import PrometheusConnect
from urllib3.util.retry import Retry

from gpuledger.collectors.http_deadline import DeadlineAdapter, DeadlinePassed, deadline_for
from gpuledger.core.config import PrometheusSettings
from gpuledger.core.errors import InputError, SourceError
from gpuledger.core.redact import Redactor, header_value

RETRY_STATUS = (500, 502, 503, 504)
_ERROR_TEXT_LIMIT = 300
_READ_SIZE = 1 << 16


def _retry_policy(retries: int, backoff: float) -> Retry:
    return Retry(
        total=retries,
        connect=retries,
        read=retries,
        status=retries,
        other=0,
        backoff_factor=backoff,
        status_forcelist=RETRY_STATUS,
        allowed_methods=frozenset({"GET", "POST"}),
        raise_on_status=False,
        respect_retry_after_header=False,
    )


def _ts(moment: datetime) -> str:
    return f"{moment.timestamp():.3f}"


class PromHttp:
    """Range, instant and label-values requests against one engine URL."""

    def __init__(self, url: str, settings: PrometheusSettings, *, backoff_s: float = 0.5) -> None:
        self.url = url.strip().rstrip("/")
        self.settings = settings
        self.redact = Redactor.of(settings, self.url)
        self.shown_url = self.redact.url(self.url)
        """The URL as messages show it (userinfo and query tokens masked)."""
        _check_url(self.url, self.shown_url)
        self._headers: dict[str, str] = {}
        if settings.auth_header is not None:
            self._headers["Authorization"] = header_value(
                settings.auth_header.get_secret_value(), "prometheus.auth_header")
        self._backoff = backoff_s
        self._local = threading.local()
        self._clients: list[PrometheusConnect] = []
        self._lock = threading.Lock()
        self.requests_sent = 0
        self.log: list[tuple[str, dict[str, str | list[str]] | bytes]] | None = None
        """When a list, every request's path and form is appended (benchmarks replay them)."""

    # 1. One configured PrometheusConnect per thread ---------------------------------------
    def _client(self) -> PrometheusConnect:
        client: PrometheusConnect | None = getattr(self._local, "client", None)
        if client is None:
            retry = _retry_policy(self.settings.retries, self._backoff)
            client = PrometheusConnect(
                url=self.url,
                headers=dict(self._headers),
                disable_ssl=not self.settings.verify_tls,
                retry=retry,
                timeout=self.settings.timeout_s,
                method="POST",
            )
            client._session.mount(self.url, DeadlineAdapter(max_retries=retry))  # replaces its adapter
            self._local.client = client
            with self._lock:
                self._clients.append(client)
        return client

    def close(self) -> None:
        with self._lock:
            for client in self._clients:
                client.close()
            self._clients.clear()

    # 2. Requests ---------------------------------------------------------------------------
    def post(self, path: str, form: Mapping[str, str | list[str]], what: str, *,
             method: str = "POST") -> bytes:
        """Send a form to an API path (POST, or GET for endpoints that only take GET); return
        the raw body of a 200, else raise SourceError."""
        response = self.send(path, what, form=form, method=method)
        if response.status_code != 200:
            raise self.refused(response, what)
        return response.content

    def send(self, path: str, what: str, *, form: Mapping[str, str | list[str]] | None = None,
             body: bytes | None = None, headers: Mapping[str, str] | None = None,
             method: str = "POST") -> requests.Response:
        """One request with this engine's session (auth, TLS, retries); the response whatever
        its status (the caller decides: a probe reads a 404 as "not served"). A request that
        got no answer at all raises SourceError."""
        client = self._client()
        session: requests.Session = client._session
        with self._lock:
            self.requests_sent += 1
            if self.log is not None:
                self.log.append((path, body if body is not None else dict(form or {})))
        deadline = time.monotonic() + self.settings.deadline_s
        try:
            with deadline_for(deadline):
                response = session.request(
                    method,
                    f"{self.url}{path}",
                    data=body if body is not None else (dict(form or {}) if method == "POST" else None),
                    params=dict(form or {}) if method == "GET" else None,
                    headers={**client.headers, **(headers or {})},
                    timeout=self.settings.timeout_s,
                    verify=session.verify,
                    stream=True,
                )
        except DeadlinePassed:
            raise self._late(what, "no complete status line and headers") from None
        except requests.exceptions.RequestException as exc:
            raise SourceError(self.redact(self._failure(exc, what))) from None
        try:
            response._content = self._read_body(response, what, deadline)
            response._content_consumed = True  # type: ignore[attr-defined]  # requests' idiom for a read body
        finally:
            response.close()
        return response

    def _read_body(self, response: requests.Response, what: str, deadline: float) -> bytes:
        """The decoded body, read as it arrives: refused past `deadline_s` (whole request) or
        `max_response_mb` (decoded bytes, so a gzip bomb counts what it inflates to). Why here:
        `timeout_s` is per socket read, so a server trickling 64 bytes every half second never
        trips it, and `response.content` buffers whatever size comes; `read1` returns what one
        read gives, so the deadline is checked at every arrival and nothing past the cap is kept."""
        cap = int(self.settings.max_response_mb * 1_000_000)
        parts: list[bytes] = []
        size = 0
        raw = response.raw
        try:
            while True:
                if time.monotonic() > deadline:
                    raise self._late(what, f"read {size:,} bytes")
                part = raw.read1(_READ_SIZE, decode_content=True)
                if not part:
                    break
                size += len(part)
                if size > cap:
                    raise SourceError(self.redact(
                        f"{self.shown_url}: {what}: answer larger than prometheus.max_response_mb = "
                        f"{self.settings.max_response_mb:g} MB (refused while reading; a shorter "
                        "prometheus.chunk or a narrower query keeps answers smaller)"))
                parts.append(part)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise SourceError(self.redact(
                f"{self.shown_url}: {what}: answer cut off after {size:,} bytes "
                f"({type(exc).__name__}: {_reason(exc)})")) from None
        return b"".join(parts)

    def _late(self, what: str, detail: str) -> SourceError:
        """The one line for an answer not whole within the request's deadline (redacted)."""
        return SourceError(self.redact(f"{self.shown_url}: {what}: no whole answer within "
                                       f"prometheus.deadline_s = {self.settings.deadline_s:g}s ({detail})"))

    def refused(self, response: requests.Response, what: str) -> SourceError:
        """The one-line error for an answer that is not a 200 (redacted)."""
        return SourceError(self.redact(f"{self.shown_url}: {what} failed: HTTP {response.status_code}: "
                                       f"{_error_text(response)}"))

    def _failure(self, exc: requests.exceptions.RequestException, what: str) -> str:
        """One line for a request that got no usable answer (message still to be redacted)."""
        retries = self.settings.retries
        if isinstance(exc, requests.exceptions.RetryError):
            return f"{self.shown_url}: {what}: still failing after {retries} retries ({_reason(exc)})"
        if isinstance(exc, requests.exceptions.ConnectionError):
            return (f"{self.shown_url}: cannot reach the metrics engine for {what} "
                    f"(after {retries} retries: {_reason(exc)})")
        if isinstance(exc, requests.exceptions.Timeout):
            timeout = self.settings.timeout_s
            return f"{self.shown_url}: {what} timed out after {timeout:g}s ({retries} retries)"
        return f"{self.shown_url}: {what}: request refused before sending ({type(exc).__name__}: {exc})"

    def query_range(self, query: str, start: datetime, last: datetime, step_s: float) -> bytes:
        """`/api/v1/query_range` from `start` to `last` inclusive."""
        form = {"query": query, "start": _ts(start), "end": _ts(last), "step": f"{step_s:g}",
                "timeout": f"{self.settings.timeout_s:g}s"}
        return self.post("/api/v1/query_range", form,
                         f"query {query!r} for {start.isoformat()} .. {last.isoformat()}")

    def query_matrix(self, query: str, at: datetime) -> bytes:
        """`/api/v1/query` at one instant for a range selector: the raw body of its matrix
        answer (`prom_parse.parse_matrix` reads it as it reads a range query's)."""
        form = {"query": query, "time": _ts(at), "timeout": f"{self.settings.timeout_s:g}s"}
        return self.post("/api/v1/query", form, f"query {query!r} at {at.isoformat()}")

    def query(self, query: str, at: datetime) -> dict[str, Any]:
        """`/api/v1/query` at one instant, parsed (small answers only)."""
        form = {"query": query, "time": _ts(at), "timeout": f"{self.settings.timeout_s:g}s"}
        what = f"query {query!r} at {at.isoformat()}"
        parsed = _json(self.post("/api/v1/query", form, what), query, self.redact)
        data = parsed.get("data")
        result = data.get("result") if isinstance(data, dict) else None
        if not isinstance(result, list) or not all(_vector_item(item) for item in result):
            raise SourceError(self.redact(
                f"{self.shown_url}: answer to {what} is not a Prometheus vector (each item "
                f"{{\"metric\": {{...}}, \"value\": [time, \"value\"]}}): {str(data)[:120]}"))
        return parsed

    def label_values(self, label: str, match: str, start: datetime, end: datetime) -> list[str]:
        """Values of `label` on series matching `match` within `[start, end]`."""
        form = {"match[]": match, "start": _ts(start), "end": _ts(end)}
        body = self.post(f"/api/v1/label/{label}/values", form, f"label values of {label} for {match}",
                         method="GET")  # POST here only since Prometheus 2.4x; GET works everywhere
        data = _json(body, match, self.redact).get("data") or []
        if not isinstance(data, list):
            raise SourceError(f"{self.shown_url}: label values of {label}: expected a list, got "
                              f"{type(data).__name__}")
        return [str(v) for v in data]


def _check_url(url: str, shown: str) -> None:
    """Refuse a URL requests cannot use, before any thread is started, without its secrets."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises ValueError on a bad port)
    except ValueError as exc:
        raise InputError(f"Prometheus URL {shown!r}: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"Prometheus URL {shown!r}: expected http(s)://host[:port][/path]")


def _json(body: bytes, what: str, redact: Redactor) -> dict[str, Any]:
    try:
        parsed = json.loads(body)
    except ValueError:
        raise SourceError(redact(f"answer to {what!r} is not JSON ({body[:80]!r})")) from None
    if not isinstance(parsed, dict) or parsed.get("status") != "success":
        raise SourceError(redact(f"answer to {what!r}: {str(parsed)[:_ERROR_TEXT_LIMIT]}"))
    return parsed


def _vector_item(item: object) -> bool:
    """One instant-vector item as Prometheus writes it (`web/api/v1` `vector` JSON: a label
    object and a `[time, "value"]` pair); callers read both without further checks."""
    if not isinstance(item, dict) or not isinstance(item.get("metric", {}), dict):
        return False
    value = item.get("value", [0, "0"])
    return isinstance(value, list) and len(value) == 2 and isinstance(value[1], str)


def _error_text(response: requests.Response) -> str:
    try:
        payload = response.json()
        text = f"{payload.get('errorType', 'error')}: {payload.get('error', '')}"
    except ValueError:
        text = response.text
    text = " ".join(text.split())
    return text[:_ERROR_TEXT_LIMIT] or response.reason or "no detail"


def _reason(exc: Exception) -> str:
    """The innermost cause of a requests/urllib3 error, without the URL noise."""
    cause: BaseException = exc
    while True:
        inner = getattr(cause, "reason", None) or cause.__cause__ or cause.__context__
        if inner is None or inner is cause or not isinstance(inner, BaseException):
            break
        cause = inner
    text = str(cause)
    if "Connection refused" in text:
        return "connection refused"
    return text.split(": ", 1)[-1][:_ERROR_TEXT_LIMIT]
