"""How the dashboard reads the warehouse without ever holding it: private snapshots.

DuckDB allows one writer per file, and a read-only open from another process both fails while
a writer holds the file and blocks a writer while it is open. A dashboard that kept a
connection open, or queried the live file on every click, would stall collection; and
`gpuledger collect --follow` holds the writer for as long as it runs, so a dashboard that
needed a lock to read would never see fresh data. So (decision record:
docs/decisions/0040-dashboards-data-access.md):

1. A refresh (background thread, every `refresh_s`) stats the warehouse file and its WAL.
   When they changed, it copies both to a private snapshot *without taking any lock*, then
   stats them again: if nothing was written during the copy (same size and mtime, and the last
   write older than the clock's granularity when the copy began), the copy is a consistent
   committed state, because DuckDB appends every commit to the WAL and a read-only open of the
   copy replays it. Otherwise the copy is discarded and tried again later.
2. Every page query runs against the newest snapshot through a cursor of the snapshot's own
   connection; page views never touch the warehouse file.
3. While collection writes without pause, the refresh keeps the last snapshot and records
   `busy_since`; pages say how old their data is. With no snapshot yet the page says
   "warehouse busy, retrying".
4. Writes (approve/reject/apply) open a short write connection to the warehouse itself, retried
   briefly while a collector holds it. Listeners (`on_write`) read what they need through that
   same connection before it closes (the Plans page shows an approval at once, without
   waiting for a multi-GB copy), and a refresh is requested in the background.

Serving mode (`publisher` given, the dashboard; docs/decisions/0120-serving-store.md): a
snapshot is the published serving store (`warehouse.serving_store`), opened read-only in place,
not a copy of the warehouse: a refresh costs an open, whatever the warehouse's size. When the
warehouse changed since the last publish (a writer that does not publish) and nobody holds it,
the refresh publishes first, through a short writer; while a collector holds it, the last
published store serves (the collector publishes after each round). With no serving store at
all and the warehouse held, the refresh falls back to the copy of steps 1–3. Our own writes
request a refresh, which publishes them (the Plans page shows them at once meanwhile, step 4).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpuledger.core.config import utcnow
from gpuledger.core.errors import GpuledgerError, WarehouseError, WarehouseLockedError
from gpuledger.warehouse.serving_snapshot import Snapshot, remove_snapshot_files
from gpuledger.warehouse.serving_store import (
    Stamp,
    file_stamp,
    open_serving,
    published_stamp,
    record_published,
    request_publish,
    serving_path,
)
from gpuledger.warehouse.store import Warehouse

RETRY_DELAYS_S: tuple[float, ...] = (0.05, 0.1, 0.2, 0.4, 0.8)
"""Back-off between attempts to open the warehouse for a write (about 1.5 s in all)."""
QUIET_NS = 50_000_000
"""A copy starts only when the last write is at least this old (50 ms): a write landing in the
same coarse clock tick as the first `stat` could otherwise leave the mtime unchanged."""
COPY_ATTEMPTS = 3


class WarehouseBusyError(WarehouseLockedError):
    """The warehouse is being written without pause and there is no snapshot to show yet, or a
    short write could not get the writer lock."""


_stamp = file_stamp


class SnapshotStore:
    """Keeps a fresh private snapshot of the warehouse and hands out read connections to it."""

    def __init__(
        self,
        source: Path,
        *,
        cache_dir: Path | None = None,
        refresh_s: float = 120.0,
        sleep: Callable[[float], None] = time.sleep,
        publisher: Callable[[Warehouse], object] | None = None,
    ) -> None:
        self.source = Path(source)
        self._own_dir = cache_dir is None
        self.cache_dir = Path(cache_dir or tempfile.mkdtemp(prefix="gpuledger-dash-"))
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self.refresh_s = refresh_s
        self._sleep = sleep
        self._snapshot: Snapshot | None = None
        self._made: list[Snapshot] = []
        """Snapshots not yet disposed, so `close()` can close and delete them."""
        self._generation = 0
        self._refresh_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self.busy_since: datetime | None = None
        self.last_error: str | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._listeners: list[Callable[[Snapshot], None]] = []
        self._write_listeners: list[Callable[[Warehouse], None]] = []
        self.publisher = publisher
        """Serving mode (module docstring): publishes the serving store with a writer."""

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
            try:
                snapshot = self._next(current, stamp, force)
                if snapshot is None:
                    self.busy_since = None
                    return False
            except WarehouseLockedError:
                self.busy_since = self.busy_since or utcnow()
                self.last_error = None
                return False
            except WarehouseError as exc:
                self.last_error = str(exc)
                return False
            self.busy_since = None
            self.last_error = None
            self._snapshot = snapshot
        if current is not None:
            current.retire()
        for listener in self._listeners:
            listener(snapshot)
        return True

    def _next(self, current: Snapshot | None, stamp: Stamp, force: bool) -> Snapshot | None:
        """The snapshot to serve next, or None when the current one is still the newest."""
        if self.publisher is not None:
            self._publish_if_stale(stamp)
            served = _stamp(serving_path(self.source))
            if served is not None:
                if current is not None and not current.owned and not force and current.source_stamp == served:
                    return None
                try:
                    return self._open_serving(served)
                except WarehouseError:  # unreadable (e.g. damaged by hand): the copy serves
                    pass
        if current is not None and not force and current.source_stamp == stamp:
            return None
        return self._copy()

    def _publish_if_stale(self, stamp: Stamp) -> None:
        """Publish through a short writer when the warehouse changed since the last publish and
        nobody holds it (a collector that holds it publishes itself after each round)."""
        if published_stamp(self.source) == stamp:
            return
        try:
            with self.writer(refresh=False, retry=False, publish=True):
                pass
        except WarehouseLockedError:
            request_publish(self.source)  # the collector's next round publishes

    def _open_serving(self, served: Stamp) -> Snapshot:
        """Open the published store under a name of our own: DuckDB hands a second `connect`
        of a path already open in this process the same (old) database, and a link also pins
        the published file against the writer's next rename."""
        started = time.perf_counter()
        self._generation += 1
        target = self.cache_dir / f"snapshot-{self._generation}.duckdb"
        remove_snapshot_files(target)
        try:
            os.link(serving_path(self.source), target)
        except OSError:  # another file system: a copy of the (small) serving store
            shutil.copyfile(serving_path(self.source), target)
        try:
            con = open_serving(self.source, at=target).con
        except WarehouseError:
            remove_snapshot_files(target)
            raise
        taken_at = datetime.fromtimestamp(served[0] / 1e9, tz=UTC)
        made = Snapshot(self._generation, target, taken_at, served, con,
                        time.perf_counter() - started, owned=False)
        self._made = [m for m in self._made if not m.disposed] + [made]
        return made

    def _copy(self) -> Snapshot:
        """Step 1 of the module docstring: copy without a lock, keep it only if nothing moved."""
        for attempt in range(COPY_ATTEMPTS):
            before = self._quiet_stamp()
            if before is None:
                break
            self._generation += 1
            target = self.cache_dir / f"snapshot-{self._generation}.duckdb"
            taken_at = utcnow()
            started = time.perf_counter()
            self._copy_files(target)
            copy_s = time.perf_counter() - started
            if _stamp(self.source) == before:
                try:
                    con = Warehouse.open(target, read_only=True).con
                except WarehouseError:
                    remove_snapshot_files(target)
                    raise
                made = Snapshot(self._generation, target, taken_at, before, con, copy_s)
                self._made = [m for m in self._made if not m.disposed] + [made]
                return made
            remove_snapshot_files(target)
            self._sleep(0.2 * (attempt + 1))
        raise WarehouseLockedError(
            f"{self.source}: written without pause while copying; showing the last snapshot"
        )

    def _quiet_stamp(self) -> Stamp | None:
        """The stamp once the last write is at least `QUIET_NS` old (None after ~2 s of writes)."""
        for _ in range(40):
            stamp = _stamp(self.source)
            if stamp is None:
                raise WarehouseError(f"{self.source}: the warehouse file disappeared")
            if time.time_ns() - max(stamp[0], stamp[2]) >= QUIET_NS:
                return stamp
            self._sleep(QUIET_NS / 1e9)
        return None

    def _copy_files(self, target: Path) -> None:
        shutil.copyfile(self.source, target)
        wal = Path(f"{self.source}.wal")
        try:
            shutil.copyfile(wal, Path(f"{target}.wal"))
        except FileNotFoundError:
            Path(f"{target}.wal").unlink(missing_ok=True)

    def start(self) -> None:
        """Refresh in a background thread every `refresh_s` (or when woken) until `stop()`."""
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

    def stop_refreshing(self) -> None:
        """Stop the background refresher (waits for a copy in progress)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=120)
            self._thread = None

    def stop(self) -> None:
        """Stop refreshing, close the snapshot and delete the private copies."""
        self.stop_refreshing()
        with self._refresh_lock:
            if self._snapshot is not None:
                self._snapshot.retire()
                self._snapshot = None
        if self._own_dir:
            shutil.rmtree(self.cache_dir, ignore_errors=True)

    def close(self) -> None:
        """Shutdown (e.g. on SIGTERM): `stop()`, then close every snapshot this store made and
        delete its files even while a reader still holds one (`stop()` waits for the last
        reader; at shutdown nobody reads any more). Deletes only this store's
        `snapshot-N.duckdb[.wal]` names; idempotent."""
        self.stop()
        for snapshot in self._made:
            snapshot.con.close()
        self._made.clear()
        for generation in range(1, self._generation + 1):
            remove_snapshot_files(self.cache_dir / f"snapshot-{generation}.duckdb")

    def request_refresh(self) -> None:
        """Take a new snapshot soon: in the background when the refresher runs, else now."""
        if self._thread is not None:
            self._wake.set()
        else:
            self.refresh(force=True)

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
        if not snap.try_acquire():  # the page retries on the new one: one snapshot per page
            raise WarehouseBusyError(f"{self.source}: new data arrived while this page was read; retrying")
        cursor = snap.con.cursor()
        try:
            cursor.execute("SET TimeZone = 'UTC'")
            yield Warehouse(cursor, str(snap.path), read_only=True)
        finally:
            cursor.close()
            snap.release()

    # 3. Writing ------------------------------------------------------------------------------
    def on_write(self, listener: Callable[[Warehouse], None]) -> None:
        """Call `listener(wh)` with the write connection after each of our writes, before it
        closes (to read back what changed without opening the file again)."""
        self._write_listeners.append(listener)

    @contextmanager
    def writer(
        self, *, refresh: bool = True, retry: bool = True, publish: bool = False,
    ) -> Iterator[Warehouse]:
        """A short write connection to the warehouse itself (retrying while a collector holds
        it); by default a new snapshot is requested after it closes (`request_refresh`), and
        that refresh publishes the serving store (in the background when the refresher runs,
        so a click never waits for it; `publish=True` publishes before closing)."""
        with self._write_lock:
            wh = self._open_writer(RETRY_DELAYS_S if retry else ())
            published = False
            try:
                yield wh
                for listener in self._write_listeners:
                    listener(wh)
                published = publish and self._publish(wh)
            finally:
                wh.close()
            if published:
                record_published(self.source)
        if refresh:
            self.request_refresh()

    def _publish(self, wh: Warehouse) -> bool:
        """Serving mode: publish the serving store before the writer closes. A failure leaves
        the last published store serving and is reported in `status()`, never raised: the
        write itself is committed."""
        if self.publisher is None:
            return False
        try:
            self.publisher(wh)
        except GpuledgerError as exc:
            self.last_error = f"serving store not published: {exc}"
            return False
        return True

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
            "serving_store": bool(snap is not None and not snap.owned),
            "busy_since": self.busy_since.isoformat() if self.busy_since else None,
            "error": self.last_error,
            "source": os.fspath(self.source),
        }
