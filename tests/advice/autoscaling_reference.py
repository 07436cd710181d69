"""FROZEN: `analytics.advice.autoscaling` as of bc7f130 (the per-minute replay in Python lists), kept
as the reference the vectorised replay must equal exactly (tests/advice/test_autoscaling_exact.py,
bench/bench_advice.py). Do not edit: it is the old behaviour, not a second implementation to keep
in step."""
from __future__ import annotations

import math
from dataclasses import dataclass

import polars as pl

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


def minimum_by_hour(ts: list[object], load: list[float], scale_up: float) -> tuple[int, ...]:
    """Step 2."""
    frame = pl.DataFrame({"ts": ts, "load": load}).with_columns(pl.col("ts").dt.hour().alias("h"))
    low = dict(frame.group_by("h").agg(pl.col("load").quantile(0.05, "lower")).iter_rows())
    return tuple(max(1, math.ceil(float(low.get(h, 0.0) or 0.0) / scale_up - 1e-9)) for h in range(24))


def _window_means(values: list[float], width: int) -> list[float]:
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= width:
            total -= values[i - width]
        out.append(total / min(i + 1, width))
    return out


def replay(
    load: list[float], queue: list[float], hours: list[int], floor: tuple[int, ...], *,
    policy: Policy, max_replicas: int,
) -> list[int]:
    """Step 3: the proposed replica count per minute."""
    load_w = _window_means(load, policy.window_minutes)
    queue_w = _window_means(queue, policy.window_minutes)
    target = (policy.scale_up + policy.scale_down) / 2
    up_span = max(1, policy.up_stabilization_s // 60)
    down_span = max(1, policy.down_stabilization_s // 60)
    desired_hist: list[int] = []
    current = max(floor[hours[0]], 1)
    out = []
    for i, (lw, qw) in enumerate(zip(load_w, queue_w, strict=True)):
        desired = max(1, math.ceil(max(lw / target, qw / policy.queue_target) - 1e-9))
        desired_hist.append(desired)
        busy = lw / current > policy.scale_up or qw / current > policy.queue_target
        quiet = lw / current < policy.scale_down and qw / current < policy.queue_target / 2
        if busy:
            current = max(current, min(desired_hist[-up_span:]))
        elif quiet:
            current = min(current, max(desired_hist[-down_span:]))
        current = min(max(current, floor[hours[i]]), max_replicas)
        out.append(current)
    return out


def over_target(load: float, queue: float, recorded: int, proposed: int, queue_target: float) -> bool:
    """Step 4 for one minute."""
    if proposed <= 0 or load / proposed >= 1.0:
        return load > 0
    per_replica = (queue / max(recorded, 1)) * (max(recorded, 1) / proposed) ** 2
    return per_replica > queue_target


def batching_hint(frame: pl.DataFrame, scale_up: float) -> str | None:
    """Step 6."""
    data = frame.filter(pl.col("running").is_not_null() & pl.col("tokens_per_s").is_not_null()
                        & (pl.col("replicas") > 0))
    if data.height < 8:
        return None
    data = data.with_columns((pl.col("running") / pl.col("replicas")).alias("_c"),
                             (pl.col("tokens_per_s") / pl.col("replicas")).alias("_t"))
    lo, hi = data["_c"].quantile(0.25, "lower"), data["_c"].quantile(0.75, "higher")
    quiet = data.filter(pl.col("_c") <= lo)
    busy = data.filter(pl.col("_c") >= hi)
    if quiet.is_empty() or busy.is_empty() or hi is None or lo is None or hi <= lo:
        return None
    t_lo, t_hi = float(quiet["_t"].mean()), float(busy["_t"].mean())  # type: ignore[arg-type]
    if t_lo > 0 and t_hi >= 1.3 * t_lo and float(busy["activity"].mean()) < scale_up:  # type: ignore[arg-type]
        return (f"tokens/s per replica rises {t_hi / t_lo:.1f}x from {lo:.0f} to {hi:.0f} concurrent "
                "requests: grow the batch size (vLLM --max-num-seqs) before adding replicas")
    return None


def autoscaling_advice(
    series: pl.DataFrame, policy: Policy, *, gpus_per_replica: dict[tuple[str, str], int] | None = None,
    unit_price: float = 0.0,
) -> list[AutoscalingAdvice]:
    """Steps 1-6 per (namespace, deployment) in `series` (SERIES_SCHEMA, one row per minute)."""
    out = []
    for (ns, dep), group in series.sort("namespace", "deployment", "ts").group_by(
            "namespace", "deployment", maintain_order=True):
        per = (gpus_per_replica or {}).get((str(ns), str(dep)), 1)
        out.append(_one((str(ns), str(dep)), group, policy, per=per, price=unit_price))
    return out


def _one(
    key: tuple[str, str], group: pl.DataFrame, policy: Policy, *, per: int, price: float,
) -> AutoscalingAdvice:
    ns, dep = key
    group = group.with_columns(pl.col("queue").fill_null(0.0), pl.col("activity").fill_null(0.0))
    recorded = [int(v) for v in group["replicas"]]
    load = [r * float(a) for r, a in zip(recorded, group["activity"], strict=True)]
    queue = [float(q) for q in group["queue"]]
    hours = [int(h) for h in group["ts"].dt.hour()]
    floor = minimum_by_hour(group["ts"].to_list(), load, policy.scale_up)
    top = policy.max_replicas or max(*recorded, *floor)
    proposed = replay(load, queue, hours, floor, policy=policy, max_replicas=top)
    over = sum(over_target(li, q, r, p, policy.queue_target)
               for li, q, r, p in zip(load, queue, recorded, proposed, strict=True))
    base = sum(over_target(li, q, r, r, policy.queue_target)
               for li, q, r in zip(load, queue, recorded, strict=True))
    rec_h, prop_h = sum(recorded) * per / 60, sum(proposed) * per / 60
    month = HOURS_PER_MONTH / (len(recorded) / 60) if recorded else 0.0
    return AutoscalingAdvice(
        ns, dep, policy, min(floor), top, floor, len(recorded), rec_h, prop_h, int(over), int(base),
        batching_hint(group, policy.scale_up), (rec_h - prop_h) * price * month,
    )
