"""The commands: one module per command (or command group), discovered by name, on Click.

`COMMANDS` (a `core.registry.Registry`) finds them: every module of this package whose name
does not start with `_`, by module name, each giving its `command`; the module is the
registration, no list names it.

How to add a COMMAND
    1. Create `gpuledger/commands/<name>.py` (a leading `_` keeps a helper module out of
       discovery). Keep its module-level imports light (click, this package, `core`): the CLI
       imports every command module at start-up, so heavy libraries go inside the handler.
    2. Write the handler as `def _run(args: argparse.Namespace, ctx: Context) -> int`: `args`
       holds the command's parameters by name plus the globals (`config`, `warehouse`, `debug`);
       `ctx` holds the settings, loaded once. Return the exit code; raise a
       `gpuledger.core.errors` exception for a user's mistake (one line, its exit code).
    3. Decorate it, innermost `@runs`, and expose it as `command`::

           @click.command("hello", help="say hello (one line: shown in `gpuledger --help`)")
           @window_options            # --period (default: last complete month) / --start / --end
           @output_option()           # -o/--output table|wide|csv|json|yaml (--format: alias)
           @click.option("--name", default="world", show_default=True, help="whom to greet")
           @runs
           def command(args: argparse.Namespace, ctx: Context) -> int:
               window = window_from_args(args)          # from _analytics_common
               emit(ctx, args.format, rows=[{"name": args.name}], document={"name": args.name})
               return 0

       A group: `@click.group("plans", cls=VerbGroup, invoke_without_command=True)` over a
       `@runs` handler that prints help (see `plans.py`), then `group.add_command(...)`.
    4. Never add `--config/--warehouse/--debug`: the CLI adds them to every command so they
       work before and after the verb.

How to add a FLAG
    `@click.option("--top", type=int, default=20, show_default=True, help="...")` above `@runs`;
    it arrives as `args.top`. A flag several commands share goes here as a decorator (like
    `price_options`) so its name, default and help stay one definition. Booleans:
    `is_flag=True`; repeatable: `multiple=True` (a tuple, empty when absent); a plan id:
    `@plan_id_argument` and resolve it with `optimizer.plan.store.resolve_plan_id` (full id,
    unique prefix or `latest`).

How to add an OUTPUT FORMAT (or print data)
    Print data through `gpuledger.commands._output.emit`, never with bare prints: it renders
    `table`/`wide` with rich (fitted to the terminal; plain text, full width, when stdout is not
    a terminal), `csv` from the same rows, `json` from `document` (or your exact `json_text`,
    for byte-compatibility) and `yaml` from the same document. A new format is one branch in
    `emit` plus its name in `_output.FORMATS`.

Errors: Click's usage errors become `gpuledger: error: …` with exit 2; everything else follows
the contract in `gpuledger.cli` (documented in docs/guide/cli.md).
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from gpuledger.command_context import Context, RunState
from gpuledger.commands._output import FORMATS, output_option
from gpuledger.core.errors import InputError
from gpuledger.core.registry import Registry

Handler = Callable[[argparse.Namespace, Context], int | None]
F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["COMMANDS", "FORMATS", "F", "Handler", "VerbGroup", "add_global_options", "global_option_list",
           "output_option", "plan_id_argument", "price_options", "runs", "state_of",
           "window_options"]

COMMANDS: Registry[click.Command] = Registry(
    "command", error=InputError, package=__name__, attribute="command")
"""Every command, by the name of its module (`refresh_serving`), in that order."""


def state_of(cctx: click.Context) -> RunState:
    """The run's state (global options, redactor, lazily built Context)."""
    obj = cctx.find_root().obj
    if not isinstance(obj, RunState):  # a command invoked outside `gpuledger.cli.main`
        obj = cctx.find_root().obj = RunState()
    return obj


def runs(handler: Handler) -> Callable[..., int | None]:
    """Turn `handler(args, ctx)` into a Click callback. On a group it runs only when no verb
    follows (the group's own handler prints help and exits 2, after the settings loaded)."""

    @functools.wraps(handler)
    def callback(**params: Any) -> int | None:
        cctx = click.get_current_context()
        if isinstance(cctx.command, click.Group) and cctx.invoked_subcommand is not None:
            return None
        state = state_of(cctx)
        args = argparse.Namespace(config=state.config, warehouse=state.warehouse,
                                  debug=state.debug, **params)
        return handler(args, state.context())

    return callback


def _store_global(cctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """Record a global option wherever it was given; a later (after the verb) one wins."""
    if value is not None and value is not False and param.name:
        setattr(state_of(cctx), param.name, value)
    return value


def global_option_list() -> list[click.Option]:
    """Fresh `--config/--warehouse/--debug` options (Click parameters are not shared)."""
    return [
        click.Option(["--config"], type=click.Path(path_type=Path), expose_value=False,
                     callback=_store_global, help="settings file (default: ./gpuledger.yaml when present)"),
        click.Option(["--warehouse"], type=click.Path(path_type=Path), expose_value=False,
                     callback=_store_global,
                     help="DuckDB warehouse file (default: $GPULEDGER_WAREHOUSE or ./gpuledger.duckdb)"),
        click.Option(["--debug"], is_flag=True, expose_value=False, callback=_store_global,
                     help="show tracebacks"),
    ]


def add_global_options(command: click.Command) -> None:
    """Give `command` and everything under it the global options (accepted after the verb)."""
    names = {n for p in command.params for n in getattr(p, "opts", ())}
    if "--warehouse" not in names:
        command.params.extend(global_option_list())
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            add_global_options(sub)


class VerbGroup(click.Group):
    """A command group whose verbs list in the order they were added (not alphabetically)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)


def window_options(f: F) -> F:
    """`--period` (YYYY-MM or `last`; default the last complete month) or `--start/--end`."""
    f = click.option("--end", metavar="TIME", help="window end, exclusive, ISO-8601")(f)
    f = click.option("--start", metavar="TIME", help="window start, ISO-8601 (with --end)")(f)
    return click.option("--period", metavar="YYYY-MM|last",
                        help="calendar month (UTC); default: the last complete month")(f)


def price_options(f: F) -> F:
    return click.option(
        "--strict-prices", is_flag=True,
        help="fail on a GPU model with no price (in price_book or the default catalog) instead "
             "of billing its GPU-hours at zero on lines marked unpriced",
    )(f)


def plan_id_argument(f: F) -> F:
    """The `ID` argument: a full plan id, a unique prefix of one, or `latest`."""
    return click.argument("plan_id", metavar="ID")(f)


__all__ += ["F", "global_option_list"]
