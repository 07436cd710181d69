"""How the dashboard reads the warehouse without ever holding it: private snapshots.

DuckDB allows one writer per file, and a read-only open from another process both fails while
a writer holds the file and blocks a writer while it is open. A dashboard that kept a
connection open, or queried the live file on every click, would stall collection. So
(decision record: docs/decisions/dashboards-data-access.md):

1. A refresh (background thread, every `refresh_s`) stats the warehouse file. When it changed,
   it opens the file read-only, which takes DuckDB's shared lock and so proves no writer is
   mid-transaction, copies the file (and its WAL, if any) to a private snapshot, and closes.
   The lock is held only for the copy; nothing is computed while holding it.
2. Every page query runs against the newest snapshot through a cursor of the snapshot's own
   connection; the warehouse file is not touched by page views at all.
3. When the warehouse is busy (a writer holds it), the refresh keeps the last snapshot and
   records `busy_since`; pages keep working on the last snapshot and say how old it is. With
   no snapshot yet the page says "warehouse busy, retrying" and the next refresh tries again.
4. Writes (approve/reject/apply) open a short write connection to the warehouse itself, retry
   briefly while a collector holds it, close it, and ask for a refresh (in the background).
5. The two small tables an action changes (plans, audit log) are read live through
   `live_reader()`: a read-only connection to the warehouse held for one query (milliseconds),
   so a page shows an approval at once without waiting for a multi-GB snapshot copy. When a
   writer holds the file it raises `WarehouseLockedError` and the caller falls back to the
   snapshot.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb

from core.config import utcnow
from core.errors import WarehouseError, WarehouseLockedError
from warehouse import Warehouse

RETRY_DELAYS_S: tuple[float, ...] = (0.05, 0.1, 0.2, 0.4, 0.8)
"""Back-off between attempts to take the warehouse lock (about 1.5 s in all)."""


class WarehouseBusyError(WarehouseLockedError):
    """A collector holds the warehouse and there is no snapshot to show yet."""


class _SharedLock:
    """Readers-writer lock for this process's own connections to the warehouse file.

    DuckDB refuses a read-only and a read-write connection to one file in one process, so our
    snapshot copies and live reads (shared) must not overlap our own short writes (exclusive).
    Readers never wait (they fall back or skip); a writer waits for current readers to finish.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False

    def try_read(self) -> bool:
        with self._cond:
            if self._writer:
                return False
            self._readers += 1
            return True

    def release_read(self) -> None:
        with self._cond:
            self._readers -= 1
            self._cond.notify_all()

    @contextmanager
    def write(self) -> Iterator[None]:
        with self._cond:
            while self._writer or self._readers:
                self._cond.wait()
            self._writer = True
        try:
            yield
        finally:
            with self._cond:
                self._writer = False
                self._cond.notify_all()


@dataclass
class Snapshot:
    """One private copy of the warehouse, opened read-only, shared by every page query."""

    generation: int
    path: Path
    taken_at: datetime
    source_stamp: tuple[int, int, int]
    con: duckdb.DuckDBPyConnection
    copy_s: float
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _users: int = 0
    _retired: bool = False

    def acquire(self) -> None:
        with self._lock:
            self._users += 1

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

    def _dispose(self) -> None:
        self.con.close()
        for suffix in ("", ".wal"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)


def _stamp(path: Path) -> tuple[int, int, int] | None:
    """(mtime_ns, size, WAL size) of the warehouse: changes whenever a writer commits."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    wal = Path(f"{path}.wal")
    wal_size = wal.stat().st_size if wal.exists() else -1
    return (st.st_mtime_ns, st.st_size, wal_size)


class SnapshotStore:
    """Keeps a fresh private snapshot of the warehouse and hands out read connections to it."""

    def __init__(
        self,
        source: Path,
        *,
        cache_dir: Path | None = None,
        refresh_s: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.source = Path(source)
        self._own_dir = cache_dir is None
        self.cache_dir = Path(cache_dir or tempfile.mkdtemp(prefix="gpuledger-dash-"))
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self.refresh_s = refresh_s
        self._sleep = sleep
        self._snapshot: Snapshot | None = None
        self._generation = 0
        self._refresh_lock = threading.Lock()
        self._file_lock = _SharedLock()
        self.busy_since: datetime | None = None
        self.last_error: str | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._listeners: list[Callable[[Snapshot], None]] = []

    # 1. Refreshing ---------------------------------------------------------------------------
    def on_new_snapshot(self, listener: Callable[[Snapshot], None]) -> None:
        """Call `listener(snapshot)` after each new snapshot (e.g. to pre-compute this month)."""
        self._listeners.append(listener)

    def refresh(self, *, force: bool = False) -> bool:
        """Take a new snapshot when the warehouse changed (or `force`); True when one was taken.

        Never raises for a busy warehouse: it records `busy_since` and keeps the old snapshot.
        """
        with self._refresh_lock:
            stamp = _stamp(self.source)
            if stamp is None:
                self.last_error = f"{self.source}: no warehouse file yet"
                return False
            current = self._snapshot
            if current is not None and not force and current.source_stamp == stamp:
                self.busy_since = None
                return False
            if not self._file_lock.try_read():
                self.busy_since = self.busy_since or utcnow()
                return False
            try:
                snapshot = self._copy()
            except WarehouseLockedError:
                self.busy_since = self.busy_since or utcnow()
                self.last_error = None
                return False
            except WarehouseError as exc:
                self.last_error = str(exc)
                return False
            finally:
                self._file_lock.release_read()
            self.busy_since = None
            self.last_error = None
            self._snapshot = snapshot
        if current is not None:
            current.retire()
        for listener in self._listeners:
            listener(snapshot)
        return True

    def _copy(self) -> Snapshot:
        """Copy the warehouse under DuckDB's shared lock (steps 1 of the module docstring)."""
        self._generation += 1
        target = self.cache_dir / f"snapshot-{self._generation}.duckdb"
        started = time.perf_counter()
        try:
            guard = duckdb.connect(str(self.source), read_only=True)
        except duckdb.Error as exc:
            text = str(exc).lower()
            if "lock" in text or "conflicting" in text or "different configuration" in text:
                raise WarehouseLockedError(
                    f"{self.source}: a writer holds the warehouse; showing the last snapshot"
                ) from None
            raise WarehouseError(f"{self.source}: cannot open for reading ({exc})") from None
        try:
            stamp = _stamp(self.source) or (0, 0, 0)
            shutil.copyfile(self.source, target)
            wal = Path(f"{self.source}.wal")
            if wal.exists():
                shutil.copyfile(wal, Path(f"{target}.wal"))
        finally:
            guard.close()
        copy_s = time.perf_counter() - started
        try:
            con = Warehouse.open(target, read_only=True).con
        except Exception:
            for suffix in ("", ".wal"):
                Path(f"{target}{suffix}").unlink(missing_ok=True)
            raise
        return Snapshot(self._generation, target, utcnow(), stamp, con, copy_s)

    def start(self) -> None:
        """Refresh in a background thread every `refresh_s` until `stop()`."""
        if self._thread is not None:
            return
        self._stop.clear()

        def loop() -> None:
            self.refresh()
            while not self._stop.is_set():
                woken = self._wake.wait(self.refresh_s)
                self._wake.clear()
                if not self._stop.is_set():
                    self.refresh(force=woken)

        self._thread = threading.Thread(target=loop, name="gpuledger-dash-refresh", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop refreshing, close the snapshot and delete the private copies."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        with self._refresh_lock:
            if self._snapshot is not None:
                self._snapshot.retire()
                self._snapshot = None
        if self._own_dir:
            shutil.rmtree(self.cache_dir, ignore_errors=True)

    def source_stamp(self) -> tuple[int, int, int] | None:
        """Changes whenever a writer commits to the warehouse (a cheap `stat`, no lock)."""
        return _stamp(self.source)

    # 2. Reading ------------------------------------------------------------------------------
    @property
    def snapshot(self) -> Snapshot | None:
        return self._snapshot

    def current(self) -> Snapshot:
        """The newest snapshot, taking the first one now if there is none yet."""
        if self._snapshot is None:
            self.refresh()
        snapshot = self._snapshot
        if snapshot is None:
            if self.busy_since is not None:
                raise WarehouseBusyError(
                    f"{self.source}: warehouse busy (a collector is writing); retrying every "
                    f"{self.refresh_s:g} s"
                )
            raise WarehouseError(self.last_error or f"{self.source}: no warehouse to read")
        return snapshot

    @contextmanager
    def reader(self, snapshot: Snapshot | None = None) -> Iterator[Warehouse]:
        """A read-only `Warehouse` on a snapshot (its own cursor, safe in this thread)."""
        snap = snapshot or self.current()
        snap.acquire()
        cursor = snap.con.cursor()
        try:
            cursor.execute("SET TimeZone = 'UTC'")
            yield Warehouse(cursor, str(snap.path), read_only=True)
        finally:
            cursor.close()
            snap.release()

    # 3. Writing ------------------------------------------------------------------------------
    @contextmanager
    def live_reader(self) -> Iterator[Warehouse]:
        """A read-only connection to the warehouse itself for one short query (step 5 of the
        module docstring); `WarehouseLockedError` when a writer holds it (fall back to the
        snapshot then)."""
        if not self._file_lock.try_read():
            raise WarehouseLockedError(f"{self.source}: this dashboard is writing it")
        try:
            try:
                wh = Warehouse.open(self.source, read_only=True)
            except WarehouseError as exc:
                if isinstance(exc, WarehouseLockedError) or "different configuration" in str(exc):
                    raise WarehouseLockedError(str(exc)) from None
                raise
            try:
                yield wh
            finally:
                wh.close()
        finally:
            self._file_lock.release_read()

    def request_refresh(self) -> None:
        """Take a new snapshot soon: in the background when the refresher runs, else now."""
        if self._thread is not None:
            self._wake.set()
        else:
            self.refresh(force=True)

    @contextmanager
    def writer(self, *, refresh: bool = True, retry: bool = True) -> Iterator[Warehouse]:
        """A short write connection to the warehouse itself (retrying while a collector holds
        it); by default a new snapshot is requested after it closes (`request_refresh`)."""
        with self._file_lock.write():
            wh = self._open_writer(RETRY_DELAYS_S if retry else ())
            try:
                yield wh
            finally:
                wh.close()
        if refresh:
            self.request_refresh()

    def _open_writer(self, delays: tuple[float, ...]) -> Warehouse:
        last: WarehouseLockedError | None = None
        for delay in (*delays, None):
            try:
                return Warehouse.open(self.source)
            except WarehouseLockedError as exc:
                last = exc
                if delay is None:
                    break
                self._sleep(delay)
        raise WarehouseBusyError(
            f"{self.source}: warehouse busy (a collector is writing); nothing was changed, try again"
        ) from last

    def status(self) -> dict[str, Any]:
        snap = self._snapshot
        return {
            "generation": snap.generation if snap else None,
            "taken_at": snap.taken_at.isoformat() if snap else None,
            "copy_s": round(snap.copy_s, 3) if snap else None,
            "busy_since": self.busy_since.isoformat() if self.busy_since else None,
            "error": self.last_error,
            "source": os.fspath(self.source),
        }
