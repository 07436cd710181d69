"""`python -m tests.deploy.serve_main CONFIG WAREHOUSE PORT OPS_PORT TMP [FORMAT] [LEVEL]`.

The production server (`dashboards.server.serve_production`, gunicorn) as `gpuledger serve`
runs it, with its private snapshots under TMP so a test can see what it leaves behind.
"""

from __future__ import annotations

import logging
import sys
import tempfile
from pathlib import Path

from gpuledger.core import logs
from gpuledger.core.config import load_settings
from gpuledger.core.redact import Redactor, install_log_redaction
from gpuledger.dashboards.server import ServeOptions, serve_production


def main(argv: list[str]) -> int:
    config, warehouse, port, ops_port, tmp = argv[:5]
    fmt = logs.parse_format(argv[5] if len(argv) > 5 else "json")
    level = getattr(logging, (argv[6] if len(argv) > 6 else "info").upper())
    tempfile.tempdir = tmp
    settings = load_settings(Path(config))
    redactor = Redactor.of(settings)
    install_log_redaction(redactor)
    logs.configure(fmt, level=level, redactor=redactor)
    opts = ServeOptions(port=int(port), ops_port=int(ops_port), refresh_s=2.0, graceful_s=20)
    return serve_production(settings, warehouse, opts)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
