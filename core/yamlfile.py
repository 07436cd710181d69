"""Reading a YAML file a user wrote, with one line that says what is wrong.

Config, fleet, demand, queues and fleet-spec files are all hand-written; a typo must come back
as `path: line N not valid YAML (...)` or `path: cannot read the X file (...)`, never a
traceback, and every reader must say it the same way, so the rule lives here once.

The one loader is also strict and bounded, because each file is input the product must not
trust:
- a key written twice in one mapping is refused (PyYAML keeps the last one silently, so a
  second `maintenance:` would quietly win);
- a file over `MAX_BYTES`, nested deeper than `MAX_DEPTH`, with more than `MAX_ALIASES`
  aliases, or whose aliases expand to more than `MAX_NODES` nodes is refused before anything
  is built from it (a 470-byte "billion laughs" file expands to 387 million strings, and every
  reader walks the expanded tree; a 100,000-deep `[[[...` crashes the C parser);
- `refuse_unknown_keys` is the one did-you-mean for a key no reader knows, so `maintenence:`
  or `profils:` stops the command instead of being ignored.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from gpuledger.core.errors import GpuledgerError, InputError

MAX_BYTES = 16 * 1024 * 1024
"""The largest input file read: a 100,000-GPU fleet listed GPU by GPU is about 11 MB."""
MAX_DEPTH = 64
"""Deepest nesting of collections; the product's deepest file (a ClusterQueue) uses 8."""
MAX_ALIASES = 10_000
MAX_NODES = 2_000_000
"""Nodes of the document with every alias expanded (about 130,000 listed GPUs)."""


def load_yaml_file(path: Path, *, what: str, error: type[GpuledgerError] = InputError) -> Any:
    """The parsed YAML of `path` (None for an empty file); problems raise `error` in one line.

    `what` names the file's role in the message ("config", "fleet", "demand", ...).
    """
    import yaml

    text = _read_text(Path(path), what, error)
    loader_class = _strict_loader()
    try:
        _check_shape(loader_class(text))
        loader = loader_class(text)
        try:
            return loader.get_single_data()
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        problem = _one_line(getattr(exc, "problem", None) or exc)
        if "maximum nesting depth" in problem:
            # libyaml >= 0.2.6 (PyYAML 6.0.4's wheels) stops deep flow collections itself,
            # before our event walk sees them: one wording for both limits.
            problem = f"nested deeper than {MAX_DEPTH} levels"
        raise error(f"{path}:{where} not valid YAML ({problem})") from None
    except (ValueError, TypeError, OverflowError) as exc:  # e.g. a date like 2026-02-30
        raise error(f"{path}: not valid YAML ({_one_line(exc)})") from None


def refuse_unknown_keys(
    data: Mapping[Any, Any], allowed: Iterable[str], where: str,
    error: type[GpuledgerError] = InputError,
) -> None:
    """Raise `error` naming the first key of `data` not in `allowed`, with a did-you-mean.

    Every reader of a hand-written mapping (file sections, rows, CSV columns) calls this, so a
    misspelt key is refused the same way everywhere instead of being silently ignored.
    """
    known = sorted(allowed)
    for key in data:
        if key in known:
            continue
        guess = difflib.get_close_matches(str(key), known, n=1)
        hint = f"did you mean {guess[0]!r}?" if guess else f"expected one of {', '.join(known)}"
        raise error(f"{where}: unknown key {key!r} ({hint})")


def _one_line(problem: object) -> str:
    return " ".join(str(problem).split())


def _read_text(path: Path, what: str, error: type[GpuledgerError]) -> str:
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except OSError as exc:
        raise error(f"{path}: cannot read the {what} file ({exc.strerror or exc})") from None
    if len(data) > MAX_BYTES:
        raise error(f"{path}: the {what} file is larger than {MAX_BYTES // (1024 * 1024)} MiB")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise error(f"{path}: the {what} file is not UTF-8 text (byte {exc.start})") from None


def _strict_loader() -> type[Any]:
    """A safe loader (libyaml's when built in) that refuses a key repeated in one mapping."""
    import yaml

    base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class StrictLoader(base):
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    duplicate = key in seen
                    seen.add(key)
                except TypeError:  # unhashable: the base class says so
                    continue
                if duplicate:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key!r}", key_node.start_mark
                    )
            return super().construct_mapping(node, deep)

    return StrictLoader


def _check_shape(loader: Any) -> None:
    """Walk the event stream (flat, no recursion) and refuse documents that are too deep or
    expand too far; each anchor's expanded size is known when its collection closes."""
    from yaml import events

    stack: list[list[Any]] = []  # per open collection: [anchor, expanded size so far]
    sizes: dict[str, int] = {}
    aliases = 0
    try:
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, events.CollectionStartEvent):
                stack.append([event.anchor, 1])
                if len(stack) > MAX_DEPTH:
                    raise _shape_error(event, f"nested deeper than {MAX_DEPTH} levels")
                continue
            if isinstance(event, events.CollectionEndEvent):
                anchor, size = stack.pop()
                if anchor:
                    sizes[anchor] = size
            elif isinstance(event, events.AliasEvent):
                aliases += 1
                if aliases > MAX_ALIASES:
                    raise _shape_error(event, f"more than {MAX_ALIASES} aliases")
                if event.anchor not in sizes:
                    raise _shape_error(event, f"alias *{event.anchor} is not a finished anchor")
                size = sizes[event.anchor]
            elif isinstance(event, events.ScalarEvent):
                size = 1
                if event.anchor:
                    sizes[event.anchor] = 1
            else:
                continue
            if stack:
                stack[-1][1] += size
                if stack[-1][1] > MAX_NODES or size > MAX_NODES:
                    raise _shape_error(event, f"aliases expand it past {MAX_NODES:,} nodes")
    finally:
        loader.dispose()


def _shape_error(event: Any, problem: str) -> Exception:
    """A YAML error at the event's line, reported like any other syntax error."""
    import yaml

    return yaml.error.MarkedYAMLError(problem=problem, problem_mark=event.start_mark)
