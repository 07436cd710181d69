"""The command context: what every CLI command receives (the settings loaded once, the
warehouse path, the debug flag), and the per-run state the CLI carries from parsing to the
error handler.

Commands never read the environment or global state deep inside; they get a `Context`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from gpuledger.core.config import Settings
from gpuledger.core.redact import Redactor

if TYPE_CHECKING:
    from gpuledger.warehouse import Warehouse

DEFAULT_CONFIG = Path("gpuledger.yaml")
DEFAULT_WAREHOUSE = "gpuledger.duckdb"


@dataclass(frozen=True)
class Context:
    settings: Settings
    warehouse_path: Path
    debug: bool = False
    out: TextIO | None = None
    """Where `echo` writes; None means the `sys.stdout` of the moment (so capture works)."""

    def open_warehouse(self, *, read_only: bool = False) -> Warehouse:
        """The warehouse; a writer publishes the dashboard's serving store (its tables: seconds)
        when it closes (`dashboards.serving_results`, docs/decisions/0120 and 0140); the month
        results are `gpuledger refresh-serving`'s, after it."""
        from gpuledger.warehouse import Warehouse

        wh = Warehouse.open(self.warehouse_path, read_only=read_only, limits=self.settings.warehouse)
        if read_only:
            return wh
        from gpuledger.dashboards.serving_results import PublishingWarehouse

        return PublishingWarehouse.wrap(wh, self.settings)

    def publish(self, wh: Warehouse) -> None:
        """Publish the serving store now, the month results whose basis changed included (a
        long-running writer, after each `collect --follow` round: it holds the warehouse, so no
        `refresh-serving` can read it meanwhile; the basis changes once an hour); a failure is
        one line on stderr."""
        from gpuledger.dashboards.serving_results import publish_quietly

        publish_quietly(wh, self.settings, results=True)

    def echo(self, text: str = "") -> None:
        print(text, file=self.out or sys.stdout, flush=True)


@dataclass
class RunState:
    """One CLI run: the global options as parsed (before or after the verb, the later wins),
    the redactor the error handler uses, and the `Context`, built once on first use so a bad
    config file fails as the command starts, not while `--help` is printed."""

    config: Path | None = None
    warehouse: Path | None = None
    debug: bool = False
    redact: Redactor = field(default_factory=Redactor)  # the patterns alone, until settings
    _undo: Callable[[], None] | None = None
    _ctx: Context | None = None

    def context(self) -> Context:
        if self._ctx is None:
            from gpuledger.core.config import load_settings
            from gpuledger.core.redact import install_log_redaction

            settings = load_settings(self._config_path())
            self.redact = Redactor.of(settings)
            self._undo = install_log_redaction(self.redact)
            warehouse = self.warehouse or Path(os.environ.get("GPULEDGER_WAREHOUSE", DEFAULT_WAREHOUSE))
            self._ctx = Context(settings=settings, warehouse_path=warehouse, debug=self.debug)
        return self._ctx

    def _config_path(self) -> Path | None:
        if self.config is not None:
            return self.config
        return DEFAULT_CONFIG if DEFAULT_CONFIG.exists() else None

    def close(self) -> None:
        if self._undo is not None:
            self._undo()
            self._undo = None
