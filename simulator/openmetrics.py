"""Render the fleet as Prometheus metrics: an OpenMetrics file for backfill, or a live
`/metrics` page.

Families and labels follow the real exporters:
- dcgm-exporter: `gpu, UUID, pci_bus_id, device, modelName, [GPU_I_PROFILE, GPU_I_ID],
  Hostname|hostname, DCGM_FI_DRIVER_VERSION, pod, namespace, container[, vgpu]`, with empty pod
  labels on free devices. `exported=True` renders what a ServiceMonitor with honorLabels false
  stores: the workload's labels as `exported_*`, and `pod`/`namespace`/`container`/`instance`/
  `job` naming the exporter pod on that node;
- kube-state-metrics: `kube_pod_labels`, `kube_pod_info`, `kube_pod_container_resource_requests`
  (`resource="nvidia_com_gpu"`, `unit="integer"`), `kube_namespace_labels`, `kube_node_labels`;
- Kueue: `kueue_cluster_queue_resource_usage`, `kueue_cluster_queue_nominal_quota`,
  `kueue_pending_workloads`, and the `kueue_admission_wait_time_seconds` histogram;
- Volcano: `volcano_queue_*` per Queue (`simulator.volcano_queues`);
- HAMi's scheduler: `hami_gpu_*` per vGPU card and `hami_vgpu_*` per container device
  (`simulator.hami`); its cards' dcgm series carry no pod labels (`simulator.samples`);
- vLLM: `vllm:prompt_tokens_total`, `vllm:generation_tokens_total` by `model_name`.

The file writer makes one pass over the window in chunks and appends each family's lines to
its own temporary file, then concatenates them (OpenMetrics wants each family in one block),
so memory stays bounded by a chunk. Within a chunk the lines of a series are contiguous and in
time order; timestamps are seconds; the file ends with `# EOF`.

The family list lives in `metric_families`, the label tables in `metric_labels`; what is read
from a simulation is the `SimulatedFleet` protocol, so this module never imports the engine
(which imports this one).
"""

from __future__ import annotations

import shutil
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl

from gpuledger.core.errors import InputError
from gpuledger.core.frames import DCGM_FIELDS
from gpuledger.simulator.field_telemetry import Damage, ha_lines, ms_text
from gpuledger.simulator.hami_series import SchedulerSeries
from gpuledger.simulator.metric_families import (
    FAMILIES,
    FAMILY_NAMES,
    WAIT_BUCKETS,
    choose_families,
)
from gpuledger.simulator.metric_labels import DcgmLabels, dcgm_labels, gather, ksm_labels, table
from gpuledger.simulator.simulated_fleet import SimulatedFleet
from gpuledger.simulator.timebase import expand_steps
from gpuledger.simulator.volcano_queues import volcano_lines


class Renderer:
    """Sample lines per family for a span of steps; the label tables (`metric_labels`) are
    built once here and gathered per sample row."""

    def __init__(self, sim: SimulatedFleet, hostname_label: str = "Hostname", exported: bool = False) -> None:
        self.sim = sim
        self.every_s: int | None = None
        self.dcgm = dcgm_labels(sim, hostname_label, exported)
        self.ksm = ksm_labels(sim)
        field = sim.spec.field
        self.damage = Damage(sim) if field.any else None
        self.renamed = dcgm_labels(sim, "hostname", True) if field.label_renames else None
        self.hami = SchedulerSeries.of(sim)

    # Lines per family ----------------------------------------------------------------
    def lines(
        self, frames: dict[str, pl.DataFrame], k0: int, k1: int, *, with_ts: bool,
        families: tuple[str, ...] = FAMILY_NAMES, every_s: int | None = None,
    ) -> dict[str, pl.Series]:
        """Sample lines of steps `[k0, k1)` per family (frames from `step_frames(with_ids=True)`);
        `every_s` keeps only instants that are multiples of it (a coarser scrape interval)."""
        want = set(families)
        self.every_s = every_s
        if every_s:
            frames = {
                name: f.filter(pl.col("ts").dt.epoch("s") % every_s == 0) for name, f in frames.items()
            }
        out: dict[str, pl.Series] = {}
        if want & set(DCGM_FIELDS):
            out.update(self._dcgm(frames["gpu_samples"], with_ts, want))
        if want & {"vllm:prompt_tokens", "vllm:generation_tokens"}:
            out.update(self._vllm(frames["token_samples"], with_ts))
        out.update(self._ksm(k0, k1, with_ts, want))
        out.update(self.hami.lines(self.sim.schedule, k0, k1, ts=lambda k: self._steps_ts(k, with_ts),
                                   kept=self._kept, want=want))
        kueue, volcano = self.sim.volcano_queues.split(frames["queue_samples"])
        out.update(self._kueue(kueue, k0, k1, with_ts, want))
        out.update(volcano_lines(volcano, self._ts(pl.col("ts"), with_ts), want))
        if with_ts and self.sim.spec.field.ha_replicas:
            out = {name: ha_lines(lines) for name, lines in out.items()}
        return {name: lines for name, lines in out.items() if name in want}

    def _ts(self, ts: pl.Expr, with_ts: bool) -> pl.Expr:
        return pl.lit(" ") + ts.dt.epoch("s").cast(pl.String) if with_ts else pl.lit("")

    def _kept(self, *arrays: np.ndarray) -> tuple[np.ndarray, ...]:
        """Drop entries whose step (the last array) is not on the `every_s` grid."""
        if not self.every_s:
            return arrays
        keep = (self.sim.tb.origin_s + arrays[-1] * self.sim.tb.step_s) % self.every_s == 0
        return tuple(a[keep] for a in arrays)

    def _steps_ts(self, k: np.ndarray, with_ts: bool) -> pl.Series:
        if not with_ts:
            return pl.Series([""] * len(k), dtype=pl.String)
        seconds = self.sim.tb.origin_s + k * self.sim.tb.step_s
        return " " + pl.Series(seconds, dtype=pl.Int64).cast(pl.String)

    def _dcgm(self, frame: pl.DataFrame, with_ts: bool, want: set[str]) -> dict[str, pl.Series]:
        frame = frame.sort(["_slot", "_pod", "_vgpu", "ts"])
        ts = self._ts(pl.col("ts"), with_ts)
        if self.damage is not None:
            frame = self.damage.apply(frame)
            if self.damage.timed:  # the file in seconds, a served page in milliseconds
                ts = pl.lit(" ") + (ms_text(pl.col("_ms")) if with_ts else pl.col("_ms").cast(pl.String))
        labels = _dcgm_label_lines(self.dcgm, frame)
        if self.renamed is not None and self.damage is not None:
            after = _dcgm_label_lines(self.renamed, frame)
            labels = pl.select(pl.when(self.damage.renamed(frame)).then(after).otherwise(labels)).to_series()
        body = frame.select(
            pl.lit(labels).alias("labels"), ts.alias("ts"),
            *[pl.col(c) for c in DCGM_FIELDS.values()],
        )
        out: dict[str, pl.Series] = {}
        for metric, column in DCGM_FIELDS.items():
            if metric not in want:
                continue
            out[metric] = body.filter(pl.col(column).is_not_null()).select(
                pl.concat_str([pl.lit(metric + "{"), pl.col("labels"), pl.lit("} "),
                               pl.col(column).cast(pl.String), pl.col("ts")])
            ).to_series()
        return out

    def _vllm(self, frame: pl.DataFrame, with_ts: bool) -> dict[str, pl.Series]:
        frame = frame.sort(["namespace", "pod", "ts"])
        labels = pl.concat_str([
            pl.lit('model_name="'), pl.col("model_name"), pl.lit('",namespace="'), pl.col("namespace"),
            pl.lit('",pod="'), pl.col("pod"), pl.lit('"'),
        ])
        out = {}
        for family, column in (("vllm:prompt_tokens", "prompt_tokens_total"),
                               ("vllm:generation_tokens", "generation_tokens_total")):
            out[family] = frame.select(pl.concat_str([
                pl.lit(family + "_total{"), labels, pl.lit("} "), pl.col(column).cast(pl.String),
                self._ts(pl.col("ts"), with_ts),
            ])).to_series()
        return out

    def _ksm(self, k0: int, k1: int, with_ts: bool, want: set[str]) -> dict[str, pl.Series]:
        out: dict[str, pl.Series] = {}
        sched = self.sim.schedule
        start = sched.pod_start
        end = np.array(sched.pods.end, dtype=np.int64)
        alive = np.nonzero((start < k1) & (end > k0))[0]
        pod, k = self._kept(*expand_steps(alive, np.maximum(start[alive], k0), np.minimum(end[alive], k1)))
        if "kube_pod_labels" in want:
            out["kube_pod_labels"] = _render("kube_pod_labels", gather(self.ksm.pod_labels, pod),
                                             np.ones(pod.size), self._steps_ts(k, with_ts))
        if "kube_pod_info" in want:
            out["kube_pod_info"] = _render("kube_pod_info", gather(self.ksm.pod_info, pod),
                                           np.ones(pod.size), self._steps_ts(k, with_ts))
        if "kube_pod_container_resource_requests" in want:
            rp = self.ksm.req_pod
            live = np.nonzero((start[rp] < k1) & (end[rp] > k0))[0]
            lo, hi = np.maximum(start[rp[live]], k0), np.minimum(end[rp[live]], k1)
            entry, k = self._kept(*expand_steps(live, lo, hi))
            out["kube_pod_container_resource_requests"] = _render(
                "kube_pod_container_resource_requests", gather(self.ksm.req_labels, entry),
                self.ksm.req_value[entry], self._steps_ts(k, with_ts))
        if "kube_namespace_labels" in want:
            n = len(self.ksm.ns_labels)
            idx, k = self._kept(*expand_steps(np.arange(n), np.full(n, k0), np.full(n, k1)))
            out["kube_namespace_labels"] = _render("kube_namespace_labels",
                                                   gather(table(self.ksm.ns_labels), idx),
                                                   np.ones(idx.size), self._steps_ts(k, with_ts))
        if "kube_node_labels" in want:
            lo = np.array([e[0] for e in self.ksm.node_epochs], dtype=np.int64)
            hi = np.array([e[1] for e in self.ksm.node_epochs], dtype=np.int64)
            live = np.nonzero((lo < k1) & (hi > k0))[0]
            idx, k = self._kept(*expand_steps(live, np.maximum(lo[live], k0), np.minimum(hi[live], k1)))
            out["kube_node_labels"] = _render(
                "kube_node_labels", gather(table([e[2] for e in self.ksm.node_epochs]), idx),
                np.ones(idx.size), self._steps_ts(k, with_ts))
        return out

    def _kueue(
        self, frame: pl.DataFrame, k0: int, k1: int, with_ts: bool, want: set[str]
    ) -> dict[str, pl.Series]:
        out: dict[str, pl.Series] = {}
        frame = frame.sort(["cluster_queue", "flavor", "resource", "ts"])
        labels = pl.concat_str([
            pl.lit('cluster_queue="'), pl.col("cluster_queue"), pl.lit('",flavor="'), pl.col("flavor"),
            pl.lit('",resource="'), pl.col("resource"), pl.lit('"'),
        ])
        for family, column in (("kueue_cluster_queue_resource_usage", "usage"),
                               ("kueue_cluster_queue_nominal_quota", "nominal_quota")):
            if family in want:
                out[family] = frame.select(pl.concat_str([
                    pl.lit(family + "{"), labels, pl.lit("} "), pl.col(column).cast(pl.String),
                    self._ts(pl.col("ts"), with_ts),
                ])).to_series()
        if "kueue_pending_workloads" in want:
            pending = frame.group_by(["cluster_queue", "ts"]).agg(pl.first("pending_workloads")).sort(
                ["cluster_queue", "ts"]
            )
            out["kueue_pending_workloads"] = pending.select(pl.concat_str([
                pl.lit('kueue_pending_workloads{cluster_queue="'), pl.col("cluster_queue"),
                pl.lit('",status="active"} '), pl.col("pending_workloads").cast(pl.String),
                self._ts(pl.col("ts"), with_ts),
            ])).to_series()
        if "kueue_admission_wait_time_seconds" in want:
            out["kueue_admission_wait_time_seconds"] = self._histogram(k0, k1, with_ts)
        return out

    def _histogram(self, k0: int, k1: int, with_ts: bool) -> pl.Series:
        """Cumulative admission waits since the window start, per cluster queue and step."""
        qm = self.sim.queues
        start = self.sim.schedule.pod_start
        (steps,) = self._kept(np.arange(k0, k1))
        ts = self._steps_ts(steps, with_ts)
        parts: list[pl.Series] = []
        for cq_idx, cq in enumerate(qm.cq_names):
            mine = np.nonzero((qm.pod_cq == cq_idx) & (start >= 0))[0]
            order = np.argsort(start[mine], kind="stable")
            starts, waits = start[mine][order], qm.pod_wait_s[mine][order]
            csum = np.concatenate([[0.0], np.cumsum(waits)])
            count = np.searchsorted(starts, steps, side="right")
            cols: list[pl.Series] = []
            for le in WAIT_BUCKETS:
                within = np.searchsorted(starts[waits <= le], steps, side="right")
                cols.append(f'kueue_admission_wait_time_seconds_bucket{{cluster_queue="{cq}",le="{le}"}} '
                            + pl.Series(within.astype(np.float64)).cast(pl.String) + ts)
            cols.append(f'kueue_admission_wait_time_seconds_bucket{{cluster_queue="{cq}",le="+Inf"}} '
                        + pl.Series(count.astype(np.float64)).cast(pl.String) + ts)
            cols.append(f'kueue_admission_wait_time_seconds_count{{cluster_queue="{cq}"}} '
                        + pl.Series(count.astype(np.float64)).cast(pl.String) + ts)
            cols.append(f'kueue_admission_wait_time_seconds_sum{{cluster_queue="{cq}"}} '
                        + pl.Series(csum[count]).cast(pl.String) + ts)
            # One MetricPoint per step: its bucket, count and sum lines stay together.
            grid = pl.DataFrame({str(i): c for i, c in enumerate(cols)})
            parts.append(pl.Series(np.stack([c.to_numpy() for c in grid.get_columns()], axis=1).ravel(),
                                   dtype=pl.String))
        return pl.concat(parts) if parts else pl.Series([], dtype=pl.String)


def _dcgm_label_lines(table: DcgmLabels, frame: pl.DataFrame) -> pl.Series:
    """The label set of each dcgm row from a label table (slot prefix, workload, vgpu)."""
    vgpu_idx = np.where(frame["_vgpu"].to_numpy(), frame["_slot"].to_numpy(), -1)
    return pl.DataFrame({
        "a": gather(table.slot_prefix, frame["_slot"]),
        "b": gather(table.pod_dcgm, frame["_pod"]),
        "c": gather(table.slot_vgpu, vgpu_idx),
    }).select(pl.concat_str(["a", "b", "c"]).alias("labels"))["labels"]


def _render(metric: str, labels: pl.Series, values: np.ndarray, ts: pl.Series) -> pl.Series:
    return pl.DataFrame({"l": labels, "v": pl.Series(values, dtype=pl.Float64), "t": ts}).select(
        pl.concat_str([pl.lit(metric + "{"), pl.col("l"), pl.lit("} "), pl.col("v").cast(pl.String),
                       pl.col("t")])
    ).to_series()


# Outputs -------------------------------------------------------------------------------
def write_openmetrics(
    sim: SimulatedFleet, path: Path, *, hostname_label: str = "Hostname", exported: bool = False,
    chunk: timedelta = timedelta(hours=6), families: tuple[str, ...] | None = None,
    step: timedelta | None = None,
) -> dict[str, int]:
    """Stream the window into `path`; returns the number of samples per family. `step` (a
    multiple of the simulation step) thins the samples to a coarser scrape interval."""
    chosen = choose_families(families)
    every_s = None
    if step is not None:
        every_s = int(step.total_seconds())
        if step < sim.window.step or every_s % sim.tb.step_s or step.total_seconds() != every_s:
            raise InputError(
                f"metrics step {step}: must be a multiple of the simulation step {sim.window.step}"
            )
    renderer = Renderer(sim, hostname_label, exported)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".openmetrics-", dir=path.parent))
    counts = dict.fromkeys(chosen, 0)
    try:
        parts = {name: tmp / f"{i:02d}.txt" for i, name in enumerate(chosen)}
        handles = {name: part.open("ab") for name, part in parts.items()}
        try:
            for sub in sim.window.split(chunk):
                k0, k1 = sim.tb.index(sub.start), sim.tb.index(sub.end)
                frames = sim.step_frames(k0, k1, with_ids=True)
                rendered = renderer.lines(frames, k0, k1, with_ts=True, families=chosen, every_s=every_s)
                for name, lines in rendered.items():
                    if lines.len():
                        lines.to_frame("l").write_csv(
                            handles[name], include_header=False, quote_style="never"
                        )
                        counts[name] += lines.len()
        finally:
            for handle in handles.values():
                handle.close()
        by_name = {f.name: f for f in FAMILIES}
        with path.open("wb") as out:
            for name in chosen:
                if not counts[name]:
                    continue
                fam = by_name[name]
                out.write(f"# HELP {fam.name} {fam.help}\n# TYPE {fam.name} {fam.type}\n".encode())
                with parts[name].open("rb") as src:
                    shutil.copyfileobj(src, out, 1 << 20)
            out.write(b"# EOF\n")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return counts


def exposition(
    sim: SimulatedFleet, at: datetime, *, hostname_label: str = "Hostname", exported: bool = False,
    renderer: Renderer | None = None,
) -> str:
    """Prometheus text format (0.0.4) of every family at the step containing `at`."""
    k = sim.tb.index(at)
    frames = sim.step_frames(k, k + 1, with_ids=True)
    renderer = renderer or Renderer(sim, hostname_label, exported)
    lines = renderer.lines(frames, k, k + 1, with_ts=False)
    chunks: list[str] = []
    for fam in FAMILIES:
        body = lines.get(fam.name)
        if body is None or not body.len():
            continue
        name = fam.name + fam.suffix
        chunks.append(f"# HELP {name} {fam.help}\n# TYPE {name} {fam.type}\n")
        chunks.append("\n".join(body.to_list()) + "\n")
    return "".join(chunks)

