"""core.logs: one JSON object per line; secrets masked in the message, the extra fields and the
traceback (extra fields bypass the CLI's record factory, so the formatter masks them itself)."""

from __future__ import annotations

import io
import json
import logging

import pytest

from gpuledger.core import logs
from gpuledger.core.errors import InputError
from gpuledger.core.redact import Redactor

SECRET = "hunter2-very-secret-token"


def test_json_lines_mask_every_string():
    stream = io.StringIO()
    handler = logs.configure("json", redactor=Redactor.of(SECRET), stream=stream)
    log = logging.getLogger("gpuledger.test")
    try:
        log.info("token %s", SECRET, extra={"path": f"/x/{SECRET}", "status": 404, "ok": True})
        try:
            raise RuntimeError(f"failed with {SECRET}")
        except RuntimeError:
            log.exception("boom")
    finally:
        logging.getLogger().removeHandler(handler)
    text = stream.getvalue()
    assert SECRET not in text
    first, second = (json.loads(line) for line in text.splitlines())
    assert first["msg"] == "token ***" and first["path"] == "/x/***"
    assert first["status"] == 404 and first["ok"] is True and first["level"] == "info"
    assert first["logger"] == "gpuledger.test" and first["ts"].endswith("Z")
    assert second["level"] == "error" and "RuntimeError: failed with ***" in second["exc"]


def test_configure_replaces_its_handler_and_text_stays_text():
    stream = io.StringIO()
    logs.configure("json", stream=io.StringIO())
    handler = logs.configure("text", stream=stream)
    try:
        ours = [h for h in logging.getLogger().handlers if h.get_name() == handler.get_name()]
        assert ours == [handler]
        logging.getLogger("gpuledger.test").warning("plain")
        assert stream.getvalue().rstrip().endswith("WARNING gpuledger.test: plain")
    finally:
        logging.getLogger().removeHandler(handler)


def test_unknown_format_is_one_clear_line():
    with pytest.raises(InputError, match="--log-format 'xml': expected one of text, json"):
        logs.parse_format("xml")
