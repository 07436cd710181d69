"""Which snapshot pages are served from, and the per-snapshot cache of what they computed.

Why: a page view must answer in well under 300 ms while a month's bill takes seconds. Every
value a page shows is computed once per snapshot, kept under the snapshot's generation, and
every number on one page comes from the same snapshot. A newer snapshot replaces the serving
one only when it is promoted (after its warm-up, see `dashboards.warmup`), and its promotion
drops every value computed on older ones.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from gpuledger.warehouse.snapshot_store import Snapshot, SnapshotStore

T = TypeVar("T")
MAX_ENTRIES = 256
"""Cached results kept per snapshot, least recently used dropped first."""


class SnapshotCache:
    """The serving snapshot and an LRU cache keyed by (snapshot generation, key)."""

    def __init__(self, store: SnapshotStore) -> None:
        self.store = store
        self._cache: OrderedDict[tuple[int, Hashable], Any] = OrderedDict()
        self._gate = threading.RLock()
        self._guard = threading.Lock()
        self._serving: Snapshot | None = None

    def serving(self) -> Snapshot:
        """The snapshot pages are served from (the first one is taken on demand)."""
        with self._guard:
            snap = self._serving
        if snap is None:
            snap = self.store.current()
            self.promote(snap)
        return snap

    @property
    def serving_snapshot(self) -> Snapshot | None:
        """The snapshot pages are served from, if any yet (never takes one)."""
        return self._serving

    def promote(self, snap: Snapshot) -> None:
        """Serve `snap` from now on; keep it open while it serves, let the old one go."""
        snap.acquire()
        with self._guard:
            old, self._serving = self._serving, snap
            for full in [k for k in self._cache if k[0] < snap.generation]:
                del self._cache[full]
        if old is not None:
            old.release()

    def cached(self, key: Hashable, compute: Callable[[Snapshot], T], snap: Snapshot | None = None) -> T:
        """Compute `key` once per snapshot (the serving one unless `snap` is given).

        Computations run one at a time (`_gate`, re-entrant: a computation may need another
        cached value): on two cores parallel bills only thrash, and DuckDB already uses every
        core for one query. A cache hit never waits.
        """
        snap = snap or self.serving()
        full = (snap.generation, key)
        with self._guard:
            if full in self._cache:
                self._cache.move_to_end(full)
                return self._cache[full]
        with self._gate:
            with self._guard:
                if full in self._cache:
                    return self._cache[full]
            value = compute(snap)
            with self._guard:
                self._cache[full] = value
                while len(self._cache) > MAX_ENTRIES:  # URL values are user input: bound the cache
                    self._cache.popitem(last=False)
        return value

    def clear(self) -> None:
        """Forget everything computed (the benchmark's no-cache baseline)."""
        with self._guard:
            self._cache.clear()

    def close(self) -> None:
        """Let the serving snapshot go (the store deletes it once no reader is left)."""
        with self._guard:
            old, self._serving = self._serving, None
        if old is not None:
            old.release()
