"""Collect a window from a Prometheus-compatible engine, chunk by chunk.

For each chunk (see `chunks`): every DCGM field is read per node shard, plus the vLLM,
Kueue and kube-state-metrics series, all concurrently on a bounded pool. The DCGM fields are
read in bulk where the engine serves it (`bulk_read`: Prometheus remote read, VictoriaMetrics
export; one request per shard for all fields, aligned to exactly what the range query gives),
else by one range query per field and shard (`prometheus.read_path`, docs/decisions/0124). The next chunk's
queries are already in flight while the caller loads the current one, so fetching overlaps
with the warehouse write, and at most two chunks are in memory whatever the window's length.

0. `check_source(window)`: the DCGM metric names the engine has in the window; none of the
   fields we read → one `SourceError` naming the URL, the window and the names looked for.
1. `shards(window)`: node label values (`Hostname`, `hostname`) of DCGM series in the window;
   nodes grouped so series x points per query stays under `max_samples_per_query`.
2. `iter_chunks(window)`: choose the read path once (`choose_read_path`, a probe per bulk
   endpoint); per chunk, submit the reads; parse each answer straight into
   Polars in the worker; then build the frames (gpu_samples, token_samples, queue_samples,
   gpus, mig_instances, nodes, namespaces, pods, HAMi's vgpu_allocations) and the bad-sample
   counts. HAMi's cards (`collectors.hami`: any card its scheduler's series name in the window)
   are `vgpu` cards, whatever their dcgm series look like. A chunk without
   any DCGM series (an exporter outage) is a gap: its frames are empty, it is recorded in
   `Quality.gaps`, and it is loaded like any chunk so the watermark moves past it.
The collector never writes anything: the pipeline loads what it returns.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime

import polars as pl

from gpuledger.collectors import dcgm, hami, inventory, promql, vllm
from gpuledger.collectors.bulk_read import BulkRead, choose
from gpuledger.collectors.chunks import Chunk, plan_chunks
from gpuledger.collectors.dra_prometheus import (
    ALLOC_LABELS,
    RESERVED_LABELS,
    prometheus_frames,
    scheduled_times,
)
from gpuledger.collectors.ksm import (
    QUEUE_LABEL,
    namespaces_from_vector,
    node_labels_from_vector,
    pod_claims_from_frame,
    pods_from_frames,
    with_node_labels,
)
from gpuledger.collectors.prom_http import PromHttp
from gpuledger.collectors.prom_parse import Matrix, parse_matrix, sample_spacing
from gpuledger.collectors.promql import NODE_LABELS, Shard, duration, latest, make_shards, selector
from gpuledger.collectors.quality import Quality
from gpuledger.collectors.queues import QueueCollector, queue_collectors
from gpuledger.core.config import Settings, utcnow
from gpuledger.core.errors import SourceError
from gpuledger.core.frames import DCGM_FIELDS
from gpuledger.core.window import Window, parse_duration

SERIES_PER_NODE = 64
"""Sizing guess for shards: 8 GPUs x up to 7 MIG instances, plus pod churn."""
GPU_MATCH = '{__name__=~"DCGM_FI_.*"}'
REQUEST_LABELS = ("namespace", "pod", "exported_namespace", "exported_pod", "resource")
CLAIM_LABELS = ("namespace", "pod", "exported_namespace", "exported_pod", "resourceclaim_name",
                "resourceclaim_template_name")
DRA_SERIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "dra|alloc": ("kube_resourceclaim_allocation_device_info", ALLOC_LABELS),
    "dra|reserved": ("kube_resourceclaim_status_reserved_for", RESERVED_LABELS),
}
"""kube-state-metrics' opt-in claim families (`--resources=resourceclaims`): empty where not
enabled (`collectors.dra_prometheus`)."""


@dataclass
class ChunkData:
    """Everything collected for one chunk, ready for one `LoadBatch`."""

    chunk: Chunk
    frames: dict[str, pl.DataFrame]
    devices: pl.DataFrame
    quality: Quality
    queries: int = 0
    bytes: int = 0
    fetch_s: float = 0.0

    @property
    def samples(self) -> int:
        return self.frames["gpu_samples"].height


@dataclass
class _Pending:
    chunk: Chunk
    futures: dict[str, Future[tuple[Matrix, int, float]]] = field(default_factory=dict)
    bulk: list[Future[tuple[dict[str, Matrix], int, float]]] = field(default_factory=list)
    """Per node shard, when a bulk read serves the DCGM fields: {column: Matrix}."""


class PrometheusCollector:
    """Read-only adapter over one engine URL; use as a context manager."""

    def __init__(
        self, url: str, settings: Settings, *, now: Callable[[], datetime] = utcnow,
        namespaces_from_metrics: bool = True, backoff_s: float = 0.5,
        queues: QueueCollector | None = None, replica_labels: tuple[str, ...] | None = None,
    ) -> None:
        self.settings = settings
        self.url = url
        self.replica_labels = (replica_labels if replica_labels is not None
                               else tuple(settings.prometheus.replica_labels))
        self._gpu_labels = dcgm.fetch_labels(self.replica_labels)
        self.queues = queues or queue_collectors(settings.queues.systems)
        self.prom = settings.prometheus
        self.http = PromHttp(url, self.prom, backoff_s=backoff_s)
        self.now = now
        self.namespaces_from_metrics = namespaces_from_metrics
        self._pool = ThreadPoolExecutor(max_workers=self.prom.max_concurrency,
                                        thread_name_prefix="promq")
        self._shards: list[Shard] = []
        self._bulk: BulkRead | None = None
        self._hami_uuids: set[str] = set()
        self.read_path: str | None = None
        """The path the DCGM series are read by (`query_range`, `remote_read`, `export`), once
        chosen (`choose_read_path`, at the first `iter_chunks`)."""

    def __enter__(self) -> PrometheusCollector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        self.http.close()

    # 1. Planning ------------------------------------------------------------------------
    def plan(self, window: Window) -> list[Chunk]:
        size = parse_duration(self.prom.chunk)
        return list(plan_chunks(window, size, self.prom.max_points_per_query))

    def check_source(self, window: Window) -> list[str]:
        """The DCGM fields we read that the engine has in `window`; none → `SourceError`."""
        names = set(self.http.label_values("__name__", GPU_MATCH, window.start, window.end))
        found = sorted(names & set(DCGM_FIELDS))
        if not found:
            seen = f"; it has only {', '.join(sorted(names)[:5])}" if names else ""
            raise SourceError(
                f"no DCGM series at {self.url} in [{window.start.isoformat()}, "
                f"{window.end.isoformat()}): looked for {', '.join(DCGM_FIELDS)}{seen}; "
                "is dcgm-exporter scraped by this Prometheus?")
        return found

    def shards(self, window: Window, points: int) -> list[Shard]:
        nodes = {
            label: self.http.label_values(label, GPU_MATCH, window.start, window.end)
            for label in NODE_LABELS
        }
        self._shards = make_shards(nodes, SERIES_PER_NODE, points, self.prom.max_samples_per_query)
        return self._shards

    def choose_read_path(self) -> str:
        """Probe the engine once for a bulk read (`bulk_read.choose`, `prometheus.read_path`)."""
        if self.read_path is None:
            self._bulk = choose(self.http, self.prom.read_path)
            self.read_path = self._bulk.kind if self._bulk else "query_range"
        return self.read_path

    def hami_cards(self, window: Window) -> set[str]:
        """The cards HAMi's scheduler names anywhere in `window` (`collectors.hami`): a scheduler
        outage in one chunk does not turn its cards back into whole cards."""
        found: set[str] = set()
        for name, labels in hami.CARD_FAMILIES.items():
            found.update(self.http.label_values(labels[0], name, window.start, window.end))
        return found

    # 2. Fetching ------------------------------------------------------------------------
    def _fetch(self, query: str, chunk: Chunk, labels: tuple[str, ...]) -> tuple[Matrix, int, float]:
        started = time.perf_counter()
        body = self.http.query_range(query, chunk.start, chunk.last_point, chunk.step.total_seconds())
        fetched = time.perf_counter() - started
        return parse_matrix(body, labels, f"query {query!r}"), len(body), fetched

    def _fetch_raw(self, expr_selector: str, chunk: Chunk,
                   labels: tuple[str, ...]) -> tuple[Matrix, int, float]:
        """The raw samples in `[chunk.start, chunk.end)` at their times (`promql.raw_samples`)."""
        started = time.perf_counter()
        query = promql.raw_samples(expr_selector, chunk.end - chunk.start)
        body = self.http.query_matrix(query, chunk.end)
        fetched = time.perf_counter() - started
        return parse_matrix(body, labels, f"query {query!r}"), len(body), fetched

    def _submit(self, chunk: Chunk) -> _Pending:
        pending = _Pending(chunk)
        step = chunk.step
        if self._bulk is not None:
            pending.bulk = [self._pool.submit(self._bulk.read, chunk, shard, DCGM_FIELDS, self._gpu_labels)
                            for shard in self._shards]
        for metric, column in DCGM_FIELDS.items():
            for i, shard in enumerate(self._shards if self._bulk is None else ()):
                query = latest(selector(metric, shard.matcher()), step)
                pending.futures[f"gpu|{column}|{i}"] = self._pool.submit(
                    self._fetch, query, chunk, self._gpu_labels)
        for metric, column in vllm.METRICS.items():
            pending.futures[f"tok|{column}"] = self._pool.submit(
                self._fetch, latest(metric, step), chunk, vllm.fetch_labels(self.replica_labels))
        queue_labels = (*self.queues.metric_labels,
                        *(r for r in self.replica_labels if r not in self.queues.metric_labels))
        for column, query in self.queues.metric_queries(step, replica_labels=self.replica_labels).items():
            pending.futures[f"queue|{column}"] = self._pool.submit(self._fetch, query, chunk, queue_labels)
        # Pod history: raw samples, so a pod's span does not depend on the step (decision 0183).
        requests = selector("kube_pod_container_resource_requests", 'resource=~"nvidia_com_.*"')
        pending.futures["pods|requests"] = self._pool.submit(
            self._fetch_raw, requests, chunk, (*REQUEST_LABELS, "container"))
        pending.futures["pods|claims"] = self._pool.submit(
            self._fetch_raw, "kube_pod_resourceclaim_info", chunk, CLAIM_LABELS)
        # HAMi allocations and KSM's claim families: raw samples too (decision 0212).
        for key, name in hami.raw_selectors().items():
            pending.futures[f"hami|{key}"] = self._pool.submit(
                self._fetch_raw, name, chunk, hami.fetch_labels(key))
        for key, (metric, labels) in DRA_SERIES.items():
            pending.futures[key] = self._pool.submit(self._fetch_raw, metric, chunk, labels)
        return pending

    def iter_chunks(self, window: Window, chunks: list[Chunk] | None = None) -> Iterator[ChunkData]:
        """Collected chunks in time order, fetching one chunk ahead."""
        plan = chunks if chunks is not None else self.plan(window)
        if not plan:
            return
        self.choose_read_path()
        self.shards(window, max(c.points for c in plan))
        self._hami_uuids = self.hami_cards(window)
        pending = self._submit(plan[0])
        for i in range(len(plan)):
            ahead = self._submit(plan[i + 1]) if i + 1 < len(plan) else None
            try:
                data = self._finish(pending)
            except BaseException:
                if ahead:
                    for future in ahead.futures.values():
                        future.cancel()
                    for bulk in ahead.bulk:
                        bulk.cancel()
                raise
            yield data
            if ahead:
                pending = ahead

    # 3. Building frames -----------------------------------------------------------------
    def _finish(self, pending: _Pending) -> ChunkData:
        chunk = pending.chunk
        quality = Quality()
        results: dict[str, Matrix] = {}
        total_bytes, fetch_s = 0, 0.0
        bulk = [future.result() for future in pending.bulk]
        for column in DCGM_FIELDS.values():  # the query path's key order: field, then shard
            for i, (matrices, _, _) in enumerate(bulk):
                results[f"gpu|{column}|{i}"] = matrices[column]
        for _, size, seconds in bulk:
            total_bytes += size
            fetch_s += seconds
        for key, future in pending.futures.items():
            matrix, size, seconds = future.result()
            results[key] = matrix
            total_bytes += size
            fetch_s += seconds
        now = self.now()
        gpu_fields = _group(results, "gpu")
        if all(m.series.height == 0 for m in gpu_fields.values()):
            quality.add_gap(chunk.start, chunk.end)
        build = dcgm.build_gpu_samples(gpu_fields, chunk, now, self.prom.pod_labels, quality,
                                       replica_labels=self.replica_labels)
        tokens = vllm.build_token_samples(_group(results, "tok"), chunk, now, quality,
                                          replica_labels=self.replica_labels)
        queues = self.queues.queue_samples(_group(results, "queue"), chunk, now, quality,
                                           replica_labels=self.replica_labels)
        node_labels = self._node_labels(chunk)
        cards = self._hami_card_facts(chunk)
        allocations = hami.allocations_from_matrices(_group(results, "hami"), cards, chunk.step)
        gpus = inventory.with_node_facts(inventory.gpus_from_devices(build.devices), node_labels)
        gpus = hami.mark_vgpu(gpus, self._hami_uuids | hami.hami_card_uuids([allocations], cards))
        frames = {
            "gpu_samples": build.samples,
            "token_samples": tokens,
            "queue_samples": queues,
            "gpus": gpus,
            "mig_instances": inventory.mig_instances_from_devices(build.devices),
            "nodes": with_node_labels(inventory.nodes_from_gpus(gpus, chunk.end, chunk.start), node_labels),
            "pods": self._pods(results["pods|requests"], chunk),
            "dra_pod_claims": self._pod_claims(results["pods|claims"], chunk),
            "vgpu_allocations": allocations,
        }
        frames.update(self._dra(gpu_fields, results, frames["dra_pod_claims"], chunk))
        if self.namespaces_from_metrics:
            frames["namespaces"] = self._namespaces(chunk)
        return ChunkData(chunk, frames, build.devices, quality,
                         len(pending.futures) + len(bulk) + 3 + len(hami.CARD_FAMILIES),
                         total_bytes, fetch_s)

    def _node_labels(self, chunk: Chunk) -> dict[str, dict[str, str]]:
        """GFD labels per node from kube-state-metrics (where it exports them): the configured
        time-slicing replica count and strategy (`nvidia.com/gpu.replicas`,
        `nvidia.com/gpu.sharing-strategy`), pool and MIG config."""
        span = duration(chunk.end - chunk.start)
        answer = self.http.query(f"last_over_time(kube_node_labels[{span}])", chunk.last_point)
        return node_labels_from_vector(answer["data"]["result"])

    def _hami_card_facts(self, chunk: Chunk) -> dict[str, hami.CardFacts]:
        """HAMi's memory and core totals per card, from the scheduler's card families."""
        span = duration(chunk.end - chunk.start)
        return hami.cards_from_vectors({
            name: self.http.query(query, chunk.last_point)["data"]["result"]
            for name, query in hami.card_queries(span).items()})

    def _namespaces(self, chunk: Chunk) -> pl.DataFrame:
        span = duration(chunk.end - chunk.start)
        answer = self.http.query(f"last_over_time(kube_namespace_labels[{span}])", chunk.last_point)
        return namespaces_from_vector(answer["data"]["result"], self.settings.teams, chunk.end)

    def _pod_claims(self, refs: Matrix, chunk: Chunk) -> pl.DataFrame:
        """`dra_pod_claims` from `kube_pod_resourceclaim_info` (empty where KSM predates it)."""
        if refs.empty:
            return pod_claims_from_frame(pl.DataFrame())
        series = refs.series.select(
            "sid",
            pl.coalesce("exported_namespace", "namespace").alias("namespace"),
            pl.coalesce("exported_pod", "pod").alias("pod"),
            pl.col("resourceclaim_name").replace("", None).alias("claim"),
            pl.col("resourceclaim_template_name").replace("", None).alias("template"),
        ).drop_nulls(["namespace", "pod", "claim"])
        return pod_claims_from_frame(refs.samples.join(series, on="sid").with_columns(
            (pl.col("ts") + sample_spacing(refs, chunk.step)).alias("end")).unique(
            ["namespace", "pod", "claim", "ts"]))

    def _dra(self, gpu_fields: dict[str, Matrix], results: dict[str, Matrix], refs: pl.DataFrame,
             chunk: Chunk) -> dict[str, pl.DataFrame]:
        """DRA claims and devices rebuilt from the chunk's series (`collectors.dra_prometheus`);
        the pods' scheduling times only for pods that reference a claim."""
        scheduled = scheduled_times([])
        if refs.height:
            span = duration(chunk.end - chunk.start)
            query = (f"last_over_time(kube_pod_status_scheduled_time[{span}]) and on (namespace, pod) "
                     f"last_over_time(kube_pod_resourceclaim_info[{span}])")
            scheduled = scheduled_times(self.http.query(query, chunk.last_point)["data"]["result"])
        return prometheus_frames(gpu_fields, results["dra|alloc"], results["dra|reserved"], refs,
                                 scheduled=scheduled, step=chunk.step, at=chunk.end)

    def _pods(self, requests: Matrix, chunk: Chunk) -> pl.DataFrame:
        if requests.empty:
            return pods_from_frames(pl.DataFrame(), {})
        series = requests.series.select(
            "sid",
            pl.coalesce("exported_namespace", "namespace").alias("namespace"),
            pl.coalesce("exported_pod", "pod").alias("pod"),
            "resource",
        ).drop_nulls(["namespace", "pod", "resource"])
        frame = (requests.samples.filter(pl.col("value").is_finite() & (pl.col("value") > 0))
                 .join(series, on="sid")
                 .group_by("namespace", "pod", "resource", "ts").agg(pl.col("value").sum())  # containers
                 .with_columns((pl.col("ts") + sample_spacing(requests, chunk.step)).alias("end")))
        span = duration(chunk.end - chunk.start)
        info: dict[tuple[str, str], dict[str, str | None]] = {}
        for item in self.http.query(f"last_over_time(kube_pod_info[{span}])", chunk.last_point)[
                "data"]["result"]:
            m = item["metric"]
            key = (m.get("exported_namespace") or m.get("namespace", ""),
                   m.get("exported_pod") or m.get("pod", ""))
            info[key] = {"node": m.get("node") or None, "owner_kind": m.get("created_by_kind") or None,
                         "owner_name": m.get("created_by_name") or None}
        labels_q = f'last_over_time(kube_pod_labels{{{QUEUE_LABEL}!=""}}[{span}])'
        for item in self.http.query(labels_q, chunk.last_point)["data"]["result"]:
            m = item["metric"]
            key = (m.get("exported_namespace") or m.get("namespace", ""),
                   m.get("exported_pod") or m.get("pod", ""))
            info.setdefault(key, {})["queue"] = m.get(QUEUE_LABEL)
        return pods_from_frames(frame, info)


def _group(results: dict[str, Matrix], kind: str) -> dict[str, Matrix]:
    """Merge the shard answers of each field of one kind: {column: Matrix}."""
    by_field: dict[str, list[Matrix]] = {}
    for key, matrix in results.items():
        parts = key.split("|")
        if parts[0] == kind:
            by_field.setdefault(parts[1], []).append(matrix)
    merged: dict[str, Matrix] = {}
    for column, matrices in by_field.items():
        if len(matrices) == 1:
            merged[column] = matrices[0]
            continue
        series_parts, sample_parts, offset = [], [], 0
        for m in matrices:
            series_parts.append(m.series.with_columns(pl.col("sid") + offset))
            sample_parts.append(m.samples.with_columns(pl.col("sid") + offset))
            offset += m.series.height
        merged[column] = Matrix(pl.concat(series_parts), pl.concat(sample_parts))
    return merged
