"""The one redaction layer: what every message, log line and traceback passes through before a
person (or a log collector) sees it.

Why one layer, and why patterns *and* values: a secret reaches output by three routes, and
each needs its own guard.

1. Configured secrets (`prometheus.auth_header`, `reports.signing_key`, any `SecretStr` in the
   settings): pydantic hides them in `repr`, but not once `get_secret_value()` has handed them to
   a library that puts them in an exception (requests' "Invalid header value b'Bearer …\\n'") or
   to a server that echoes the request back. These are masked by *value*, in the spellings a
   message can carry them in (raw, stripped, `repr`-escaped, JSON-escaped, URL-quoted).
2. Credentials inside URLs (`https://user:pass@host`): every error message that names the engine
   carries the URL; the userinfo is masked by *pattern*, so a URL given by `--prometheus` (not in
   the settings) is covered too.
3. Tokens in query strings (`?token=…`, `access_token=…`, `api_key=…`) and credentials after an
   auth scheme or header name (`Bearer …`, `Authorization: …`): masked by pattern, whatever the
   source.

`Redactor` is a plain value built from the settings by the caller (the CLI, the collector's HTTP
client), never a global; `install_log_redaction` is the one process-wide hook, set by the CLI
roof, so that log records are masked however a handler formats them.

`header_value` is the other half of the rule "tokens are stripped and validated when used": a
header value read from an environment variable often ends in a newline (`echo token > file`),
which requests refuses with an exception quoting the token; it is stripped, and a value with a
line break or control character inside is refused without being shown.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from gpuledger.core.errors import ConfigError

MASK = "***"
MIN_SECRET_LEN = 4
"""Shorter values are not masked by value (masking "ab" everywhere would garble every message);
the patterns still mask them in URLs, query strings and after an auth scheme."""

_USERINFO = re.compile(r"(?P<keep>\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^/?#@\s'\"<>]+(?=@)")
_QUERY_SECRET = re.compile(
    r"(?P<keep>(?<![A-Za-z0-9_-])(?:access_token|id_token|refresh_token|auth_token|token|api_key|"
    r"apikey|api-key|password|passwd|secret|client_secret|signature|sig|key)=)"
    r"[^&#\s'\"<>]+",
    re.IGNORECASE,
)
_AUTH_SCHEME = re.compile(
    r"(?P<keep>\b(?:Bearer|Basic|Token|Digest|Negotiate)\s+)[A-Za-z0-9._~+/=:-]{8,}", re.IGNORECASE)
_AUTH_HEADER = re.compile(
    r"(?P<keep>\b(?:proxy-authorization|authorization|x-api-key|x-auth-token|cookie)['\"]?\s*[:=]\s*"
    r"(?:b?['\"])?)(?:(?:Bearer|Basic|Token)\s+)?[^'\"\r\n,;}\s]+",
    re.IGNORECASE,
)
_PATTERNS = (_USERINFO, _QUERY_SECRET, _AUTH_HEADER, _AUTH_SCHEME)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _masked(match: re.Match[str]) -> str:
    return match.group("keep") + MASK


def _spellings(secret: str) -> Iterator[str]:
    """The forms a secret takes inside messages: as is, stripped, escaped by repr/JSON, quoted."""
    for value in (secret, secret.strip()):
        yield value
        yield repr(value)[1:-1]
        yield json.dumps(value)[1:-1]
        yield quote(value, safe="")
    scheme, _, credential = secret.strip().partition(" ")
    if credential and scheme.isalpha():
        yield credential.strip()  # the token without "Bearer"
        yield from _basic_parts(credential.strip())


def _basic_parts(credential: str) -> Iterator[str]:
    """A Basic credential decoded: a server may echo `user:password` or the password alone."""
    try:
        decoded = base64.b64decode(credential, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return
    yield decoded
    _, sep, password = decoded.partition(":")
    if sep:
        yield password


def url_secrets(url: str) -> Iterator[str]:
    """The password (and `user:password`) inside a URL's userinfo, raw and decoded."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return
    netloc = parts.netloc
    if "@" not in netloc:
        return
    userinfo = netloc.rsplit("@", 1)[0]
    yield userinfo
    yield unquote(userinfo)
    if parts.password:
        yield parts.password
        yield unquote(parts.password)


def url_path_secrets(value: str) -> Iterator[str]:
    """A secret URL's path and query, and each path segment of 8+ characters: a webhook URL
    (Slack's `/services/T0/B0/<token>`) carries its token in the path, and a library's error may
    quote the path alone (`InvalidURL: ... '/services/T0/<token> '`), never the whole value."""
    text = value.strip()
    if "://" not in text:
        return
    try:
        parts = urlsplit(text)
    except ValueError:
        parts = urlsplit(text.replace("[", "").replace("]", ""))  # a bad host: the path is still secret
    tail = parts.path + (f"?{parts.query}" if parts.query else "")
    if len(tail) > 1:
        yield tail
        yield parts.path
    for segment in parts.path.split("/"):
        if len(segment) >= 8:
            yield segment


def settings_secrets(model: Any) -> Iterator[str]:
    """Every `SecretStr` value and every URL password anywhere in a settings model (walked by
    its fields, so a secret added to the config later is covered without touching this)."""
    from pydantic import BaseModel, SecretStr

    if isinstance(model, SecretStr):
        yield model.get_secret_value()
        yield from url_path_secrets(model.get_secret_value())
    elif isinstance(model, BaseModel):
        for name in type(model).model_fields:
            yield from settings_secrets(getattr(model, name))
    elif isinstance(model, tuple | list):
        for item in model:
            yield from settings_secrets(item)
    elif isinstance(model, dict):
        for item in model.values():
            yield from settings_secrets(item)
    elif isinstance(model, str) and "://" in model:
        yield from url_secrets(model)


@dataclass(frozen=True)
class Redactor:
    """Masks known secret values and secret-shaped patterns in any text."""

    secrets: tuple[str, ...] = ()

    @classmethod
    def of(cls, *sources: Any) -> Redactor:
        """A redactor for settings models, URLs (their userinfo is secret, the rest is not) and
        plain secret strings given as `sources`."""
        found: list[str] = []
        for source in sources:
            if isinstance(source, str):
                found.extend(url_secrets(source) if "://" in source else [source])
            elif source is not None:
                found.extend(settings_secrets(source))
        return cls().with_secrets(found)

    def with_secrets(self, values: Iterable[str]) -> Redactor:
        spelled = {s for v in values if v for s in _spellings(v) if len(s) >= MIN_SECRET_LEN}
        spelled.discard(MASK)
        merged = sorted(spelled | set(self.secrets), key=lambda s: (-len(s), s))
        return Redactor(tuple(merged))

    def __call__(self, text: str) -> str:
        for secret in self.secrets:  # longest first, so a token inside a header is masked whole
            if secret in text:
                text = text.replace(secret, MASK)
        for pattern in _PATTERNS:
            text = pattern.sub(_masked, text)
        return text

    def url(self, url: str) -> str:
        """A URL fit to print: userinfo and query tokens masked."""
        return self(url)

    def exception(self, exc: BaseException, *, with_traceback: bool = False) -> str:
        """The exception's message, or its whole traceback, masked."""
        if with_traceback:
            return self("".join(traceback.format_exception(exc)))
        return self(str(exc))


def header_value(raw: str, what: str) -> str:
    """A header value fit to send: surrounding whitespace stripped (a token read from a file or
    a variable often ends in a newline); one with a line break or control character inside, or
    an empty one, is refused without showing it (the value is a secret)."""
    value = raw.strip()
    if not value:
        raise ConfigError(f"{what}: is empty (check the variable or file it comes from)")
    if _CONTROL.search(value):
        raise ConfigError(
            f"{what}: contains a line break or control character (value not shown); check the "
            "variable or file it comes from"
        )
    return value


def install_log_redaction(redactor: Redactor) -> Callable[[], None]:
    """Mask every log record of this process at creation (message, arguments, traceback), so no
    handler can print a secret however it formats; returns the function that undoes it."""
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        try:
            record.msg, record.args = redactor(record.getMessage()), None
        except (TypeError, ValueError):  # a malformed %-format: mask the raw parts instead
            record.msg, record.args = redactor(str(record.msg)), None
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = redactor("".join(traceback.format_exception(record.exc_info[1])).rstrip())
        if record.stack_info:
            record.stack_info = redactor(record.stack_info)
        return record

    logging.setLogRecordFactory(factory)

    def undo() -> None:
        logging.setLogRecordFactory(previous)

    return undo
