"""Sample frames of one chunk: `gpu_samples`, `token_samples`, `queue_samples` (core/frames.py).

Rows follow what the exporters publish:
- a whole card or a MIG instance has one series whether held or not (no pod labels when free);
- a time-sliced card has, with `--kubernetes-virtual-gpus`, one series per held replica
  (`vgpu` = replica index) and one unlabeled series while nobody holds it; without the flag,
  one series per card labeled with the pod of its lowest held replica;
- a HAMi vGPU card has one series and never any pod label, flag or not: HAMi's device IDs
  (`GPU-<uuid>-<n>`) are not card UUIDs, so dcgm-exporter cannot map its pods (HAMi issues 112,
  1032; tests/fixtures/planes/hami/dcgm-exporter.prom). Who holds it is HAMi's to say
  (`simulator.hami`);
- device-level fields (power, temperature, GPU_UTIL, and on shared cards everything) are the
  card's; GPU_UTIL is absent (null) on MIG instances, as on real hardware;
- scrape gaps (scenario knob) drop a node's rows for whole 10-minute blocks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from gpuledger.core.frames import TOKEN_SAMPLES, polars_schema
from gpuledger.simulator.activity import Chunk, SlotArrays, load_curve, load_integral
from gpuledger.simulator.hardware import RESERVED_MIB, Hardware
from gpuledger.simulator.noise import uniform
from gpuledger.simulator.tenants import Tenants
from gpuledger.simulator.timebase import Timebase
from gpuledger.simulator.volcano_queues import volcano_pod
from gpuledger.simulator.workloads import CLASSES, INFERENCE, Schedule

GAP_BLOCK_S = 600
_TENSOR = np.array([0.6, 0.35, 0.3, 0.4, 0.25])


@dataclass(frozen=True)
class Names:
    """String lookup tables, gathered by index into frame columns (-1 gives null)."""

    node: pl.Series
    uuid: pl.Series
    slot_profile: pl.Series
    slot_vgpu: pl.Series
    pod_name: pl.Series
    pod_namespace: pl.Series
    pod_container: pl.Series

    @classmethod
    def of(cls, hw: Hardware, sched: Schedule, tenants: Tenants) -> Names:
        def series(values: Sequence[str | None]) -> pl.Series:
            return pl.Series([*values, None], dtype=pl.String)

        pods = sched.pods
        return cls(
            node=series([n.name for n in hw.nodes]),
            uuid=series([g.uuid for g in hw.gpus]),
            slot_profile=series([s.profile for s in hw.slots]),
            slot_vgpu=series([s.vgpu for s in hw.slots]),
            pod_name=series(pods.name),
            pod_namespace=series([tenants.namespaces[i].name for i in pods.namespace]),
            pod_container=series([CLASSES[c].container for c in pods.cls]),
        )


def _gather(table: pl.Series, idx: np.ndarray, name: str) -> pl.Series:
    return table.gather(np.where(idx < 0, len(table) - 1, idx)).alias(name)


def _ts(tb: Timebase, k: np.ndarray) -> pl.Series:
    us = (tb.origin_s + k * tb.step_s).astype(np.int64) * 1_000_000
    return pl.Series("ts", us).cast(pl.Datetime("us", "UTC"))


def gpu_sample_rows(
    chunk: Chunk, arrays: SlotArrays, c0: int, c1: int, virtual_gpus: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row coordinates (slot, column, vgpu-label-shown) over chunk columns `[c0, c1)`."""
    holder = chunk.holder[:, c0:c1]
    valid = chunk.valid[:, c0:c1]
    dedicated = arrays.mode < 2
    parts_s: list[np.ndarray] = []
    parts_c: list[np.ndarray] = []
    parts_v: list[np.ndarray] = []
    # 1. Whole cards and MIG instances: one row per existing device and step.
    mask = valid & dedicated[:, None]
    s, c = np.nonzero(mask)
    parts_s.append(s)
    parts_c.append(c)
    parts_v.append(np.zeros(s.size, dtype=bool))
    # 2. Shared cards: held replicas (virtual GPUs) or one row per card.
    shared_gpus = np.unique(arrays.gpu[~dedicated])
    for g in shared_gpus:
        lo = int(arrays.gpu_first[g])
        hi = int(arrays.gpu_first[g + 1]) if g + 1 < len(arrays.gpu_first) else len(arrays.gpu)
        held = holder[lo:hi] >= 0
        anyheld = held.any(axis=0)
        exists = valid[lo:hi].any(axis=0)  # a card reports only while it is in its node
        if arrays.mode[lo] == 3:  # HAMi: one series per card, no holder (module docstring)
            cols = np.flatnonzero(exists)
            parts_s.append(np.full(cols.size, lo))
            parts_c.append(cols)
            parts_v.append(np.zeros(cols.size, dtype=bool))
        elif virtual_gpus:
            hs, hc = np.nonzero(held)
            parts_s.append(hs + lo)
            parts_c.append(hc)
            parts_v.append(np.ones(hs.size, dtype=bool))
            free = np.flatnonzero(~anyheld & exists)
            parts_s.append(np.full(free.size, lo))
            parts_c.append(free)
            parts_v.append(np.zeros(free.size, dtype=bool))
        else:
            cols = np.flatnonzero(exists)
            first = np.where(anyheld, np.argmax(held, axis=0), 0)[cols] + lo
            parts_s.append(first)
            parts_c.append(cols)
            parts_v.append(np.zeros(cols.size, dtype=bool))
    return np.concatenate(parts_s), np.concatenate(parts_c), np.concatenate(parts_v)


def gpu_samples_frame(
    chunk: Chunk, arrays: SlotArrays, sched: Schedule, names: Names, *,
    tb: Timebase, seed: int, c0: int, c1: int, virtual_gpus: bool, scrape_gaps: float,
    facts: dict[str, np.ndarray], with_ids: bool = False,
) -> pl.DataFrame:
    """The chunk's `gpu_samples`; `with_ids` adds `_slot` and `_pod` (for rendering metrics)."""
    s, c, show_vgpu = gpu_sample_rows(chunk, arrays, c0, c1, virtual_gpus)
    col = c + c0
    k = chunk.e0 + col
    g = arrays.gpu[s]
    node = arrays.gpu_node[g]
    # 1. Scrape gaps: a node's whole 10-minute block is missing.
    if scrape_gaps > 0:
        block = (tb.origin_s + k * tb.step_s) // GAP_BLOCK_S
        keep = uniform(seed, 9, node, block) >= scrape_gaps
        s, col, k, g, node, show_vgpu = s[keep], col[keep], k[keep], g[keep], node[keep], show_vgpu[keep]
    # 2. Rows stay grouped by device (each series contiguous, in time order); matrices are
    #    read through flat indices (much cheaper than 2-D fancy indexing).
    width = chunk.holder.shape[1]
    at_slot = s * width + col
    at_gpu = g * width + col
    holder = chunk.holder.ravel().take(at_slot)
    mode = arrays.mode[s]
    shared = mode >= 2
    pod = np.where((holder >= 0) & (mode != 3), sched.alloc_pod[np.maximum(holder, 0)], -1)
    # 3. Metric values.
    shown = chunk.shown.ravel().take(at_slot)
    gpu_act = chunk.gpu_act.ravel().take(at_gpu)
    u1 = uniform(seed, 3, s, k)
    u2 = uniform(seed, 4, g, k)
    fb_used = chunk.mem_used.ravel().take(at_slot)
    fb_used[shared] = chunk.gpu_mem.ravel().take(at_gpu[shared])
    fb_total = np.where(mode == 1, arrays.memory[s], facts["memory"][g] - RESERVED_MIB)
    tensor = np.where(shared | (pod < 0), 0.35, _TENSOR[sched.pod_cls[np.maximum(pod, 0)]])
    idle_w, max_w = facts["idle_w"][g], facts["max_w"][g]
    vgpu_idx = np.where(show_vgpu, s, -1)
    ids = [pl.Series("_slot", s, dtype=pl.Int64), pl.Series("_pod", pod, dtype=pl.Int64),
           pl.Series("_vgpu", show_vgpu)] if with_ids else []
    return pl.DataFrame([
        *ids,
        _ts(tb, k),
        _gather(names.node, node, "node"),
        _gather(names.uuid, g, "uuid"),
        pl.Series("gpu_i_id", arrays.gi_id[s], dtype=pl.Int32),
        _gather(names.slot_profile, s, "mig_profile"),
        _gather(names.slot_vgpu, vgpu_idx, "vgpu"),
        _gather(names.pod_namespace, pod, "namespace"),
        _gather(names.pod_name, pod, "pod"),
        _gather(names.pod_container, pod, "container"),
        pl.Series("gr_engine_active", _as_exported(shown)),
        pl.Series("sm_active", _as_exported(shown * (0.8 + 0.15 * u1))),
        pl.Series("gpu_util", np.where(mode == 1, np.nan, np.round(gpu_act * 100)), nan_to_null=True),
        pl.Series("fb_used_mib", fb_used),
        pl.Series("fb_free_mib", np.maximum(fb_total - fb_used, 0.0)),
        pl.Series("power_w", np.round(idle_w + (max_w - idle_w) * gpu_act + 4 * (u2 - 0.5), 3)),
        pl.Series("tensor_active", _as_exported(shown * tensor)),
        pl.Series("dram_active", _as_exported(shown * (0.3 + 0.3 * u1))),
        pl.Series("gpu_temp_c", np.round(31 + 45 * gpu_act + 2 * u2)),
    ])


EXPORTER_DECIMALS = 6
"""dcgm-exporter prints a double field with `%f`: six decimals are all a collection ever sees
(and stores), so the simulator emits the profiling ratios at that precision too (decision 0129;
power is already in mW, memory, temperature and utilisation whole, as DCGM's integer fields)."""


def _as_exported(ratio: np.ndarray) -> np.ndarray:
    return np.round(ratio, EXPORTER_DECIMALS)


def token_samples_frame(
    sched: Schedule, names: Names, tb: Timebase, k0: int, k1: int
) -> pl.DataFrame:
    """vLLM counters of serving pods: cumulative tokens since the pod started (a new pod
    starts from zero: a counter reset), and its queue gauges (`request_gauges`)."""
    pods = sched.pods
    cls = sched.pod_cls
    start = sched.pod_start
    end = np.array(pods.end, dtype=np.int64)
    live = np.nonzero((cls == INFERENCE) & (start < k1) & (end > k0))[0]
    if not live.size:
        return pl.DataFrame(schema=polars_schema(TOKEN_SAMPLES))
    lo = np.maximum(start[live], k0)
    hi = np.minimum(end[live], k1)
    counts = hi - lo
    pod = np.repeat(live, counts)
    k = np.repeat(lo, counts) + (np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts))
    t_abs = (tb.origin_s + k * tb.step_s).astype(np.float64)
    t_start = (tb.origin_s + start[pod] * tb.step_s).astype(np.float64)
    rate = np.array(pods.prompt_rate)[pod]
    prompt = np.floor(rate * (load_integral(t_abs) - load_integral(t_start)))
    gen = np.floor(prompt * np.array(pods.gen_ratio)[pod])
    models = pl.Series([m or "" for m in pods.model_name], dtype=pl.String)
    return pl.DataFrame([
        _ts(tb, k),
        _gather(names.pod_namespace, pod, "namespace"),
        _gather(names.pod_name, pod, "pod"),
        models.gather(pod).alias("model_name"),
        pl.Series("prompt_tokens_total", prompt, dtype=pl.Float64),
        pl.Series("generation_tokens_total", gen, dtype=pl.Float64),
        *request_gauges(rate * load_curve(t_abs)),
    ])


PROMPT_TOKENS_PER_REQUEST = 500.0
SECONDS_PER_REQUEST = 8.0
MAX_NUM_SEQS = 16
"""vLLM's `--max-num-seqs`: requests batched at once; the rest wait in its queue."""


def request_gauges(prompt_tokens_per_s: np.ndarray) -> tuple[pl.Series, pl.Series]:
    """`vllm:num_requests_waiting` / `_running` from the pod's prompt-token rate at that
    instant (the same diurnal load the token counters integrate): requests in flight by
    Little's law (arrival rate x time per request), at most `MAX_NUM_SEQS` running, the excess
    waiting, both whole requests (the autoscaling advice reads them as the queue signal)."""
    in_flight = np.round(prompt_tokens_per_s / PROMPT_TOKENS_PER_REQUEST * SECONDS_PER_REQUEST)
    running = np.minimum(in_flight, MAX_NUM_SEQS)
    return (pl.Series("num_requests_waiting", in_flight - running, dtype=pl.Float64),
            pl.Series("num_requests_running", running, dtype=pl.Float64))


@dataclass(frozen=True)
class QueueModel:
    """Kueue bookkeeping: per pod its (cluster queue, flavor, resource) series and amount."""

    keys: list[tuple[str, str, str]]
    quota: np.ndarray
    cq_names: list[str]
    key_cq: np.ndarray
    pod_key: np.ndarray
    """Series index per pod, -1 for pods Kueue does not manage."""
    pod_cq: np.ndarray
    pod_amount: np.ndarray
    pod_wait_steps: np.ndarray
    pod_wait_s: np.ndarray

    @classmethod
    def of(
        cls, sched: Schedule, hw: Hardware, tenants: Tenants, quotas: dict[tuple[str, str, str], int],
        tb: Timebase,
    ) -> QueueModel:
        keys = sorted(quotas)
        index = {key: i for i, key in enumerate(keys)}
        cq_names = sorted({k[0] for k in keys})
        cq_index = {n: i for i, n in enumerate(cq_names)}
        pods = sched.pods
        pod_key = np.full(len(pods), -1, dtype=np.int64)
        pod_cq = np.full(len(pods), -1, dtype=np.int64)
        for p in range(len(pods)):
            if pods.queue[p] is None or volcano_pod(hw.pools, pods.pool[p]):
                continue  # no queue, or Volcano's (`simulator.volcano_queues`): one system per pod
            cq = tenants.namespaces[pods.namespace[p]].cluster_queue
            key = (cq, hw.pools[pods.pool[p]].name, pods.resource[p])
            pod_key[p] = index.get(key, -1)
            pod_cq[p] = cq_index[cq]
        wait_s = np.array(pods.wait_s)
        return cls(
            keys=keys, quota=np.array([quotas[k] for k in keys], dtype=np.float64),
            cq_names=cq_names, key_cq=np.array([cq_index[k[0]] for k in keys], dtype=np.int64),
            pod_key=pod_key, pod_cq=pod_cq, pod_amount=np.array(pods.amount, dtype=np.float64),
            pod_wait_steps=np.ceil(wait_s / tb.step_s).astype(np.int64), pod_wait_s=wait_s,
        )

    def series(self, sched: Schedule, k0: int, k1: int) -> dict[str, np.ndarray]:
        """usage per key, pending and admitted (count, wait sum) per cluster queue, by step."""
        width = k1 - k0
        start = sched.pod_start
        end = np.array(sched.pods.end, dtype=np.int64)
        managed = self.pod_key >= 0

        def spans(rows: np.ndarray, lo: np.ndarray, hi: np.ndarray, amount: np.ndarray, n: int) -> np.ndarray:
            diff = np.zeros((n, width + 1))
            a = np.clip(lo - k0, 0, width)
            b = np.clip(hi - k0, 0, width)
            keep = a < b
            np.add.at(diff, (rows[keep], a[keep]), amount[keep])
            np.add.at(diff, (rows[keep], b[keep]), -amount[keep])
            return np.cumsum(diff, axis=1)[:, :width]

        p = np.nonzero(managed)[0]
        usage = spans(self.pod_key[p], start[p], end[p], self.pod_amount[p], len(self.keys))
        pending = spans(self.pod_cq[p], start[p] - self.pod_wait_steps[p], start[p],
                        np.ones(p.size), len(self.cq_names))
        admitted = np.zeros((len(self.cq_names), width))
        wait_sum = np.zeros((len(self.cq_names), width))
        q = p[(start[p] >= k0) & (start[p] < k1)]
        np.add.at(admitted, (self.pod_cq[q], start[q] - k0), 1.0)
        np.add.at(wait_sum, (self.pod_cq[q], start[q] - k0), self.pod_wait_s[q])
        return {"usage": usage, "pending": pending, "admitted": admitted, "wait_sum": wait_sum}


def queue_samples_frame(
    qm: QueueModel, sched: Schedule, tb: Timebase, k0: int, k1: int
) -> pl.DataFrame:
    width = k1 - k0
    data = qm.series(sched, k0, k1)
    n = len(qm.keys)
    key = np.repeat(np.arange(n), width)
    col = np.tile(np.arange(width), n)
    cq = qm.key_cq[key]
    admitted = data["admitted"][cq, col]
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_wait = np.where(admitted > 0, data["wait_sum"][cq, col] / admitted, np.nan)
    keys = pl.DataFrame(
        {"cluster_queue": [k[0] for k in qm.keys], "flavor": [k[1] for k in qm.keys],
         "resource": [k[2] for k in qm.keys]}
    )
    return pl.DataFrame([
        _ts(tb, k0 + col),
        keys["cluster_queue"].gather(key),
        keys["flavor"].gather(key),
        keys["resource"].gather(key),
        pl.Series("nominal_quota", qm.quota[key], dtype=pl.Float64),
        pl.Series("usage", data["usage"].ravel(), dtype=pl.Float64),
        pl.Series("pending_workloads", data["pending"][cq, col], dtype=pl.Float64),
        pl.Series("admission_wait_s", mean_wait, dtype=pl.Float64, nan_to_null=True),
    ])
