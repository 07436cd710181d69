"""Process logging: plain text for a terminal, one JSON object per line for a log pipeline.

Why here: `gpuledger serve` runs in a pod whose stdout goes to Loki, Elasticsearch or Cloud
Logging, which index JSON fields (level, logger, request path, status) but only grep text. Every
line passes the redaction layer (`core.redact`): the CLI's record factory already masks each
record's message and traceback at creation; the JSON formatter masks again the message, the
traceback and every string field passed with `extra=`, because extra fields bypass the factory.
Secrets therefore never reach a handler, whichever format is chosen.

Fields of a JSON line: `ts` (RFC 3339, UTC, milliseconds), `level`, `logger`, `msg`, then the
record's extra fields (`method`, `path`, `status`, `duration_ms`, ...), then `exc` when a
traceback is attached.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, Literal, TextIO

from gpuledger.core.errors import InputError
from gpuledger.core.redact import Redactor

LogFormat = Literal["text", "json"]
FORMATS: tuple[str, ...] = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_STANDARD = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}
"""Attributes every LogRecord has: whatever else a record carries came from `extra=`."""
_HANDLER_NAME = "gpuledger-root"


class JsonFormatter(logging.Formatter):
    """One JSON object per record, every string in it redacted."""

    def __init__(self, redactor: Redactor | None = None) -> None:
        super().__init__()
        self.redact = redactor or Redactor()

    def format(self, record: logging.LogRecord) -> str:
        stamp = datetime.fromtimestamp(record.created, UTC)
        line: dict[str, Any] = {
            "ts": stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": self.redact(record.getMessage()),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                line[key] = self._clean(value)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["exc"] = self.redact(record.exc_text)
        return json.dumps(line, default=str, ensure_ascii=False)

    def _clean(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, bool | int | float) or value is None:
            return value
        return self.redact(str(value))


def parse_format(text: str) -> LogFormat:
    """`--log-format` as given, or one clear line naming the choices."""
    if text not in FORMATS:
        raise InputError(f"--log-format {text!r}: expected one of {', '.join(FORMATS)}")
    return "json" if text == "json" else "text"


def configure(
    fmt: LogFormat = "text", *, level: int = logging.INFO, redactor: Redactor | None = None,
    stream: TextIO | None = None,
) -> logging.Handler:
    """Send every log record of the process to `stream` (stderr) in `fmt`; returns the handler.

    Idempotent: a second call replaces the handler installed by the first, never stacks one.
    """
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(JsonFormatter(redactor) if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    return handler
