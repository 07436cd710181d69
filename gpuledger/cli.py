"""`gpuledger`: the command line.

1. Parse global options (`--config`, `--warehouse`, `--debug`) and the command.
2. Load the settings once (`core.config.load_settings`) and build a `Context`.
3. Run the command; map any `GpuledgerError` to one line on stderr and its exit code
   (the traceback only with `--debug`).
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
from collections.abc import Sequence
from pathlib import Path

import gpuledger.commands as commands_pkg
from gpuledger import __version__
from gpuledger.command_context import Context
from gpuledger.commands import Handler, global_options
from gpuledger.core.config import load_settings
from gpuledger.core.errors import GpuledgerError

DEFAULT_CONFIG = Path("gpuledger.yaml")
DEFAULT_WAREHOUSE = "gpuledger.duckdb"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpuledger",
        description="GPU-fleet cost and efficiency: collect, bill, optimize, apply, report.",
        parents=[global_options(suppress=False)],
    )
    parser.add_argument("--version", action="version", version=f"gpuledger {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    inherited = global_options(suppress=True)

    def add_command(name: str, help: str, handler: Handler) -> argparse.ArgumentParser:
        cmd = sub.add_parser(name, help=help, description=help, parents=[inherited])
        cmd.set_defaults(handler=handler)
        return cmd

    modules = sorted(m.name for m in pkgutil.iter_modules(commands_pkg.__path__))
    for name in (m for m in modules if not m.startswith("_")):
        module = importlib.import_module(f"gpuledger.commands.{name}")
        module.register(add_command)
    return parser


def _resolve_config(flag: Path | None) -> Path | None:
    if flag is not None:
        return flag
    return DEFAULT_CONFIG if DEFAULT_CONFIG.exists() else None


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    try:
        settings = load_settings(_resolve_config(args.config))
        warehouse = args.warehouse or Path(os.environ.get("GPULEDGER_WAREHOUSE", DEFAULT_WAREHOUSE))
        ctx = Context(settings=settings, warehouse_path=warehouse, debug=args.debug)
        return int(args.handler(args, ctx) or 0)
    except GpuledgerError as exc:
        if args.debug:
            raise
        print(f"gpuledger: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("gpuledger: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
