"""Inference autoscaling advice: a two-signal HPA proposal per serving Deployment, replayed.

Serving teams that pool GPUs scale inference on two signals, the request queue
(`vllm:num_requests_waiting`, TGI `tgi_queue_size`, Triton `nv_inference_pending_request_count`)
and GPU activity over a 5-10 minute sliding window, up at a high threshold and down at a low
one, with a minimum by time of day. The evidence is a replay of the recorded month.

1. Series per Deployment and minute: `replicas`, total `queue` waiting, mean `activity` per
   replica (0-1), optional `running` requests and `tokens_per_s` (totals). Load
   L = replicas x activity is the work in busy replica-equivalents, independent of how many
   replicas served it.
2. Time-of-day minimum: per UTC hour of day, ceil(5th percentile of L that hour / scale-up
   threshold), at least 1: the floor that the quietest day of that hour still needs.
3. Replay, minute by minute, an HPA-like controller on the sliding-window means of L and of
   the queue: desired = ceil(max(L_w / target, queue_w / queue_target)), target = the middle of
   the two activity thresholds. It scales up when the window activity at the current count
   passes the scale-up threshold or the queue per replica passes the queue target (after the
   up stabilization, the max desired over it); down only when the activity is under the
   scale-down threshold and the queue under half its target, to the max desired over the down
   stabilization. Clamped to [time-of-day minimum, max replicas].
4. The queue under the proposal is modelled from the recording: waiting requests per replica
   grow as the load per replica does, q' = (queue / R) x (R / R')^2 (fewer servers: more per
   server and longer per request); a minute with L / R' >= 1 is saturated. A minute is over the
   target when q' > queue target or it is saturated. The recorded minutes over target are
   counted the same way, as the baseline.
5. GPU-hours saved = sum(R - R') / 60 x GPUs per replica; the saving is that x price, per month.
6. Batching: when tokens/s per replica at the busiest quarter of concurrency is at least 1.3x
   that at the quietest quarter while activity stays under the scale-up threshold, throughput
   still grows with concurrency; when besides requests wait in at least 5 % of the minutes, and
   in at least 80 % of those the batch is full (running per replica at 90 % of its recorded
   ceiling), the batch size is the limit: raise it (vLLM `--max-num-seqs`) before adding
   replicas.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import polars as pl

from gpuledger.analytics.advice import autoscaling_replay as replay_np
from gpuledger.analytics.advice.autoscaling_replay import Floats, Ints

HOURS_PER_MONTH = 730.0
SERIES_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "namespace": pl.String, "deployment": pl.String, "ts": pl.Datetime("us", "UTC"),
    "replicas": pl.Int64, "queue": pl.Float64, "activity": pl.Float64,
    "running": pl.Float64, "tokens_per_s": pl.Float64,
}


@dataclass(frozen=True, slots=True)
class Policy:
    """The proposal's knobs (from `core.config_advice.AdviceSettings`)."""

    window_minutes: int = 5
    queue_target: float = 4.0
    scale_up: float = 0.8
    scale_down: float = 0.3
    up_stabilization_s: int = 60
    down_stabilization_s: int = 600
    max_replicas: int | None = None


@dataclass(frozen=True)
class AutoscalingAdvice:
    namespace: str
    deployment: str
    policy: Policy
    min_replicas: int
    max_replicas: int
    minimum_by_hour: tuple[int, ...]
    """24 values: the time-of-day minimum per UTC hour."""
    minutes: int
    gpu_hours_recorded: float
    gpu_hours_proposed: float
    over_target_minutes: int
    over_target_minutes_recorded: int
    batching: str | None
    monthly_saving: float

    @property
    def gpu_hours_saved(self) -> float:
        return self.gpu_hours_recorded - self.gpu_hours_proposed

    @property
    def over_target_share(self) -> float:
        return self.over_target_minutes / self.minutes if self.minutes else 0.0

    def reason(self) -> str:
        text = (f"replay of {self.minutes} min: {self.gpu_hours_saved:,.1f} GPU-h saved, "
                f"{self.over_target_share:.1%} of minutes over the queue target "
                f"(recorded {self.over_target_minutes_recorded}); replicas {self.min_replicas}-"
                f"{self.max_replicas}, scale up at {self.policy.scale_up:.0%} / down at "
                f"{self.policy.scale_down:.0%} over {self.policy.window_minutes} min")
        return f"{text}; {self.batching}" if self.batching else text

    def as_dict(self) -> dict[str, object]:
        return {
            "namespace": self.namespace, "deployment": self.deployment,
            "min_replicas": self.min_replicas, "max_replicas": self.max_replicas,
            "minimum_by_hour": list(self.minimum_by_hour), "minutes": self.minutes,
            "gpu_hours_recorded": round(self.gpu_hours_recorded, 3),
            "gpu_hours_proposed": round(self.gpu_hours_proposed, 3),
            "gpu_hours_saved": round(self.gpu_hours_saved, 3),
            "over_target_minutes": self.over_target_minutes,
            "over_target_share": round(self.over_target_share, 4),
            "over_target_minutes_recorded": self.over_target_minutes_recorded,
            "batching": self.batching, "monthly_saving": round(self.monthly_saving, 2),
        }


BATCH_FULL = 0.9
"""A minute's batch is full when its running requests per replica reach 90 % of the most the
recording shows: vLLM does not export its `--max-num-seqs`, the recorded ceiling is its trace."""
WAITING_SHARE = 0.05
"""Step 6 asks for requests waiting in at least 5 % of the recorded minutes ..."""
WAITING_AT_FULL = 0.8
"""... and for the batch to be full in at least 80 % of those: requests wait because the batch
is capped, not because the load outgrew the replicas (then the replay's replicas are the answer)."""


def batching_hint(frame: pl.DataFrame, scale_up: float) -> str | None:
    """Step 6: throughput still grows with concurrency, the GPU has headroom, and requests
    wait with the batch full. Without the last, every vLLM Deployment below saturation would get
    the hint (its tokens/s follow its load, so they rise with concurrency anyway), though a larger
    `--max-num-seqs` changes nothing while the batch never fills (decision 0265).

    It runs on the minutes' numpy arrays (`_Minutes`): the Polars filters it took before cost
    0.4-0.7 s of a 1,000-GPU month's 159 Deployments; the quartiles are observed values
    (numpy's `lower` and `higher` are Polars'), and a running or tokens reading that is NaN
    counts as none, as a null does."""
    return _hint(_Minutes.of(frame), scale_up)


def _hint(minutes: _Minutes, scale_up: float) -> str | None:
    """`batching_hint` on a Deployment's arrays."""
    running, tokens, activity = minutes.running, minutes.tokens, minutes.activity
    replicas = minutes.recorded_f
    with np.errstate(invalid="ignore"):
        keep = ~np.isnan(running) & ~np.isnan(tokens) & (replicas > 0)
    if np.count_nonzero(keep) < 8:
        return None
    per = running[keep] / replicas[keep]
    rate = tokens[keep] / replicas[keep]
    lo, hi = float(np.quantile(per, 0.25, method="lower")), float(np.quantile(per, 0.75, method="higher"))
    if hi <= lo:
        return None
    quiet, busy = per <= lo, per >= hi
    t_lo, t_hi = float(rate[quiet].mean()), float(rate[busy].mean())
    busy_activity = float(activity[keep][busy].mean())
    if not (t_lo > 0 and t_hi >= 1.3 * t_lo and busy_activity < scale_up):
        return None
    cap = float(per.max())
    waiting = minutes.queue[keep] > 0
    full = int(np.count_nonzero(waiting & (per >= BATCH_FULL * cap)))
    waited = int(np.count_nonzero(waiting))
    if waited < WAITING_SHARE * len(per) or full < WAITING_AT_FULL * waited:
        return None
    return (f"tokens/s per replica rises {t_hi / t_lo:.1f}x from {lo:.0f} to {hi:.0f} concurrent requests "
            f"and requests waited with the batch full ({cap:.0f} running per replica) in "
            f"{waited / len(per):.0%} of minutes: grow the batch size (vLLM --max-num-seqs) "
            "before adding replicas")


def autoscaling_advice(
    series: pl.DataFrame, policy: Policy, *, gpus_per_replica: dict[tuple[str, str], int] | None = None,
    unit_price: float = 0.0, presorted: bool = False,
) -> list[AutoscalingAdvice]:
    """Steps 1-6 per (namespace, deployment) in `series` (SERIES_SCHEMA, one row per minute);
    `presorted`: the caller sorted it by namespace, deployment, ts already (a month's frame is
    not copied again).

    Each Deployment is a zero-copy slice of the sorted month, replayed on numpy arrays
    (`autoscaling_replay`, the hourly 5th percentiles included). A caller that holds each
    Deployment's minutes apart calls `deployment_advice` per Deployment instead (the same
    steps, the same figures)."""
    frame = series if presorted else series.sort("namespace", "deployment", "ts")
    out, offset = [], 0
    for ns, dep, length in frame.group_by("namespace", "deployment", maintain_order=True).len().iter_rows():
        key = (str(ns), str(dep))
        per = (gpus_per_replica or {}).get(key, 1)
        out.append(_one(key, frame.slice(offset, length), policy, per=per, price=unit_price))
        offset += length
    return out


def deployment_advice(
    key: tuple[str, str], minutes: pl.DataFrame | Sequence[pl.DataFrame], policy: Policy, *, per: int = 1,
    price: float = 0.0,
) -> AutoscalingAdvice:
    """Steps 1-6 for one Deployment `key` from its minutes alone (SERIES_SCHEMA's columns after
    namespace and deployment, sorted by ts; one frame, or its days' frames in order): what
    `autoscaling_advice` computes for it."""
    return _one(key, minutes, policy, per=per, price=price)


HOUR_US = 3_600_000_000


@dataclass(frozen=True, slots=True)
class _Minutes:
    """A Deployment's minutes as numpy arrays: the recorded replicas (as integers and as
    floats), queue and activity with nulls filled (no reading: 0), the load (replicas x
    activity), the UTC hour, and the running requests and tokens/s (NaN where null).

    Why arrays, not Polars columns: the frame's `with_columns` cost ~3 ms a Deployment (5 s of
    a 10,000-GPU month's 1,717 replays, beside their ~26 s), mostly the engine's per-call
    overhead on 43,200 rows; the same values from numpy take a fraction of that. The load is
    the float product Polars took (the replicas cast to float, NaN where null), the hour
    `ts.dt.hour()` of a UTC time (floor division of its microseconds)."""

    recorded: Ints
    recorded_f: Floats
    queue: Floats
    activity: Floats
    load: Floats
    hours: Ints
    running: Floats
    tokens: Floats

    @classmethod
    def of(cls, minutes: pl.DataFrame | Sequence[pl.DataFrame]) -> _Minutes:
        """The arrays of a Deployment's minutes: one frame, or its days' frames in order (joined
        here, on the replay's thread: one `pl.concat` a Deployment, where a numpy call per day
        and column cost more than the copy it saved)."""
        frame = minutes if isinstance(minutes, pl.DataFrame) else pl.concat(minutes, how="vertical_relaxed")
        replicas = frame["replicas"].to_numpy()
        recorded_f = replicas.astype(np.float64)
        activity = _filled(frame["activity"])
        micros = np.asarray(frame["ts"].to_numpy(), dtype="datetime64[us]").view(np.int64)
        return cls(replicas.astype(np.int64), recorded_f, _filled(frame["queue"]), activity,
                   recorded_f * activity, micros // HOUR_US % 24,
                   frame["running"].to_numpy().astype(np.float64),
                   frame["tokens_per_s"].to_numpy().astype(np.float64))


def _filled(column: pl.Series) -> Floats:
    """`column` as floats, nulls as 0 (`fill_null(0.0)`: a NaN reading stays NaN)."""
    values = column.to_numpy().astype(np.float64)
    if column.null_count():
        values = np.where(column.is_null().to_numpy(), 0.0, values)
    return values


def _one(
    key: tuple[str, str], group: pl.DataFrame | Sequence[pl.DataFrame], policy: Policy, *, per: int,
    price: float,
) -> AutoscalingAdvice:
    ns, dep = key
    minutes = _Minutes.of(group)
    recorded, load, queue, hours = minutes.recorded, minutes.load, minutes.queue, minutes.hours
    floor = replay_np.hour_floor(replay_np.hour_lows(load, hours), policy.scale_up)
    top = policy.max_replicas or max(int(recorded.max()), *floor)
    width = policy.window_minutes
    proposed = replay_np.replay(
        replay_np.window_means(load, width), replay_np.window_means(queue, width),
        np.asarray(floor, dtype=np.int64)[hours], max(floor[int(hours[0])], 1),
        scale_up=policy.scale_up, scale_down=policy.scale_down, queue_target=policy.queue_target,
        up_span=max(1, policy.up_stabilization_s // 60), down_span=max(1, policy.down_stabilization_s // 60),
        top=top)
    over = replay_np.over_target_minutes(load, queue, recorded, proposed, policy.queue_target)
    base = replay_np.over_target_minutes(load, queue, recorded, recorded, policy.queue_target)
    rec_h, prop_h = int(recorded.sum()) * per / 60, int(proposed.sum()) * per / 60
    return AutoscalingAdvice(
        ns, dep, policy, min(floor), top, floor, len(recorded), rec_h, prop_h, over, base,
        _hint(minutes, policy.scale_up), monthly_saving(rec_h, prop_h, len(recorded), price),
    )


def monthly_saving(recorded_h: float, proposed_h: float, minutes: int, price: float) -> float:
    """Step 5's saving: the GPU-hours saved over `minutes` of replay, at `price` per GPU-hour,
    scaled to a month."""
    month = HOURS_PER_MONTH / (minutes / 60) if minutes else 0.0
    return (recorded_h - proposed_h) * price * month


def priced(advice: AutoscalingAdvice, price: float) -> AutoscalingAdvice:
    """`advice` replayed without a price (a month replayed before its models are all known,
    `autoscaling_month`), with its saving at `price`: the figure the replay would have given."""
    return replace(advice, monthly_saving=monthly_saving(
        advice.gpu_hours_recorded, advice.gpu_hours_proposed, advice.minutes, price))
