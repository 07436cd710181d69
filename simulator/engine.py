"""`Simulation`: a deterministic GPU fleet over a window, as frames, metrics and manifests.

Everything derives from (spec, window, seed): the hardware and the schedule of pods are built
once (small: one record per pod); samples and ground truth are computed chunk by chunk from
them (`activity.compute_chunk`), so a month of 1,000 cards streams in bounded memory and any
chunking yields the same rows.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from gpuledger.core.errors import InputError
from gpuledger.core.window import Window, as_utc
from gpuledger.simulator.activity import Chunk, SlotArrays, compute_chunk, idle_cover
from gpuledger.simulator.field_hardware import apply_field_hardware
from gpuledger.simulator.field_truth import context_steps, emitted_activity, holder_keys
from gpuledger.simulator.fleet import MODEL_FACTS, FleetSpec
from gpuledger.simulator.hardware import build
from gpuledger.simulator.inventory import inventory
from gpuledger.simulator.kube import kueue_manifests, manifests
from gpuledger.simulator.samples import (
    Names,
    QueueModel,
    gpu_samples_frame,
    queue_samples_frame,
    token_samples_frame,
)
from gpuledger.simulator.tenants import build_tenants, nominal_quotas
from gpuledger.simulator.timebase import Timebase
from gpuledger.simulator.truth import assemble, segments
from gpuledger.simulator.volcano_queues import VolcanoQueues
from gpuledger.simulator.workloads import build_schedule

SAMPLE_TABLES = ("gpu_samples", "token_samples", "queue_samples")
"""The frames `batches()` yields per chunk."""


@dataclass(frozen=True)
class ChunkOutput:
    """One chunk's window, its sample frames and (when asked) its ground-truth runs."""

    window: Window
    frames: dict[str, pl.DataFrame]
    truth: dict[str, np.ndarray] | None


class Simulation:
    """A simulated fleet; see the module docstring. Cheap to build, heavy work is lazy."""

    def __init__(
        self, spec: FleetSpec, window: Window, seed: int = 7, *,
        idle_threshold: float = 0.05, idle_min_minutes: float = 30,
    ) -> None:
        if not 0 <= idle_threshold <= 1:
            raise InputError(f"idle threshold {idle_threshold}: expected a ratio in [0, 1]")
        self.spec = spec
        self.window = window
        self.seed = int(seed)
        self.tb = Timebase.of(window)
        self.idle_threshold = idle_threshold
        self.idle_min_steps = max(1, math.ceil(idle_min_minutes * 60 / self.tb.step_s))
        self.hw = apply_field_hardware(build(spec, self.tb), self.tb, spec.field, spec.cluster)
        self.tenants = build_tenants(spec)
        self.schedule = build_schedule(spec, self.hw, self.tenants, self.tb, self.seed)
        if spec.field.pod_restarts:
            from gpuledger.simulator.field_schedule import restart_pods

            self.schedule = restart_pods(self.schedule, self.tb, spec.field.pod_restarts)
        self.arrays = SlotArrays.of(self.hw)
        self.names = Names.of(self.hw, self.schedule, self.tenants)
        self.quotas = nominal_quotas(spec, self.tenants)
        self.queues = QueueModel.of(self.schedule, self.hw, self.tenants, self.quotas, self.tb)
        from gpuledger.simulator.volcano import queue_deserved

        self.volcano_queues = VolcanoQueues.of(spec, self.tenants, self.schedule, queue_deserved(self))
        self._facts = {
            "memory": np.array([g.memory_mib for g in self.hw.gpus]),
            "idle_w": np.array([float(MODEL_FACTS[g.model]["idle_w"]) for g in self.hw.gpus]),
            "max_w": np.array([float(MODEL_FACTS[g.model]["max_w"]) for g in self.hw.gpus]),
        }

    # Facts -----------------------------------------------------------------------------
    @property
    def gpu_count(self) -> int:
        return len(self.hw.gpus)

    @property
    def pod_count(self) -> int:
        return len(self.schedule.pods)

    def inventory(self) -> dict[str, pl.DataFrame]:
        """Frames for tables gpus, nodes, namespaces, pods, mig_instances, queues, and the
        priorities and preemptions of `simulator.volcano`."""
        from gpuledger.simulator.volcano import with_volcano

        return with_volcano(self, inventory(self.spec, self.hw, self.tenants, self.schedule, self.tb))

    # Streams ---------------------------------------------------------------------------
    def batches(
        self, chunk: timedelta = timedelta(days=1)
    ) -> Iterator[tuple[Window, dict[str, pl.DataFrame]]]:
        """Sample frames (gpu_samples, token_samples, queue_samples) per chunk window."""
        for out in self.run(chunk, samples=True, truth=False):
            yield out.window, out.frames

    def ground_truth(self, chunk: timedelta = timedelta(days=1)) -> pl.DataFrame:
        """Card-hours per (UTC hour, device holder), unallocated capacity included."""
        parts = [out.truth for out in self.run(chunk, samples=False, truth=True) if out.truth]
        return self.assemble_truth(parts)

    def truth_by_team(self, chunk: timedelta = timedelta(days=1)) -> pl.DataFrame:
        """Per team, the card-hours held and the allocated-but-idle card-hours, from the
        generator's own intervals (field effects that change what happened included).

        Columns `team`, `card_hours`, `idle_card_hours`; allocated capacity only (unallocated
        and stranded capacity belong to no team); holders in namespaces without a team label
        are the row whose `team` is null. Sorted by team, nulls last.
        """
        truth = self.ground_truth(chunk).filter(pl.col("allocation_state") == "allocated")
        return truth.group_by("team").agg(
            pl.sum("card_hours"), pl.sum("idle_card_hours")
        ).sort("team", nulls_last=True)

    def assemble_truth(self, parts: list[dict[str, np.ndarray]]) -> pl.DataFrame:
        """The ground-truth frame from the `truth` parts of `run()` (one pass for both)."""
        return assemble(parts, self.hw, self.schedule, self.tenants, self.tb)

    def run(
        self, chunk: timedelta = timedelta(days=1), *, samples: bool = True, truth: bool = True
    ) -> Iterator[ChunkOutput]:
        """The one pass samples and ground truth come from; a caller wanting both (e.g. a
        benchmark or an analytics test) takes them together instead of simulating twice."""
        if chunk < self.window.step or chunk % self.window.step:
            raise InputError(f"chunk {chunk}: must be a positive multiple of the step {self.window.step}")
        context = self.idle_min_steps - 1 if truth else 0
        readings = truth and self.spec.field.drops_readings
        carry = context_steps(self.tb) if readings else 0
        for sub in self.window.split(chunk):
            k0, k1 = self.tb.index(sub.start), self.tb.index(sub.end)
            e0, e1 = max(0, k0 - context - carry), min(self.tb.steps, k1 + context)
            state = compute_chunk(self.schedule, self.arrays, self.tb, self.seed, e0=e0, e1=e1)
            frames = self._frames(state, k0, k1) if samples else {}
            runs = None
            if truth:
                judged = self._as_emitted(state) if readings else state
                idle = idle_cover(judged, self.idle_threshold, self.idle_min_steps)
                runs = segments(state, idle, self.tb, k0 - e0, k1 - e0)
            yield ChunkOutput(sub, frames, runs)

    def _as_emitted(self, state: Chunk) -> Chunk:
        """`state` with the activity the idle rule reads from the emitted telemetry: the
        readings of the rows `Damage.apply` keeps (the renderer writes the same), carried by
        the sampling model (`field_truth`); the chunk's own activity stays for `active_ratio`."""
        from gpuledger.simulator.field_telemetry import Damage

        rows = gpu_samples_frame(
            state, self.arrays, self.schedule, self.names, tb=self.tb, seed=self.seed, c0=0,
            c1=state.e1 - state.e0, virtual_gpus=self.spec.exporter.virtual_gpus,
            scrape_gaps=self.spec.scenario.scrape_gaps, facts=self._facts, with_ids=True,
        )
        kept = Damage(self).apply(rows)
        shown = emitted_activity(state, kept, self.arrays, holder_keys(self.schedule), self.tb)
        return replace(state, shown=shown)

    def _frames(self, state: Chunk, k0: int, k1: int, with_ids: bool = False) -> dict[str, pl.DataFrame]:
        c0, c1 = k0 - state.e0, k1 - state.e0
        return {
            "gpu_samples": gpu_samples_frame(
                state, self.arrays, self.schedule, self.names, tb=self.tb, seed=self.seed, c0=c0, c1=c1,
                virtual_gpus=self.spec.exporter.virtual_gpus,
                scrape_gaps=self.spec.scenario.scrape_gaps, facts=self._facts, with_ids=with_ids,
            ),
            "token_samples": token_samples_frame(self.schedule, self.names, self.tb, k0, k1),
            "queue_samples": pl.concat([  # Kueue's ClusterQueues, then Volcano's Queues
                queue_samples_frame(self.queues, self.schedule, self.tb, k0, k1),
                self.volcano_queues.samples(self.schedule, self.queues.pod_wait_steps, self.tb, k0, k1)]),
        }

    def step_frames(self, k0: int, k1: int, with_ids: bool = False) -> dict[str, pl.DataFrame]:
        """Sample frames of steps `[k0, k1)`; `with_ids` keeps slot/pod ids for rendering."""
        if not 0 <= k0 < k1 <= self.tb.steps:
            raise InputError(
                f"steps {k0}..{k1}: outside the simulated window {self.window} (0..{self.tb.steps})"
            )
        state = compute_chunk(self.schedule, self.arrays, self.tb, self.seed, e0=k0, e1=k1)
        return self._frames(state, k0, k1, with_ids)

    # Kubernetes ------------------------------------------------------------------------
    def kube_manifests(self, at: datetime | None = None) -> list[dict[str, Any]]:
        """Namespaces, the mig-parted ConfigMap, Nodes and the Pods running at `at`
        (default: the window's last step)."""
        k = self.tb.steps - 1 if at is None else self.tb.index(as_utc(at))
        k = min(max(k, 0), self.tb.steps - 1)
        return manifests(self.spec, self.hw, self.tenants, self.schedule, self.tb, k=k)

    def kueue_manifests(self) -> list[dict[str, Any]]:
        """ResourceFlavors, ClusterQueues (kueue.x-k8s.io/v1beta2) and LocalQueues."""
        return kueue_manifests(self.spec, self.tenants)

    # Metrics ---------------------------------------------------------------------------
    def write_openmetrics(
        self, path: str | Path, hostname_label: str = "Hostname", exported: bool = False,
        *, chunk: timedelta = timedelta(hours=6), families: tuple[str, ...] | None = None,
        step: timedelta | None = None,
    ) -> dict[str, int]:
        """Write every series over the window as one OpenMetrics file (promtool backfill);
        `families` picks metric families, `step` thins samples to a coarser scrape interval."""
        from gpuledger.simulator.openmetrics import write_openmetrics

        return write_openmetrics(
            self, Path(path), hostname_label=hostname_label, exported=exported, chunk=chunk,
            families=families, step=step,
        )

    def metrics_text(self, at: datetime, hostname_label: str = "Hostname", exported: bool = False) -> str:
        """The `/metrics` exposition (Prometheus text format) at one instant."""
        from gpuledger.simulator.openmetrics import exposition

        return exposition(self, as_utc(at), hostname_label=hostname_label, exported=exported)
