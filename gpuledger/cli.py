"""`gpuledger`: the command line.

1. Parse global options (`--config`, `--warehouse`, `--debug`) and the command.
2. Load the settings once (`core.config.load_settings`) and build a `Context`.
3. Run the command. Whatever it raises becomes exactly one line on stderr,
   `gpuledger: error: …`, passed through the redaction layer (`core.redact`: configured secrets,
   URL userinfo, query tokens), and a documented exit code; the traceback is printed only with
   `--debug`, redacted too. Log records are redacted for the whole run.

Exit codes (also in docs/guide/security.md):
- 0 success; 1 a `GpuledgerError` (warehouse, source, cluster, plan, report);
- 2 usage, config or input (`ConfigError`, `InputError`, argparse); 3 access denied;
- 70 (`EX_SOFTWARE`) an unexpected exception, e.g. a wrong-shape answer nobody checked: a bug
  to report, still one line;
- 74 (`EX_IOERR`) an operating-system error: a missing or read-only folder, a full disk;
- 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import gpuledger.commands as commands_pkg
from gpuledger import __version__
from gpuledger.command_context import Context
from gpuledger.commands import Handler, global_options
from gpuledger.core.config import load_settings
from gpuledger.core.errors import GpuledgerError
from gpuledger.core.redact import Redactor, install_log_redaction

DEFAULT_CONFIG = Path("gpuledger.yaml")
DEFAULT_WAREHOUSE = "gpuledger.duckdb"
EXIT_INTERNAL = 70
"""An exception that is not ours: a bug (sysexits' EX_SOFTWARE)."""
EXIT_OS = 74
"""An operating-system error: missing/read-only folder, full disk (sysexits' EX_IOERR)."""
EXIT_INTERRUPTED = 130
_LINE_BREAKS = re.compile(r"\s*[\r\n]+\s*")


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
    redact = Redactor()  # until the settings name their secrets: the patterns alone
    undo: Callable[[], None] | None = None
    try:
        settings = load_settings(_resolve_config(args.config))
        redact = Redactor.of(settings)
        undo = install_log_redaction(redact)
        warehouse = args.warehouse or Path(os.environ.get("GPULEDGER_WAREHOUSE", DEFAULT_WAREHOUSE))
        ctx = Context(settings=settings, warehouse_path=warehouse, debug=args.debug)
        return int(args.handler(args, ctx) or 0)
    except KeyboardInterrupt:
        print("gpuledger: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return _broken_pipe()
    except Exception as exc:  # the top level: every error ends as one line
        return _report_error(exc, redact, debug=args.debug)
    finally:
        if undo is not None:
            undo()


def error_line(exc: BaseException, redact: Redactor) -> tuple[str, int]:
    """The one redacted line and the exit code for an exception that reached the top level."""
    if isinstance(exc, GpuledgerError):
        text, code = str(exc), exc.exit_code
    elif isinstance(exc, OSError):
        text, code = _os_text(exc), EXIT_OS
    else:
        text = (f"unexpected {type(exc).__name__}: {exc} (a bug in gpuledger or an answer of a shape "
                "it does not expect; rerun with --debug for the traceback)")
        code = EXIT_INTERNAL
    return "gpuledger: error: " + _LINE_BREAKS.sub(" ", redact(text)).strip(), code


def _os_text(exc: OSError) -> str:
    """`path: reason` (both paths for a rename), as the shell would say it."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    names = [str(n) for n in (exc.filename, exc.filename2) if n is not None]
    return f"{' -> '.join(names)}: {reason}" if names else reason


def _report_error(exc: Exception, redact: Redactor, *, debug: bool) -> int:
    line, code = error_line(exc, redact)
    if debug:
        sys.stderr.write(redact.exception(exc, with_traceback=True))
    print(line, file=sys.stderr)
    return code


def _broken_pipe() -> int:
    """The reader of our output went away (`gpuledger bill | head`): stop quietly, as the
    Python docs advise, with stdout pointed at /dev/null so the final flush cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 1


if __name__ == "__main__":
    sys.exit(main())
