"""The composition collectors → warehouse: what `gpuledger collect` and `--follow` run.

1. Resume: the Prometheus sources keep one watermark per table (`prometheus.gpu_samples`, ...);
   a run starts at the lowest of them (or the window start), unless `reload` is asked. A run
   whose whole window has no DCGM series fails with one line naming the URL, the window and
   the metrics looked for (`PrometheusCollector.check_source`); `follow` skips that check,
   since an outage longer than its step is a gap to record, not a reason to stop.
2. Chunks: the collector yields one chunk at a time (fetching the next meanwhile), sized so a
   chunk's rows stay under a memory budget (`gpuledger.collect_sizing`); each chunk
   is loaded in ONE transaction together with its watermarks, so a crash or a stopped
   Prometheus leaves the warehouse at a chunk boundary and the next run resumes there.
   Time-series loads own their chunk (delete + insert), so nothing is ever counted twice.
   A chunk without DCGM series is a gap: loaded (empty), so the watermark moves past it, and
   listed in the report (`Quality.gaps`) with the dropped and merged samples by reason.
3. Dimension rows are merged with what is stored (new non-null values win; the warehouse's load
   keeps the earliest `first_seen` and the latest `last_seen`), so a metrics-derived row never
   erases richer facts from the Kubernetes API and a later chunk never forgets when a GPU was
   first seen.
4. Kubernetes: when an API is configured, a snapshot of nodes, namespaces (teams), pods and
   Kueue objects is loaded last, and namespace teams are not taken from kube-state-metrics.
5. Roll-up (`rollup`, a `collect_rollup.RollupPlan`): the hours the loaded samples complete are
   rolled up after each chunk, in the loader thread, by the rules of `gpuledger.collect_rollup`
   (never past the loaded samples; day-anchored windows, so a resumed run stores what an
   uninterrupted one does). With a Kubernetes API the roll-up waits for the snapshot (step 4):
   it prices hours by the pools, sharing modes and pods the snapshot brings.
6. DRA rows that change hours already rolled up (a claim listed, or rebuilt from Prometheus
   history, after its hours were rolled up) roll those days up again before the batch's own
   roll-up (`load_dra`, `collect_rollup` rule 6): the default bill reads the roll-up. A claim
   the previous API list also saw is held since that list (`collectors.dra.continue_claims`);
   a device a ResourceSlice listed keeps the API's row (`dra_history.api_devices_only`).

Heavy imports happen inside the functions (this module is imported by the CLI).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from gpuledger.core.config import Settings, utcnow
from gpuledger.core.window import Window, floor_time, parse_duration

if TYPE_CHECKING:
    import polars as pl

    from gpuledger.collect_rollup import Roller, RollupPlan
    from gpuledger.collectors.prometheus import ChunkData, PrometheusCollector
    from gpuledger.collectors.quality import Quality
    from gpuledger.warehouse import Warehouse
    from gpuledger.warehouse.batch import LoadStats

PROMETHEUS_SOURCES: tuple[str, ...] = (
    "prometheus.gpu_samples", "prometheus.token_samples", "prometheus.queue_samples",
)
KUBERNETES_SOURCE = "kubernetes"


class Snapshotter(Protocol):
    def snapshot(self) -> Mapping[str, pl.DataFrame]: ...


@dataclass
class CollectReport:
    window: Window
    start: datetime
    chunks: int = 0
    rows: dict[str, int] = field(default_factory=dict)
    queries: int = 0
    bytes: int = 0
    seconds: float = 0.0
    up_to_date: bool = False
    kubernetes_rows: dict[str, int] = field(default_factory=dict)
    quality: Quality | None = None
    planned_chunks: int = 0
    loaded_to: datetime | None = None
    """The end of the last chunk loaded: where a re-run resumes."""
    rollup_hours: int = 0
    rollup_rows: int = 0
    rollup_seconds: float = 0.0
    rolled_to: datetime | None = None
    """The roll-up watermark after the run (None when the run did not roll up)."""
    rerolled_days: int = 0
    """Days of the roll-up rolled up again because DRA rows loaded later changed them (step 6)."""
    holes: list[tuple[Window, int]] = field(default_factory=list)
    """Holes read again (step 1b, `collect_gaps`), each with the GPU sample rows it gave (0: the
    engine still answers empty; the hole stays open until the retry horizon)."""
    hole_days: int = 0
    """Days of the roll-up rolled up again because a re-read hole filled their hours."""

    @property
    def sample_rows(self) -> int:
        return sum(self.rows.values())

    def note_rollup(self, roller: Roller) -> None:
        from gpuledger.analytics.usage.daily import ROLLUP_SOURCE

        self.rollup_hours, self.rollup_rows = roller.hours, roller.rows
        self.rollup_seconds = roller.seconds
        self.rolled_to = roller.wh.watermark(ROLLUP_SOURCE)

    def lines(self) -> list[str]:
        rolled = [] if self.rolled_to is None else [
            f"rolled up {self.rollup_hours} hour(s), {self.rollup_rows} rows, "
            f"{self.rollup_seconds:.1f}s; roll-up watermark {self.rolled_to.isoformat()}"]
        if self.rerolled_days:
            rolled.append(f"rolled up {self.rerolled_days} day(s) again: DRA claims loaded after "
                          "their roll-up")
        from gpuledger.collect_gaps import hole_lines

        holes = hole_lines(self.holes, self.hole_days)
        if self.up_to_date:
            return [f"up to date: watermark already at or past {self.window.end.isoformat()}",
                    *holes, *rolled]
        rows = ", ".join(f"{k} {v}" for k, v in sorted(self.rows.items()) if v)
        out = [
            f"collected [{self.start.isoformat()}, {self.window.end.isoformat()}) in {self.chunks} "
            f"chunk(s), {self.queries} queries, {self.bytes / 1e6:.1f} MB, {self.seconds:.1f}s",
            f"rows: {rows or 'none'}",
        ]
        if self.quality is not None:
            out += self.quality.lines()
        if self.kubernetes_rows:
            kube = sorted(self.kubernetes_rows.items())
            out.append("kubernetes: " + ", ".join(f"{k} {v}" for k, v in kube))
        return out + holes + rolled


def resume_point(wh: Warehouse) -> datetime | None:
    """Where the Prometheus sources stand: the lowest watermark (None if any is missing)."""
    marks = [wh.watermark(s) for s in PROMETHEUS_SOURCES]
    if any(m is None for m in marks):
        return None
    return min(m for m in marks if m is not None)


def merge_dimensions(wh: Warehouse, frames: Mapping[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
    """Merge dimension frames with the stored rows (see module docstring, step 3)."""
    import polars as pl

    from gpuledger.core.frames import TABLES
    from gpuledger.warehouse.queries.collect import dimension_rows

    out: dict[str, pl.DataFrame] = {}
    for name, frame in frames.items():
        spec = TABLES[name]
        if spec.kind != "dimension" or frame.height == 0:
            out[name] = frame
            continue
        key = list(spec.key)
        stored = dimension_rows(wh, name)
        if stored.height == 0:
            out[name] = frame
            continue
        stored = stored.cast(dict(frame.schema))  # type: ignore[arg-type]
        joined = frame.join(stored, on=key, how="left", suffix="__old")
        merged = []
        for col in spec.column_names:
            if col in key:
                merged.append(pl.col(col))
            else:
                merged.append(pl.coalesce(col, f"{col}__old").alias(col))
        out[name] = joined.select(merged)
    return out


def collect_window(
    wh: Warehouse, settings: Settings, url: str, window: Window, *,
    reload: bool = False, kubernetes: Snapshotter | None = None,
    on_chunk: Callable[[ChunkData], None] | None = None,
    now: Callable[[], datetime] = utcnow, backoff_s: float = 0.5,
    collector: PrometheusCollector | None = None, require_series: bool = True,
    rollup: RollupPlan | None = None, on_progress: Callable[[CollectReport], None] | None = None,
) -> CollectReport:
    """Collect `window` from the engine at `url` into `wh` (resuming from the watermarks).

    `collector` lets a caller (the benchmark) pass its own, e.g. to read its request log; it is
    then left open. `require_series` False lets a window without any DCGM series pass as gaps.
    `rollup` rolls up as the chunks arrive (step 5); `on_progress` sees the report once the
    chunks are planned and after each chunk (and its roll-up)."""
    from contextlib import nullcontext

    from gpuledger.collect_gaps import holes_to_reread
    from gpuledger.collect_rollup import Roller
    from gpuledger.collect_sizing import sized_chunks
    from gpuledger.collectors.prometheus import PrometheusCollector
    from gpuledger.collectors.quality import Quality

    started = time.perf_counter()
    # 1. Resume.
    mark = None if reload else resume_point(wh)
    start = max(window.start, mark) if mark is not None else window.start
    report = CollectReport(window, start, quality=Quality())
    roller = None if rollup is None else Roller(wh, settings, rollup, rollup.origin or window.start,
                                                reload=reload)
    early = roller if kubernetes is None else None  # step 5: with an API, after the snapshot
    if early is not None:  # a run killed between a chunk and its roll-up catches up first
        early.advance(mark or start, window.end)
    holes = [] if reload else holes_to_reread(wh, settings, window, mark, now())  # 1b. (`collect_gaps`)
    report.up_to_date = start >= window.end
    if holes or not report.up_to_date:  # 2. Chunks, one transaction each.
        todo = None if report.up_to_date else Window(start, window.end, window.step)
        active = collector or PrometheusCollector(url, settings, now=now, backoff_s=backoff_s,
                                                  namespaces_from_metrics=kubernetes is None)
        load = _loader(wh, settings, report, early, on_chunk=on_chunk, on_progress=on_progress)
        with active if collector is None else nullcontext(active):
            for hole in holes:
                _reread(wh, settings, active, hole, report)
            def planned(n: int) -> None:
                first = report.planned_chunks == 0
                report.planned_chunks = n
                if first and on_progress is not None:
                    on_progress(report)
            if todo is not None:
                if require_series:
                    active.check_source(todo)
                _pipelined(sized_chunks(active, todo, planned), load)
    # 4. Kubernetes snapshot.
    if kubernetes is not None:
        report.kubernetes_rows = _snapshot(wh, settings, kubernetes, now(), report)
        if roller is not None:
            roller.advance(resume_point(wh) or start, window.end)
    if roller is not None:
        report.note_rollup(roller)
    report.seconds = time.perf_counter() - started
    return report


def _reread(wh: Warehouse, settings: Settings, active: PrometheusCollector, hole: Window,
            report: CollectReport) -> None:
    """Step 1b: read one hole again; a chunk now with DCGM series is loaded (window replaced, no
    watermark moved), and the roll-up days its hours touch are rolled up again."""
    from gpuledger.collect_rollup import reroll_changed
    from gpuledger.collectors.chunks import plan_chunks
    from gpuledger.warehouse import LoadBatch

    rows = 0
    prom = settings.prometheus
    chunks = list(plan_chunks(hole, parse_duration(prom.chunk), prom.max_points_per_query))
    for data in active.iter_chunks(hole, chunks):
        if data.quality.gaps:
            continue
        window = data.chunk.window

        def load(frames: Mapping[str, pl.DataFrame], window: Window = window) -> LoadStats:
            return wh.load(LoadBatch(merge_dimensions(wh, frames), window=window))

        load_dra(wh, settings, data.frames, load, report)
        rows += data.samples
        assert report.quality is not None
        report.quality.merge([data.quality])
        report.queries += data.queries
        report.bytes += data.bytes
    report.holes.append((hole, rows))
    if rows:
        report.hole_days += len(reroll_changed(wh, settings, hole).days)


def _snapshot(wh: Warehouse, settings: Settings, kubernetes: Snapshotter, at: datetime,
              report: CollectReport) -> dict[str, int]:
    """Step 4: the Kubernetes snapshot merged with the stored dimensions, loaded last (with
    step 6 for its DRA rows)."""
    from gpuledger.collectors.dra import continue_claims
    from gpuledger.warehouse import LoadBatch

    frames = dict(kubernetes.snapshot())
    since = wh.watermark(KUBERNETES_SOURCE)
    claims = frames.get("dra_claims")
    if since is not None and claims is not None and claims.height:
        from gpuledger.analytics.devices.dra_history import claims_seen_since

        rows = continue_claims(claims.to_dicts(), claims_seen_since(wh, claims, since), since)
        frames["dra_claims"] = type(claims)(rows, schema=claims.schema)
    stats = load_dra(wh, settings, frames, lambda batch: wh.load(
        LoadBatch(merge_dimensions(wh, batch), watermarks={KUBERNETES_SOURCE: at})), report)
    return dict(stats.rows)


def load_dra(
    wh: Warehouse, settings: Settings, frames: Mapping[str, pl.DataFrame],
    load: Callable[[Mapping[str, pl.DataFrame]], LoadStats], report: CollectReport | None = None,
) -> LoadStats:
    """Step 6 around `load(frames)`: rebuilt devices never replace the API's, and the days of
    the roll-up whose hours the DRA rows change are rolled up again after the load."""
    from gpuledger.analytics.devices.dra_history import api_devices_only, changed_span
    from gpuledger.collect_rollup import reroll_changed

    if not any(name.startswith("dra_") and f.height for name, f in frames.items()):
        return load(frames)
    frames = api_devices_only(wh, frames)
    changed = changed_span(wh, frames)
    stats = load(frames)
    done = reroll_changed(wh, settings, changed)
    if report is not None:
        report.rerolled_days += len(done.days)
    return stats


def _loader(
    wh: Warehouse, settings: Settings, report: CollectReport, roller: Roller | None, *,
    on_chunk: Callable[[ChunkData], None] | None, on_progress: Callable[[CollectReport], None] | None,
) -> Callable[[ChunkData], None]:
    """What the loader thread does per chunk: load it with its watermarks (one transaction),
    roll up again what its DRA rows change (step 6), roll up the hours it completes, count,
    tell the callbacks."""
    from gpuledger.warehouse import LoadBatch

    def load(data: ChunkData) -> None:
        stats = load_dra(wh, settings, data.frames, lambda frames: wh.load(LoadBatch(
            merge_dimensions(wh, frames), window=data.chunk.window,
            watermarks=dict.fromkeys(PROMETHEUS_SOURCES, data.chunk.end),
        )), report)
        for table, n in stats.rows.items():
            report.rows[table] = report.rows.get(table, 0) + n
        report.chunks += 1
        report.loaded_to = data.chunk.end
        report.queries += data.queries
        report.bytes += data.bytes
        assert report.quality is not None
        report.quality.merge([data.quality])
        if roller is not None:
            roller.advance(data.chunk.end, report.window.end)
            report.note_rollup(roller)
        if on_chunk is not None:
            on_chunk(data)
        if on_progress is not None:
            on_progress(report)

    return load


def _pipelined(chunks: Iterator[ChunkData], load: Callable[[ChunkData], None]) -> None:
    """Load chunk N in a loader thread while chunk N+1 is built (and N+2 fetched).

    The loader is the only thread that touches the warehouse, and it loads in order, so the
    watermark still only moves over complete chunks. A failed fetch stops the iteration after
    the chunks already handed over are loaded; a failed load stops the fetching. Either error
    is raised here.
    """
    handover: queue.Queue[ChunkData | None] = queue.Queue(maxsize=1)
    failures: list[BaseException] = []

    def loader() -> None:
        while (data := handover.get()) is not None:
            if not failures:
                try:
                    load(data)
                except BaseException as exc:
                    failures.append(exc)

    thread = threading.Thread(target=loader, name="warehouse-loader")
    thread.start()
    try:
        for data in chunks:
            if failures:
                break
            handover.put(data)
    finally:
        handover.put(None)
        thread.join()
    if failures:
        raise failures[0]


def follow(
    wh: Warehouse, settings: Settings, url: str, start: datetime, step: timedelta, *,
    kubernetes: Snapshotter | None = None, settle: timedelta | None = None,
    on_report: Callable[[CollectReport], None] | None = None,
    keep_going: Callable[[], bool] = lambda: True, now: Callable[[], datetime] = utcnow,
    sleep: Callable[[float], Any] = time.sleep, rollup: bool = True,
) -> None:
    """Collect continuously: every step, up to `now - settle` (late scrapes land first); with
    `rollup`, each hour is rolled up once its samples and the read margin are in."""
    from gpuledger.collect_rollup import RollupPlan
    from gpuledger.core.window import HOUR

    lag = settle if settle is not None else 2 * step
    plan = RollupPlan(grain=HOUR, to_end=False, origin=start) if rollup else None
    while keep_going():
        end = floor_time(now() - lag, step)
        mark = resume_point(wh) or start
        if end > mark:
            report = collect_window(wh, settings, url, Window(mark, end, step), kubernetes=kubernetes,
                                    now=now, require_series=False, rollup=plan)
            if on_report is not None:
                on_report(report)
        sleep(max(1.0, step.total_seconds() / 4))


def parse_step(text: str | None, settings: Settings) -> timedelta:
    return parse_duration(text or settings.prometheus.step)
