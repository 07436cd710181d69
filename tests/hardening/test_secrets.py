"""No secret in any output, and one line, never a traceback, at the CLI's top level (issue 22
items 4 and 11).

The engine is a real local HTTP server (`http.server` on a loopback port) that records the
headers it receives and, like some proxies, echoes them back in its error body.

Cases:
- a token with a trailing newline (from `${ENV}`) is stripped: the server receives exactly
  `Bearer <token>`, and the error is one line without the token (today: a traceback quoting it);
- a token with a line break inside is refused before any request, naming the key, not the value;
- credentials in the Prometheus URL (`http://user:pass@host`) never appear in the error line,
  nor in the `--debug` traceback;
- a server that echoes the Authorization header (JSON error body or plain text) does not leak it
  through the error, from the CLI or from `PromHttp` itself;
- the redactor masks URL userinfo, query tokens (`?token=`, `access_token=`), `Bearer`/`Basic`
  credentials, an `Authorization:` header and every configured `SecretStr`, in all spellings;
- log records are masked at creation (message, arguments and traceback);
- top level: an invalid URL (bad scheme, bad IPv6 literal), a missing output folder (path under a
  file), a full disk (`/dev/full`) and a wrong-shape engine answer each give exactly one
  `gpuledger: error:` line and the documented exit code, a traceback only with `--debug`.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gpuledger.cli import EXIT_INTERNAL, EXIT_OS, main
from gpuledger.collectors.prom_http import PromHttp
from gpuledger.core.config import PrometheusSettings, ReportSettings, Settings
from gpuledger.core.errors import ConfigError, SourceError
from gpuledger.core.redact import MASK, Redactor, header_value, install_log_redaction

TOKEN = "s3cr3t-token-8f2a91c4"
PASSWORD = "hunter2-pw-77"
WINDOW = ["--start", "2026-11-01T00:00:00Z", "--end", "2026-11-01T01:00:00Z"]


# An engine that echoes ---------------------------------------------------------------------------
Answer = Callable[[str], tuple[int, str, bytes]]


@dataclass
class Engine:
    url: str
    seen: list[dict[str, str]] = field(default_factory=list)


def _echo_json(headers: str) -> tuple[int, str, bytes]:
    body = {"status": "error", "errorType": "bad_data", "error": f"rejected request with {headers}"}
    return 400, "application/json", json.dumps(body).encode()


@pytest.fixture
def engine() -> Iterator[Callable[[Answer], Engine]]:
    servers: list[ThreadingHTTPServer] = []

    def start(answer: Answer) -> Engine:
        state = Engine("")

        class Handler(BaseHTTPRequestHandler):
            def _reply(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                state.seen.append(dict(self.headers.items()))
                echoed = "; ".join(f"{k}: {v}" for k, v in self.headers.items())
                if "/label/" in self.path and not status_only(answer):
                    status, ctype, body = 200, "application/json", b'{"status":"success","data":["node-a"]}'
                else:
                    status, ctype, body = answer(echoed)
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _reply

            def log_message(self, *args: object) -> None:
                return

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        state.url = f"http://127.0.0.1:{server.server_port}"
        return state

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def status_only(answer: Answer) -> bool:
    """Answers marked `every_path` reply to label-value requests too (the first request made)."""
    return bool(getattr(answer, "every_path", False))


def every_path(answer: Answer) -> Answer:
    answer.every_path = True  # type: ignore[attr-defined]
    return answer


def _config(tmp_path: Path, header: str = "${PROM_AUTH}") -> Path:
    path = tmp_path / "gpuledger.yaml"
    path.write_text(f'prometheus:\n  auth_header: "{header}"\n  retries: 0\n  timeout_s: 5\n  chunk: 1h\n')
    return path


def _collect(tmp_path: Path, url: str, *extra: str) -> list[str]:
    return ["--config", str(_config(tmp_path)), "--warehouse", str(tmp_path / "wh.duckdb"),
            "collect", "--prometheus", url, *WINDOW, *extra]


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("gpuledger: error: ")]
    assert len(errors) == 1, err
    return errors[0]


# 1. Tokens ---------------------------------------------------------------------------------------
def test_trailing_newline_token_is_stripped_and_never_printed(tmp_path, engine, monkeypatch, capsys):
    server = engine(every_path(_echo_json))
    monkeypatch.setenv("PROM_AUTH", f"Bearer {TOKEN}\n")
    code = main(_collect(tmp_path, server.url))
    err = capsys.readouterr().err
    assert code == 1
    assert server.seen and server.seen[0]["Authorization"] == f"Bearer {TOKEN}"
    line = _one_error_line(err)
    assert "Traceback" not in err and TOKEN not in err
    assert "HTTP 400" in line and MASK in line


def test_token_with_inner_line_break_is_refused_unshown(tmp_path, engine, monkeypatch, capsys):
    server = engine(every_path(_echo_json))
    monkeypatch.setenv("PROM_AUTH", "Bearer abcd1234\nX-Injected: efgh5678")
    code = main(_collect(tmp_path, server.url))
    err = capsys.readouterr().err
    assert code == 2 and server.seen == []
    line = _one_error_line(err)
    assert "prometheus.auth_header" in line and "line break" in line
    assert "abcd1234" not in err and "efgh5678" not in err


def test_header_value_strips_and_validates():
    assert header_value("  Bearer x\r\n", "k") == "Bearer x"
    for bad in ("", " \n", "Bearer a\rb", "a\x00b"):
        with pytest.raises(ConfigError):
            header_value(bad, "k")


# 2. URLs and echoing servers ----------------------------------------------------------------------
@pytest.mark.parametrize("debug", [False, True])
def test_url_credentials_are_never_printed(tmp_path, engine, monkeypatch, capsys, debug):
    server = engine(every_path(lambda _h: (503, "text/plain", b"down for maintenance")))
    monkeypatch.setenv("PROM_AUTH", f"Bearer {TOKEN}")
    url = server.url.replace("http://", f"http://alice:{PASSWORD}@")
    code = main(_collect(tmp_path, url, *(["--debug"] if debug else [])))
    err = capsys.readouterr().err
    assert code == 1
    line = _one_error_line(err)
    assert PASSWORD not in err and "alice:" not in err
    assert f"http://{MASK}@127.0.0.1" in line
    assert ("Traceback" in err) is debug


@pytest.mark.parametrize("answer", [
    _echo_json,
    lambda headers: (401, "text/plain", f"who are you? {headers}".encode()),
], ids=["json-error", "plain-text"])
def test_echoed_authorization_does_not_leak(tmp_path, engine, monkeypatch, capsys, answer):
    server = engine(every_path(answer))
    monkeypatch.setenv("PROM_AUTH", f"Bearer {TOKEN}")
    assert main(_collect(tmp_path, server.url, "--debug")) == 1
    err = capsys.readouterr().err
    assert TOKEN not in err
    assert "Authorization" in _one_error_line(err)  # the echo is shown, its value masked


def test_prom_http_errors_are_redacted_at_the_source(engine):
    server = engine(every_path(_echo_json))
    basic = base64.b64encode(f"svc:{PASSWORD}".encode()).decode()
    settings = PrometheusSettings(auth_header=f"Basic {basic}", retries=0)
    http = PromHttp(server.url.replace("http://", f"http://svc:{PASSWORD}@"), settings)
    try:
        with pytest.raises(SourceError) as caught:
            http.query("up", datetime(2026, 11, 1, tzinfo=UTC))
    finally:
        http.close()
    text = str(caught.value)
    assert server.seen, "the request was sent"
    assert PASSWORD not in text and basic not in text and "HTTP 400" in text


# 3. The redactor ----------------------------------------------------------------------------------
def test_redactor_masks_every_spelling_and_pattern():
    settings = Settings(
        prometheus=PrometheusSettings(url=f"https://bob:{PASSWORD}@prom:9090", auth_header=f"Bearer {TOKEN}\n"),
        reports=ReportSettings(signing_key="k3y-for-hmac-signing"),
    )
    redact = Redactor.of(settings)
    samples = {
        f"header b'Bearer {TOKEN}\\n' refused": TOKEN,
        f'{{"auth": "Bearer {TOKEN}\\n"}}': TOKEN,
        f"echo {TOKEN}": TOKEN,
        f"https://bob:{PASSWORD}@prom:9090/api/v1/query": PASSWORD,
        "key k3y-for-hmac-signing": "k3y-for-hmac-signing",
        "GET /x?token=abcdef123&step=60": "abcdef123",
        "callback access_token=zz-9-zz-9 done": "zz-9-zz-9",
        "Authorization: Bearer eyJhbGciOi.unknown.token": "eyJhbGciOi",
        "proxy said 'Basic dXNlcjpvdGhlcnB3'": "dXNlcjpvdGhlcnB3",
        "https://carol:pw@other-host/": "carol:pw",
    }
    for text, secret in samples.items():
        masked = redact(text)
        assert secret not in masked and MASK in masked, (text, masked)
    assert redact("plain message, Basic auth failed") == "plain message, Basic auth failed"


def test_log_records_are_masked(monkeypatch):
    stream = io.StringIO()
    logger = logging.getLogger("gpuledger.test.redact")
    handler = logging.StreamHandler(stream)
    logger.addHandler(handler)
    undo = install_log_redaction(Redactor.of(f"Bearer {TOKEN}"))
    try:
        try:
            raise ValueError(f"bad header Bearer {TOKEN}")
        except ValueError:
            logger.exception("sending %s to %s", f"Bearer {TOKEN}", f"http://u:{PASSWORD}@h")
    finally:
        undo()
        logger.removeHandler(handler)
    out = stream.getvalue()
    assert "Traceback" in out and TOKEN not in out and PASSWORD not in out


# 4. One line at the top level ---------------------------------------------------------------------
@pytest.mark.parametrize("url", ["ftp://127.0.0.1:9", "http://[::1", "http://:80"])
def test_invalid_url_is_one_line(tmp_path, monkeypatch, capsys, url):
    monkeypatch.setenv("PROM_AUTH", f"Bearer {TOKEN}")
    assert main(_collect(tmp_path, url)) == 2
    err = capsys.readouterr().err
    assert "Prometheus URL" in _one_error_line(err) and "Traceback" not in err


def test_missing_output_folder_is_one_line(tmp_path, capsys):
    (tmp_path / "afile").write_text("")
    code = main(["simulate", "--gpus", "8", "--days", "1", "--manifests", "--out", str(tmp_path / "afile" / "x")])
    err = capsys.readouterr().err
    assert code == EXIT_OS and "Traceback" not in err
    assert "Not a directory" in _one_error_line(err)


def test_full_disk_is_one_line_and_debug_shows_the_traceback(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "manifests.yaml").symlink_to("/dev/full")
    args = ["simulate", "--gpus", "8", "--days", "1", "--manifests", "--out", str(out)]
    assert main(args) == EXIT_OS
    err = capsys.readouterr().err
    assert "No space left on device" in _one_error_line(err) and "Traceback" not in err
    assert main([*args, "--debug"]) == EXIT_OS
    err = capsys.readouterr().err
    assert "Traceback" in err and "No space left on device" in _one_error_line(err)


@pytest.mark.parametrize("case", [
    (b'{"status":"success","data":null}', False), (b'{"status":"success"}', False),
    (b'{"status":"success","data":null}', True),
], ids=["null-data", "no-data", "null-data-debug"])
def test_wrong_shape_engine_answer_is_one_line(tmp_path, engine, monkeypatch, capsys, case):
    body, debug = case
    server = engine(lambda _h: (200, "application/json", body))
    monkeypatch.setenv("PROM_AUTH", f"Bearer {TOKEN}")
    code = main(_collect(tmp_path, server.url, *(["--debug"] if debug else [])))
    err = capsys.readouterr().err
    assert code in (1, EXIT_INTERNAL)
    assert ("Traceback" in err) is debug
    assert TOKEN not in err and _one_error_line(err)
