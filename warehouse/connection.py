"""Opening DuckDB: every connection gpuledger makes, with its bounds, and DuckDB's errors said
as what they are (a locked file, a foreign format, a full disk).

Why a module of its own: the warehouse (`warehouse.store`), the serving store's readers and the
lake engine all open DuckDB; one function (`connect`) gives each connection the same start-up
configuration (no extension fetched behind our back: `store` rule 4), memory bound and spill
folder (docs/decisions/0221), so none is unbounded and none says an error another way.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import duckdb

from gpuledger.core.config_warehouse import WarehouseSettings
from gpuledger.core.errors import WarehouseError, WarehouseLockedError

DUCKDB_CONFIG: dict[str, Any] = {
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
}
"""Every connection: no extension is fetched or loaded implicitly (`warehouse.store` rule 4)."""


_OS_REASONS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO, errno.EFBIG)
_FILE_NAMED = re.compile(r'file "([^"]+)"')


def os_failure(exc: duckdb.Error, path: object) -> OSError | None:
    """The operating-system error inside a DuckDB error (a full disk while a commit writes the
    WAL or a checkpoint writes the file), as the `OSError` it is, or None. Why: DuckDB reports
    these as `IOException` or `TransactionException` ("Failed to commit: Could not write file
    ...: No space left on device"), which the CLI cannot tell from a bug (exit 70); as an
    `OSError` it is one line and exit 74 like every other full disk (`gpuledger.cli`)."""
    text = str(exc)
    for code in _OS_REASONS:
        if os.strerror(code) in text:
            named = _FILE_NAMED.search(text)
            return OSError(code, os.strerror(code), named.group(1) if named else str(path))
    return None


def _lock_message(exc: Exception) -> bool:
    text = str(exc).lower()
    return "lock" in text or "conflicting" in text


def connect(target: str, *, read_only: bool = False, limits: WarehouseSettings | None = None,
            config: Mapping[str, Any] | None = None, what: str = "warehouse") -> duckdb.DuckDBPyConnection:
    """Every DuckDB connection gpuledger opens (docs/decisions/0221): `DUCKDB_CONFIG` (no
    extension fetched behind our back), `config` on top (a serving-store reader's own bounds,
    0141), and the memory bound and spill folder of `limits` (`warehouse:` settings; their
    defaults when not given, so no connection is unbounded), set after connecting: a second
    connection to a database already open in this process shares its instance and would be
    refused for a different start-up config. No progress bar of DuckDB's own (it draws one on
    STDOUT for any query over 2 s, even into a pipe, in the middle of `-o json` / `-o csv`
    output; ours is on stderr, `terminal_progress`; the setting is per connection). Errors are
    one-line `WarehouseError`s."""
    limits = limits or WarehouseSettings()
    spill = spill_folder(target, limits)
    try:
        con = duckdb.connect(target, read_only=read_only, config={**DUCKDB_CONFIG, **(config or {})})
    except duckdb.Error as exc:
        raise _open_error(exc, target, what) from None
    try:
        con.execute("SET enable_progress_bar = false")
        if config is None or "memory_limit" not in config:
            con.execute("SET memory_limit = ?", [limits.memory_limit])
        con.execute("SET temp_directory = ?", [spill])
    except duckdb.Error as exc:
        con.close()
        first = str(exc).splitlines()[0]
        raise WarehouseError(f"{target}: cannot apply the warehouse settings ({first})") from None
    return con


_UNITS = {"bytes": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "PiB": 2**50}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(bytes|KiB|MiB|GiB|TiB|PiB)\s*$")


class _Answers(Protocol):
    """What `memory_limit_bytes` asks of a warehouse (`warehouse.protocols.ReadableWarehouse`
    and `Warehouse` both answer; that module is not imported here: it imports the store)."""

    def scalar(self, sql: str, params: Any = None) -> Any: ...


def memory_limit_bytes(wh: _Answers) -> int:
    """The memory bound DuckDB applies to `wh`'s connection, in bytes: what `memory_limit` (a
    size or a share, `connect`) resolved to. DuckDB reports it rounded to a tenth of its unit
    ("11.7 GiB"), close enough to size work to it."""
    text = str(wh.scalar("SELECT current_setting('memory_limit')"))
    found = _SIZE.match(text)
    if found is None:
        raise WarehouseError(f"DuckDB reports its memory limit as {text!r}, not a size")
    return int(float(found.group(1)) * _UNITS[found.group(2)])


def release_cached_blocks(con: duckdb.DuckDBPyConnection) -> None:
    """Hand the blocks DuckDB keeps cached for `con`'s database back to the system, its bound kept.

    Why (docs/decisions/0280): DuckDB keeps every block it read until `memory_limit` is full, so
    a reader that reads each block once (a refresh's month results) holds a full bound of them
    beside the Python frames it builds. Lowering the limit makes DuckDB evict down to it at once
    (persistent blocks are dropped, their memory freed; what is pinned stays, and what was
    written and not yet checkpointed is spilled, a few MB); the bound is then set back. Through
    a cursor, since `con` may have a result pending. Only where nothing else runs on this
    database meanwhile: a statement running then would meet the lowered limit."""
    cursor = con.cursor()
    try:
        bound = cursor.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]
        try:
            with contextlib.suppress(duckdb.OutOfMemoryException):  # evicted all it could
                cursor.execute("SET memory_limit = '1MiB'")
        finally:
            cursor.execute("SET memory_limit = ?", [bound])
    finally:
        cursor.close()


def spill_folder(target: str, limits: WarehouseSettings) -> str:
    """Where DuckDB spills: `limits.temp_directory`, else `<file>.tmp` beside a warehouse file
    (DuckDB's own default, said out loud), else a folder in the system's temporary folder."""
    if limits.temp_directory is not None:
        parent = Path(limits.temp_directory).parent
        if not parent.is_dir():  # DuckDB creates the folder itself, but not its parents
            raise WarehouseError(f"warehouse.temp_directory {limits.temp_directory}: no folder {parent} "
                                 "to create it in")
        return limits.temp_directory
    if target == ":memory:" or target.startswith(":memory:"):
        return os.path.join(tempfile.gettempdir(), "gpuledger-duckdb.tmp")
    return f"{target}.tmp"


def _open_error(exc: duckdb.Error, target: str, what: str) -> WarehouseError:
    if _lock_message(exc):
        return WarehouseLockedError(
            f"{target}: another process is writing this warehouse; one writer at a time "
            "(readers: use read-only access or `gpuledger export`)"
        )
    text = str(exc)
    if "extension" in text.lower() or "not a valid DuckDB database" in text:
        return WarehouseError(
            f"{target}: not a DuckDB warehouse file (another format, e.g. SQLite); "
            "point --warehouse at a gpuledger DuckDB file or a new path"
        )
    return WarehouseError(f"{target}: cannot open {what} ({text.splitlines()[0]})")
