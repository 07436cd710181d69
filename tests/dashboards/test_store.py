"""Data access: private snapshots, so page views never hold the warehouse.

Cases:
- a snapshot is a copy: while the app reads it, a writer (the collector) can open the
  warehouse itself, and a change committed there shows after the next refresh, not before;
- an unchanged warehouse is not copied again; a superseded snapshot's file is deleted once its
  last reader is done;
- a collector holding the warehouse (another process): refresh keeps the last snapshot and
  records `busy_since`; pages keep reading; the banner says busy and how old the data is;
  with no snapshot yet `current()` raises WarehouseBusyError (the "busy, retrying" page);
  once the collector lets go, the next refresh succeeds and clears `busy_since`;
- a short write (approve) while the collector holds the file is retried, then refused with
  WarehouseBusyError and nothing changed;
- reads use parameters: a hostile string is just a value (no row, no error, table intact).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from dashboards.shell import banner
from dashboards.store import SnapshotStore, WarehouseBusyError
from warehouse import Warehouse

HOLDER = (
    "import sys; from warehouse import Warehouse; wh = Warehouse.open(sys.argv[1]); "
    "print('ready', flush=True); sys.stdin.readline(); wh.close()"
)


@contextmanager
def collector_holding(path: Path) -> Iterator[None]:
    """Another process that holds the one write lock until the block ends."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parents[2])
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)


@pytest.fixture
def store(demo_copy: Path, tmp_path: Path) -> Iterator[SnapshotStore]:
    s = SnapshotStore(demo_copy, cache_dir=tmp_path / "cache", refresh_s=5, sleep=lambda _: None)
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


def test_busy_collector_keeps_last_snapshot(store: SnapshotStore, demo_copy: Path) -> None:
    before = _namespaces(store)
    with collector_holding(demo_copy):
        assert not store.refresh(force=True)
        assert store.busy_since is not None
        assert _namespaces(store) == before  # pages keep working
        assert "Warehouse busy since" in banner(store) and "showing data as of" in banner(store)
        with pytest.raises(WarehouseBusyError, match="nothing was changed"), store.writer():
            pass
    assert store.refresh(force=True)
    assert store.busy_since is None


def test_busy_before_first_snapshot(demo_copy: Path, tmp_path: Path) -> None:
    store = SnapshotStore(demo_copy, cache_dir=tmp_path / "c2", sleep=lambda _: None)
    try:
        with collector_holding(demo_copy):
            with pytest.raises(WarehouseBusyError, match="warehouse busy"):
                store.current()
            assert banner(store).startswith("Warehouse busy")
        assert store.current() is not None
    finally:
        store.stop()


def test_reads_are_parameterized(store: SnapshotStore) -> None:
    hostile = "x'; DROP TABLE namespaces; --"
    with store.reader() as wh:
        assert wh.query("SELECT * FROM namespaces WHERE namespace = ?", [hostile]).is_empty()
    assert _namespaces(store)
