"""Pre-computing a new snapshot in the background before pages are served from it.

Why: a new snapshot arrives every refresh, and the first page view after it would otherwise
wait seconds for the month's bill. So the `SnapshotStore.on_new_snapshot` listener computes
the latest month's page data (bills, heatmap, queues, idle, token costs, recommendations) on
the new snapshot in a thread, and only then promotes it to serving; pages keep using the old
one meanwhile. A warm-up is best effort: a step that fails is computed on demand later.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping

from gpuledger.dashboards.serving import SnapshotCache
from gpuledger.warehouse.snapshot_store import Snapshot

Steps = Callable[[Snapshot], Mapping[str, Callable[[], object]]]
"""Given the new snapshot: named steps, in order, that fill the cache for it."""


class Warmer:
    """Runs the warm-up steps of each new snapshot, then promotes it (unless superseded)."""

    def __init__(self, cache: SnapshotCache, steps: Steps) -> None:
        self._cache = cache
        self._steps = steps
        self._closing = threading.Event()
        self._threads: list[threading.Thread] = []
        self._guard = threading.Lock()
        self.timings: dict[str, float] = {}
        """Seconds per step of the last completed warm-up (for the benchmark and /healthz)."""

    def warm(self, snapshot: Snapshot) -> None:
        """The `on_new_snapshot` listener: warm `snapshot` in a background thread."""
        if self._closing.is_set():
            return
        thread = threading.Thread(target=self._run, args=(snapshot,), name="gpuledger-dash-warm",
                                  daemon=True)
        with self._guard:
            self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()

    def _current(self, snapshot: Snapshot) -> bool:
        """Still worth warming: not closing, and no newer snapshot has arrived."""
        return not self._closing.is_set() and self._cache.store.snapshot is snapshot

    def _run(self, snapshot: Snapshot) -> None:
        snapshot.acquire()
        try:
            if self._closing.is_set():
                return
            timings: dict[str, float] = {}
            for name, step in self._steps(snapshot).items():
                if not self._current(snapshot):
                    return  # closing, or a newer snapshot will warm itself
                started = time.perf_counter()
                step()
                timings[name] = round(time.perf_counter() - started, 2)
            self.timings = timings
        except Exception:  # best effort: a page computes what is missing on demand
            pass
        finally:
            if self._current(snapshot):
                self._cache.promote(snapshot)
            snapshot.release()

    def wait(self, timeout_s: float = 600.0) -> None:
        """Wait until the warm-ups started so far are done (benchmark, tests)."""
        for thread in list(self._threads):
            thread.join(timeout_s)

    def close(self, timeout_s: float = 120.0) -> None:
        """Start no more warm-ups and wait for the running ones (DuckDB must not be running a
        query when the interpreter exits)."""
        self._closing.set()
        for thread in list(self._threads):
            thread.join(timeout_s)
