"""Reading a YAML file a user wrote, with one line that says what is wrong.

Config, fleet, demand and fleet-spec files are all hand-written; a typo must come back as
`path: line N not valid YAML (...)` or `path: cannot read the X file (...)`, never a
traceback, and every reader must say it the same way, so the rule lives here once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuledger.core.errors import GpuledgerError, InputError


def load_yaml_file(path: Path, *, what: str, error: type[GpuledgerError] = InputError) -> Any:
    """The parsed YAML of `path` (None for an empty file); problems raise `error` in one line.

    `what` names the file's role in the message ("config", "fleet", "demand", ...).
    """
    import yaml

    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise error(f"{path}: cannot read the {what} file ({exc.strerror or exc})") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise error(f"{path}:{where} not valid YAML ({getattr(exc, 'problem', exc)})") from None
