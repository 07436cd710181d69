"""Data access: private snapshots taken without any lock, so page views never hold the warehouse.

Cases:
- a snapshot is a copy: while the app reads it, a writer (the collector) can open the
  warehouse itself, and a change committed there shows after the next refresh, not before;
  an unchanged warehouse is not copied again; a superseded snapshot's file is deleted once its
  last reader is done;
- a collector that holds the writer and keeps it (like `collect --follow`) does not stop the
  dashboard: a commit still in the collector's WAL shows in the next snapshot;
- a copy during which the warehouse was written is thrown away (never served); after repeated
  tries the refresh gives up for now: `busy_since` is set and, with no snapshot yet,
  `current()` raises WarehouseBusyError (the "busy, retrying" page); once the writes pause,
  the next refresh succeeds and sees them;
- a short write (approve) while the collector holds the writer is retried, then refused with
  WarehouseBusyError and nothing changed;
- reads use parameters: a hostile string is just a value (no row, no error, table intact);
- `close()` deletes every snapshot file the store made, also one a reader still holds.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from gpuledger.dashboards.shell import banner
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.snapshot_store import SnapshotStore, WarehouseBusyError

ROOT = Path(__file__).parents[2]
HOLDER = """
import sys
from gpuledger.warehouse import Warehouse
wh = Warehouse.open(sys.argv[1])
if sys.argv[2] == "commit-and-hold":
    wh.con.execute("INSERT INTO namespaces (namespace, team) VALUES ('from-follow', 'streaming')")
    print('ready', flush=True)
    sys.stdin.readline()
wh.close()
"""


@contextmanager
def collector(path: Path, mode: str) -> Iterator[None]:
    """Another process holding the one write lock (and maybe writing) until the block ends."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path), mode], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)


@pytest.fixture
def store(demo_copy: Path, tmp_path: Path) -> Iterator[SnapshotStore]:
    s = SnapshotStore(demo_copy, cache_dir=tmp_path / "cache", refresh_s=5)
    yield s
    s.stop()


def _namespaces(store: SnapshotStore) -> set[str]:
    with store.reader() as wh:
        return set(wh.query("SELECT namespace FROM namespaces")["namespace"].to_list())


def test_snapshot_does_not_hold_the_warehouse(store: SnapshotStore, demo_copy: Path) -> None:
    assert "late-team" not in _namespaces(store)
    first = store.snapshot
    assert first is not None
    # a page is reading right now, and the collector can still write
    with store.reader(), Warehouse.open(demo_copy) as writer:
        writer.con.execute("INSERT INTO namespaces (namespace, team) VALUES ('late-team', 'late')")
    assert "late-team" not in _namespaces(store)  # the snapshot is a copy
    assert store.refresh()
    assert "late-team" in _namespaces(store)
    assert not first.path.exists()  # superseded and no reader left: deleted
    assert not store.refresh()  # unchanged: no new copy


def test_follow_collector_does_not_stop_refresh(store: SnapshotStore, demo_copy: Path) -> None:
    _namespaces(store)
    with collector(demo_copy, "commit-and-hold"):
        assert store.refresh()
        assert "from-follow" in _namespaces(store)
        assert store.busy_since is None
        with pytest.raises(WarehouseBusyError, match="nothing was changed"), store.writer():
            pass


def test_copy_written_meanwhile_is_thrown_away(demo_copy: Path, tmp_path: Path) -> None:
    writes = []
    racing = [True]

    class Racing(SnapshotStore):
        def _copy_files(self, target: Path) -> None:
            super()._copy_files(target)
            if racing[0]:
                with Warehouse.open(self.source) as wh:  # a commit lands while we copy
                    wh.con.execute("INSERT OR REPLACE INTO watermarks VALUES ('race', now(), now())")
                writes.append(target)

    store = Racing(demo_copy, cache_dir=tmp_path / "race")
    try:
        assert not store.refresh()
        assert len(writes) == 3 and store.snapshot is None and store.busy_since is not None
        assert list((tmp_path / "race").iterdir()) == []  # no torn copy left behind
        assert banner(store).startswith("Warehouse busy")
        with pytest.raises(WarehouseBusyError, match="retrying"):
            store.current()  # the page then says "warehouse busy, retrying"
        racing[0] = False  # the collector pauses: the next refresh succeeds
        assert store.refresh() and store.busy_since is None
        with store.reader() as wh:
            assert wh.scalar("SELECT count(*) FROM watermarks WHERE source = 'race'") == 1
    finally:
        store.stop()


def test_reads_are_parameterized(store: SnapshotStore) -> None:
    hostile = "x'; DROP TABLE namespaces; --"
    with store.reader() as wh:
        assert wh.query("SELECT * FROM namespaces WHERE namespace = ?", [hostile]).is_empty()
    assert _namespaces(store)


def test_close_deletes_every_file_even_while_a_reader_holds_one(demo_copy: Path, tmp_path: Path) -> None:
    """Shutdown (SIGTERM): `close()` leaves no snapshot file behind, although the serving cache
    still holds the newest snapshot; `stop()` alone keeps a held snapshot until its release."""
    cache = tmp_path / "cache"
    s = SnapshotStore(demo_copy, cache_dir=cache, refresh_s=5)
    held = s.current()
    held.acquire()
    s.stop()
    assert sorted(p.name for p in cache.iterdir()) == [held.path.name]
    s.close()
    assert list(cache.iterdir()) == []
    held.release()  # a late release after close is harmless
    own = SnapshotStore(demo_copy, refresh_s=5)
    own.current().acquire()
    own.close()
    assert not own.cache_dir.exists()
