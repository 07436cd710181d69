"""`gpuledger`: the command line.

1. Parse the command line with Click (`build_cli`): global options (`--config`, `--warehouse`,
   `--debug`) before or after the verb, then the command's own.
2. Load the settings once (`core.config.load_settings`) and build a `Context`.
3. Run the command. Whatever it raises becomes exactly one line on stderr,
   `gpuledger: error: …`, passed through the redaction layer (`core.redact`: configured secrets,
   URL userinfo, query tokens), and a documented exit code; the traceback is printed only with
   `--debug`, redacted too. Log records are redacted for the whole run.

Exit codes (also in docs/guide/cli.md and docs/guide/security.md):
- 0 success; 1 a `GpuledgerError` (warehouse, source, cluster, plan, report);
- 2 usage, config or input (`ConfigError`, `InputError`, Click's usage errors); 3 access denied;
- 70 (`EX_SOFTWARE`) an unexpected exception, e.g. a wrong-shape answer nobody checked: a bug
  to report, still one line;
- 74 (`EX_IOERR`) an operating-system error: a missing or read-only folder, a full disk;
- 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import os
import re
import sys
import warnings
from collections.abc import Sequence
from typing import Any

import click

from gpuledger import __version__
from gpuledger.command_context import RunState
from gpuledger.commands import COMMANDS, VerbGroup, add_global_options, global_option_list
from gpuledger.commands.completion import COMPLETE_VAR
from gpuledger.core.errors import GpuledgerError
from gpuledger.core.redact import Redactor

EXIT_USAGE = 2
EXIT_INTERNAL = 70
"""An exception that is not ours: a bug (sysexits' EX_SOFTWARE)."""
EXIT_OS = 74
"""An operating-system error: missing/read-only folder, full disk (sysexits' EX_IOERR)."""
EXIT_INTERRUPTED = 130
_LINE_BREAKS = re.compile(r"\s*[\r\n]+\s*")


def build_cli() -> click.Group:
    """The root group with every command of `gpuledger.commands.COMMANDS` (by module name),
    each given the global options so they work before and after the verb."""
    cli = VerbGroup(
        "gpuledger", params=global_option_list(),
        help="GPU-fleet cost and efficiency: collect, bill, optimize, apply, report.",
        context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    )
    click.version_option(__version__, "--version", prog_name="gpuledger",
                         message="%(prog)s %(version)s")(cli)
    for command in COMMANDS:
        cli.add_command(command)
    for command in cli.commands.values():
        add_global_options(command)
    return cli


def build_parser() -> click.Group:
    """Kept for callers of the argparse era: the Click root group."""
    return build_cli()


def resolve(argv: Sequence[str]) -> tuple[list[str], dict[str, Any]]:
    """Parse `argv` without running anything: the command path (`["report", "due"]`) and the
    merged parameters (the globals included), for tests and tools that check a command line
    (e.g. the CronJob's arguments)."""
    cli = build_cli()
    state = RunState()
    path: list[str] = []
    params: dict[str, Any] = {}
    cctx = cli.make_context("gpuledger", list(argv), obj=state, resilient_parsing=False)
    group: click.Command = cli
    rest = _unparsed(cctx)
    while isinstance(group, click.Group) and rest:
        name, sub, rest = group.resolve_command(cctx, rest)
        assert sub is not None and name is not None
        path.append(name)
        cctx = sub.make_context(name, rest, parent=cctx)
        params.update(cctx.params)
        group = sub
        rest = _unparsed(cctx)
    params.update(config=state.config, warehouse=state.warehouse, debug=state.debug)
    return path, params


def _unparsed(cctx: click.Context) -> list[str]:
    """The tokens a group left for its verb (Click 8 splits them in two; Click 9 will not)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return [*getattr(cctx, "protected_args", []), *cctx.args]


BLAS_THREADS = {"OPENBLAS_NUM_THREADS": "1"}
"""OpenBLAS (numpy's and scipy's) on one thread unless the caller's environment says otherwise
(decision 0288). Its only callers here are scipy's k-means distances (tall, five columns wide),
which a second thread does not speed up, while its idle workers spin for their next call: at
10,000 GPUs 5 % of a `refresh-serving` increment's CPU (the k-means alone took twice its wall
time in CPU), taken from DuckDB's and Polars' threads or from a pod's CPU quota. Set before
numpy is first imported (OpenBLAS reads it when it loads; no module imports numpy at the top)."""


def main(argv: Sequence[str] | None = None) -> int:
    for name, value in BLAS_THREADS.items():
        os.environ.setdefault(name, value)
    args = list(sys.argv[1:] if argv is None else argv)
    cli = build_cli()
    if os.environ.get(COMPLETE_VAR):
        from click.shell_completion import shell_complete

        return shell_complete(cli, {}, "gpuledger", COMPLETE_VAR, os.environ[COMPLETE_VAR])
    state = RunState()
    try:
        with cli.make_context("gpuledger", args, obj=state) as cctx:
            return int(cli.invoke(cctx) or 0)
    except click.exceptions.Exit as done:  # --help, --version
        return done.exit_code
    except click.ClickException as exc:
        return _usage_error(exc, state.redact)
    except (KeyboardInterrupt, click.exceptions.Abort):
        print("gpuledger: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return _broken_pipe()
    except Exception as exc:  # the top level: every error ends as one line
        return _report_error(exc, state.redact, debug=state.debug)
    finally:
        state.close()


def _usage_error(exc: click.ClickException, redact: Redactor) -> int:
    """Click's own errors (unknown option, bad choice, missing argument): one line, exit 2,
    naming the command and where its help is."""
    cctx = exc.ctx if isinstance(exc, click.UsageError) else None
    verb = cctx.command_path.removeprefix("gpuledger").strip() if cctx is not None else ""
    where = f"{verb}: " if verb else ""
    hint = f" (see: {cctx.command_path} --help)" if cctx is not None else ""
    text = _LINE_BREAKS.sub(" ", redact(exc.format_message())).strip()
    print(f"gpuledger: error: {where}{text}{hint}", file=sys.stderr)
    return EXIT_USAGE


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
