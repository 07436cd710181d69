"""Issue 31 item 3: the budget webhook's secret (its URL path) is never printed, a bad URL is
one line at config load, and a redirect is reported as not delivered.

Cases:
- a URL with an inner space or newline, a port `abc`, a host `[::1`, a scheme `ftp`: the config
  load refuses it in one line naming `finance.budget_webhook` and never the token; the same from
  `gpuledger budgets --notify` as a user runs it, with and without `--debug` (today: exit 70
  printing `unexpected InvalidURL: ... /services/T0/<token> `);
- a trailing newline (an environment variable read from a file) is stripped, not an error;
- a webhook answering 302 to a GET-accepting URL: `post` raises "not delivered" naming the host,
  and the redirect target receives nothing (today: followed as a GET, "sent (HTTP 200)");
- the settings' redactor masks the URL's path in a message that quotes only the path.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from gpuledger.core.config import load_settings
from gpuledger.core.errors import ConfigError, ReportError
from gpuledger.core.redact import Redactor
from gpuledger.reports.budget_alerts import post

TOKEN = "XoXbSeCrEtT0kEn42"
GOOD = f"https://hooks.example.com/services/T0/B0/{TOKEN}"
BAD = {
    "inner space": f"https://hooks.example.com/services/T0/ {TOKEN}",
    "inner newline": f"https://hooks.example.com/services/T0/\\n{TOKEN}",
    "port abc": f"https://hooks.example.com:abc/services/T0/{TOKEN}",
    "host [::1": f"http://[::1/services/T0/{TOKEN}",
    "scheme ftp": f"ftp://hooks.example.com/services/T0/{TOKEN}",
}


def _config(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "gpuledger.yaml"
    path.write_text(f'finance:\n  budget_webhook: "{url}"\n')
    return path


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_url_refused_at_load(tmp_path: Path, case: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load_settings(_config(tmp_path, BAD[case]))
    message = str(refused.value)
    assert "finance.budget_webhook" in message and TOKEN not in message and "\n" not in message


@pytest.mark.parametrize("debug", [False, True])
@pytest.mark.parametrize("case", ["inner space", "port abc", "host [::1"])
def test_cli_never_prints_the_token(tmp_path: Path, case: str, debug: bool) -> None:
    env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", str(Path.cwd()))}
    run = subprocess.run(
        [sys.executable, "-m", "gpuledger", "--config", str(_config(tmp_path, BAD[case])),
         "--warehouse", str(tmp_path / "w.duckdb"), *(["--debug"] if debug else []), "budgets", "--notify"],
        capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert run.returncode not in (0, 70), run.stderr
    assert TOKEN not in run.stderr + run.stdout
    assert "budget_webhook" in run.stderr
    assert debug or "Traceback" not in run.stderr  # --debug shows the (redacted) traceback by design


def test_trailing_newline_stripped(tmp_path: Path) -> None:
    settings = load_settings(_config(tmp_path, GOOD + "\\n "))
    hook = settings.finance.budget_webhook
    assert hook is not None and hook.get_secret_value() == GOOD


class _Hook(BaseHTTPRequestHandler):
    seen: ClassVar[list[tuple[str, str]]] = []

    def do_POST(self) -> None:
        self.seen.append(("POST", self.path))
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(302)
        self.send_header("Location", "/landing?token=" + TOKEN)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        self.seen.append(("GET", self.path))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def hook() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Hook.seen.clear()
    yield f"http://127.0.0.1:{server.server_port}/services/T0/{TOKEN}"
    server.shutdown()
    server.server_close()
    thread.join(5)


def test_redirect_is_not_delivered(hook: str) -> None:
    with pytest.raises(ReportError) as refused:
        post(hook, {"text": "alert"})
    message = str(refused.value)
    assert "302" in message and "not delivered" in message and "127.0.0.1" in message
    assert TOKEN not in message
    assert _Hook.seen == [("POST", f"/services/T0/{TOKEN}")]  # the Location was never requested


def test_redactor_masks_the_path_alone(tmp_path: Path) -> None:
    settings = load_settings(_config(tmp_path, GOOD))
    redact = Redactor.of(settings)
    quoted = f"unexpected InvalidURL: URL can't contain control characters. '/services/T0/B0/{TOKEN} '"
    assert TOKEN not in redact(quoted) and TOKEN not in redact(f"token {TOKEN}")
