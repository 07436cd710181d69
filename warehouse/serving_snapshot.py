"""One snapshot the dashboard serves from: a private copy of the warehouse or a link to the
published serving store (`warehouse.snapshot_store`), opened read-only and shared by every
page query until a newer one replaces it and its last reader is done.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import duckdb

Stamp = tuple[int, int, int, int]


@dataclass
class Snapshot:
    """One snapshot, opened read-only, shared by every page query.

    `taken_at` is when the copy began (the copy holds every commit made before it), or when
    the serving store was published.
    """

    generation: int
    path: Path
    taken_at: datetime
    source_stamp: Stamp
    con: duckdb.DuckDBPyConnection
    copy_s: float
    owned: bool = True
    """A private copy of the warehouse (False: a link to the published serving store). Either
    way `path` is this store's own name, deleted when done."""
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _users: int = 0
    _retired: bool = False

    def acquire(self) -> None:
        with self._lock:
            self._users += 1

    def try_acquire(self) -> bool:
        """`acquire` unless the snapshot is already closed (retired and its last reader gone):
        a page that began on it and reads again after its successor was promoted."""
        with self._lock:
            if self._retired and self._users <= 0:
                return False
            self._users += 1
            return True

    def release(self) -> None:
        with self._lock:
            self._users -= 1
            done = self._retired and self._users == 0
        if done:
            self._dispose()

    def retire(self) -> None:
        """No new readers; close and delete once the last current reader is done."""
        with self._lock:
            self._retired = True
            done = self._users == 0
        if done:
            self._dispose()

    @property
    def disposed(self) -> bool:
        """Closed and deleted (retired and its last reader gone)."""
        return self._retired and self._users <= 0

    def _dispose(self) -> None:
        self.con.close()
        for suffix in ("", ".wal"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)


def remove_snapshot_files(target: Path) -> None:
    for suffix in ("", ".wal"):
        Path(f"{target}{suffix}").unlink(missing_ok=True)
