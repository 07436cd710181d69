"""Idle ranking, token cost, requested-vs-used, right-sizing and workload profiles.

Cases:
- top idle allocations rank by idle cost and carry the bill's idle figures; idle runs list
  each run of at least 30 minutes with its length and whether memory stayed in use;
- token cost: counter increases across a reset (hand-computed), GPU cost from the bill, split
  by work (a generated token weighs 3 prompt tokens), cost per million prompt/generated tokens;
- right-sizing: a whole H100 using 6 GiB at p95 activity 0.1 fits 1g.10gb (saving hand-
  computed); a 3g.40gb instance using 30 GiB stays; a busy whole card stays whole; an idle
  notebook (label) is reclaimed; `rightsized_demand` counts the demand per model and profile;
- profiles: an idle notebook, a training job and an inference service get the expected names,
  and the same seed gives the same profiles.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from gpuledger.analytics.billing.bill import Bill
from gpuledger.analytics.workloads.idle import idle_runs_frame, top_idle
from gpuledger.analytics.workloads.profiles import FEATURES, SAMPLE_ROWS, workload_class, workload_profiles
from gpuledger.analytics.workloads.recommend import recommend, rightsized_demand, smallest_profile
from gpuledger.analytics.workloads.requested import workload_usage
from gpuledger.analytics.workloads.tokens import token_costs
from gpuledger.core.config import Settings
from gpuledger.core.frames import TABLES, polars_schema
from gpuledger.warehouse import Warehouse
from tests.analytics.builders import Seg, at, gpus, load, namespaces, pods, samples, window


def _fleet() -> dict[str, pl.DataFrame]:
    return {
        "gpus": gpus(*({"uuid": f"GPU-{i}", "gpu_index": i} for i in range(4)),
                     {"uuid": "GPU-M", "gpu_index": 4, "sharing_mode": "mig"}),
        "gpu_samples": samples([
            # notebook: 3 h idle with 8 GiB held
            Seg("GPU-0", at(0), at(4), "ds", "nb-0", act=0.01, fb=8192),
            # small inference on a whole card: p95 activity 0.1, 6 GiB
            Seg("GPU-1", at(0), at(4), "ml", "svc-small", act=0.1, fb=6000),
            # busy training: 70 GiB
            Seg("GPU-2", at(0), at(4), "ml", "train-0", act=0.9, fb=70000),
            # 3g.40gb instance using 30 GiB at 0.6
            Seg("GPU-M", at(0), at(4), "ml", "svc-mig", act=0.6, fb=30000, gpu_i_id=1, profile="3g.40gb"),
        ]),
        "namespaces": namespaces({"ds": "data", "ml": "ml"}),
        "pods": pods(
            {"namespace": "ds", "pod": "nb-0", "owner_kind": "StatefulSet",
             "labels": json.dumps({"app": "notebook"})},
            {"namespace": "ml", "pod": "svc-small", "owner_kind": "ReplicaSet"},
            {"namespace": "ml", "pod": "train-0", "owner_kind": "Job"},
            {"namespace": "ml", "pod": "svc-mig", "owner_kind": "ReplicaSet"},
        ),
    }


@pytest.fixture
def fleet(tmp_path):
    return load(tmp_path / "f.duckdb", window(4), _fleet())


def test_top_idle_and_runs(fleet):
    with Warehouse.open(fleet, read_only=True) as wh:
        top = top_idle(wh, window(4), Settings(), top=5)
        runs = idle_runs_frame(wh, window(4), Settings())
    assert top["pod"].to_list() == ["nb-0"]
    row = top.row(0, named=True)
    assert row["idle_card_hours"] == pytest.approx(4.0)
    assert row["idle_cost"] == pytest.approx(12.0)
    assert row["held_idle"] is True
    assert runs.height == 1
    assert runs["minutes"][0] == pytest.approx(240)
    assert runs["held"][0] is True


def test_token_cost_with_counter_reset(tmp_path):
    # Counters every 25 min; reset at 01:15 (pod restarted). Increases: prompt 400 + 300 + 200
    # (the 200 after the reset) + 100 = 1,000,000 x ..., generated half of it.
    prompt = [1_000_000, 1_400_000, 1_700_000, 200_000, 300_000]
    rows = [
        {"ts": at(0, 25 * i), "namespace": "ml", "pod": "svc", "model_name": "llama",
         "prompt_tokens_total": float(p), "generation_tokens_total": float(p) / 2}
        for i, p in enumerate(prompt)
    ]
    frames = {
        "gpus": gpus({"uuid": "GPU-1"}),
        "gpu_samples": samples([Seg("GPU-1", at(0), at(2), "ml", "svc")]),
        "namespaces": namespaces({"ml": "ml"}),
        "token_samples": pl.DataFrame(rows, schema=polars_schema(TABLES["token_samples"])),
    }
    path = load(tmp_path / "t.duckdb", window(2), frames)
    with Warehouse.open(path, read_only=True) as wh:
        costs = token_costs(wh, window(2), Settings())
    row = costs.by_model.row(0, named=True)
    # The series starts at the window start: its first value is not an increase.
    assert row["prompt_tokens"] == 400_000 + 300_000 + 200_000 + 100_000
    assert row["generation_tokens"] == 500_000
    assert row["gpu_cost"] == pytest.approx(6.0)
    # work = 1.0 M + 3 x 0.5 M = 2.5 M; prompt gets 6 x 1/2.5 = 2.40 -> 2.40 per M prompt
    assert row["cost_per_m_prompt"] == pytest.approx(2.4)
    assert row["cost_per_m_generated"] == pytest.approx(3.6 / 0.5)
    assert row["cost_per_m_tokens"] == pytest.approx(6.0 / 1.5)


def test_smallest_profile_from_geometry():
    assert smallest_profile("H100-80GB", 7_200, 1, 81920.0) == "1g.10gb"
    assert smallest_profile("H100-80GB", 12_000, 1, 81920.0) == "1g.20gb"
    assert smallest_profile("H100-80GB", 12_000, 2, 81920.0) == "2g.20gb"
    assert smallest_profile("H100-80GB", 36_000, 3, 81920.0) == "3g.40gb"
    assert smallest_profile("H100-80GB", 84_000, 1, 81920.0) is None
    assert smallest_profile("A100-80GB", 9_000, 1, 81920.0) == "1g.10gb"


def test_recommendations(fleet):
    with Warehouse.open(fleet, read_only=True) as wh:
        result = recommend(wh, window(4), Settings())
        demand = rightsized_demand(wh, window(4), Settings())
    recs = {r["pod"]: r for r in result.recommendations.iter_rows(named=True)}
    assert set(recs) == {"nb-0", "svc-small"}
    assert recs["nb-0"]["kind"] == "reclaim_idle_notebook"
    # 4 h idle at 3.00 over a 4 h window -> x 730/4 per month
    assert recs["nb-0"]["monthly_saving"] == pytest.approx(12.0 * 730 / 4)
    small = recs["svc-small"]
    assert small["kind"] == "whole_to_mig"
    assert small["recommended"] == "1g.10gb"   # 6000 MiB x 1.2 = 7200 <= 10 GiB; 0.1 x 7 x 1.2 -> 1 slice
    # now 3.00/h exclusive; 1g.10gb = 1/7 card at 3.00 x 0.9 -> saving per held hour 3 - 0.3857
    assert small["monthly_saving"] == pytest.approx((3.0 - 3.0 / 7 * 0.9) * 4 * 730 / 4)
    rows = {(r["model"], r["profile"]): r for r in demand.iter_rows(named=True)}
    # the notebook (8 GiB x 1.2 fits 10 GiB) and the small service each need a 1g.10gb
    assert rows[("H100-80GB", "1g.10gb")]["count"] == 2
    assert rows[("H100-80GB", "1g.10gb")]["card_hours"] == pytest.approx(2 * 4 / 7)
    assert rows[("H100-80GB", "3g.40gb")]["count"] == 1    # 30 GiB x 1.2 = 36 GiB, 0.6 x 3 x 1.2 = 3 slices
    assert rows[("H100-80GB", "whole")]["count"] == 1      # the training job stays whole


def test_requested_vs_used(fleet):
    with Warehouse.open(fleet, read_only=True) as wh:
        usage = workload_usage(wh, window(4), Settings())
    row = usage.filter(pl.col("pod") == "svc-mig").row(0, named=True)
    assert row["profile"] == "3g.40gb"
    assert row["act_p95"] == pytest.approx(0.6)
    assert row["fb_max_mib"] == pytest.approx(30000)
    assert row["share"] == pytest.approx(3 / 7)
    assert row["device_memory_mib"] == pytest.approx(81920 * 4 / 8)


def test_profiles_are_named_and_stable():
    usage = pl.DataFrame({
        "namespace": ["a"] * 6, "pod": [f"p{i}" for i in range(6)], "uuid": [f"u{i}" for i in range(6)],
        "gpu_i_id": [-1] * 6,
        "act_mean": [0.02, 0.03, 0.85, 0.8, 0.3, 0.28],
        "act_p95": [0.05, 0.06, 0.95, 0.93, 0.5, 0.52],
        "act_std": [0.02, 0.02, 0.05, 0.06, 0.1, 0.12],
        "idle_fraction": [0.9, 0.85, 0.0, 0.01, 0.05, 0.08],
        "fb_p95_ratio": [0.3, 0.35, 0.6, 0.65, 0.8, 0.75],
    })
    first = workload_profiles(usage, k=3, seed=7)
    names = dict(zip(first.assignments["pod"], first.assignments["workload_profile"], strict=True))
    assert names["p0"] == names["p1"] == "idle notebook"
    assert names["p2"] == names["p3"] == "compute-bound training"
    assert names["p4"] == names["p5"] == "memory-bound inference"
    again = workload_profiles(usage.reverse(), k=3, seed=7)
    assert again.clusters.equals(first.clusters)
    assert all("mean activity" in e for e in first.clusters["explanation"])


def _lloyd_inertia(x: np.ndarray, k: int, rng: np.random.Generator) -> float:
    """Plain Lloyd's k-means from k rows drawn at random, to convergence, written here (the
    independent computation the profiles' clustering is held against): its sum of squared
    distances to the nearest centre."""
    centres = x[rng.choice(len(x), k, replace=False)]
    for _ in range(300):
        nearest = ((x[:, None, :] - centres[None, :, :]) ** 2).sum(axis=2).argmin(axis=1)
        moved = np.array([x[nearest == c].mean(axis=0) if (nearest == c).any() else centres[c]
                          for c in range(k)])
        if np.allclose(moved, centres, atol=1e-12):
            break
        centres = moved
    return float(((x[:, None, :] - centres[None, :, :]) ** 2).sum(axis=2).min(axis=1).sum())


def test_profiles_reach_the_least_distortion_of_many_plain_k_means_runs():
    """More rows than the starts are drawn from (`SAMPLE_ROWS`), in eight overlapping groups of
    unequal size for four profiles, where k-means has several local minima: each profile's
    centroid is the mean of its members (a k-means fixed point, in the features' own units),
    and the profiles' distortion is no worse than the best of twenty plain Lloyd runs."""
    rng = np.random.default_rng(3)
    sizes = rng.integers(300, 4_000, 8)
    x = np.vstack([rng.uniform(0, 1, 5) + rng.normal(0, 0.12, (n, 5)) for n in sizes])
    assert len(x) > SAMPLE_ROWS
    usage = pl.DataFrame({"namespace": ["a"] * len(x), "pod": [f"p{i:05d}" for i in range(len(x))],
                          "uuid": ["u"] * len(x), "gpu_i_id": [-1] * len(x),
                          **{f: x[:, i] for i, f in enumerate(FEATURES)}})
    profiles = workload_profiles(usage, k=4, seed=7)
    assert profiles.clusters.height == 4
    members = usage.join(profiles.assignments.select("pod", "profile_id"), on="pod").sort("pod")
    centroid_of = {}
    for cluster in profiles.clusters.iter_rows(named=True):
        mine = members.filter(pl.col("profile_id") == cluster["profile_id"])
        for f in FEATURES:
            assert cluster[f] == pytest.approx(mine[f].mean(), abs=1e-4)
        centroid_of[cluster["profile_id"]] = np.array([cluster[f] for f in FEATURES])
    mean, scale = x.mean(axis=0), x.std(axis=0)
    z = (x - mean) / scale
    nearest = (np.stack([centroid_of[i] for i in members["profile_id"]]) - mean) / scale
    ours = float(((z - nearest) ** 2).sum())
    best_plain = min(_lloyd_inertia(z, 4, np.random.default_rng(seed)) for seed in range(20))
    assert ours <= best_plain * (1 + 1e-4)


def test_profiles_of_few_distinct_rows_among_many(recwarn):
    """12,000 allocations that read only two ways (more rows than the starts are drawn from):
    two profiles, each the rows of one reading, and no warning on the way."""
    rows = 12_000
    idle = np.arange(rows) % 5 == 0
    usage = pl.DataFrame({"namespace": ["a"] * rows, "pod": [f"p{i:05d}" for i in range(rows)],
                          "uuid": ["u"] * rows, "gpu_i_id": [-1] * rows,
                          "act_mean": np.where(idle, 0.02, 0.85), "act_p95": np.where(idle, 0.05, 0.95),
                          "act_std": np.where(idle, 0.02, 0.05), "idle_fraction": np.where(idle, 0.9, 0.0),
                          "fb_p95_ratio": np.where(idle, 0.3, 0.6)})
    profiles = workload_profiles(usage, k=4, seed=7)
    assert sorted(profiles.clusters["members"]) == [rows // 5, rows - rows // 5]
    named = dict(zip(profiles.assignments["pod"], profiles.assignments["workload_profile"], strict=True))
    assert {named[f"p{i:05d}"] for i in range(0, rows, 5)} == {"idle notebook"}
    assert {named[f"p{i:05d}"] for i in range(1, rows, 5)} == {"compute-bound training"}
    assert not [w for w in recwarn.list if "cluster" in str(w.message)]


def test_the_workload_class_is_read_from_the_owner_and_a_jobs_activity():
    cases = [  # owner kind, labels (JSON text), mean activity -> class
        ("notebook", None, 0.9, "notebook"),
        ("Deployment", None, None, "serving"),
        ("StatefulSet", "{}", 0.1, "serving"),
        ("ReplicaSet", None, 0.0, "serving"),
        (None, '{"app": "llm-inference"}', None, "serving"),
        ("Job", '{"gpuledger.io/workload-class": "serving"}', 0.9, "serving"),
        ("Job", None, 0.6, "training"),
        ("CronJob", None, 0.59, "batch"),
        ("Job", None, None, "batch"),
        (None, None, 0.9, None),
        ("Pod", '{"team": "a"}', 0.9, None),
    ]
    frame = pl.DataFrame({"workload_kind": [c[0] for c in cases], "labels": [c[1] for c in cases],
                          "act_mean": [c[2] for c in cases]}, schema={"workload_kind": pl.String,
                                                                      "labels": pl.String, "act_mean": pl.Float64})
    assert frame.select(workload_class())["workload_class"].to_list() == [c[3] for c in cases]
    no_activity = frame.select(workload_class(act_mean=None))["workload_class"].to_list()
    assert no_activity[6] == "batch" and no_activity[1] == "serving"


def _bills_apart_in_their_last_bits(fleet: Path) -> tuple[Bill, Bill]:
    """One allocation that held 262, 121 and 508 minutes on three days (891 min = 14.85 h, a
    boundary of one decimal), 90 % idle, billed twice: on the second bill the first day's hours
    are one float step larger, as another summation order gives (their raw sums read 14.8 and
    14.9)."""
    import math
    from dataclasses import replace

    from gpuledger.analytics.billing.bill import compute_bill

    first = [m / 60 for m in (262, 121, 508)]
    second = [math.nextafter(first[0], math.inf), *first[1:]]
    assert f"{sum(first):.1f}" == "14.8" and f"{sum(second):.1f}" == "14.9"  # the noise crosses the boundary
    with Warehouse.open(fleet, read_only=True) as wh:
        bill = compute_bill(wh, window(4), Settings(), ("team",))
    one = bill.detail.filter((pl.col("kind") == "allocated") & (pl.col("pod") == "nb-0")).head(1)

    def days(hours: list[float]) -> pl.DataFrame:
        return pl.concat([one.with_columns(
            pl.lit(h).alias("held_hours"), pl.lit(h).alias("card_hours"), pl.lit(0.9 * h).alias("idle_card_hours"),
            pl.lit(0.9 * h).alias("held_idle_card_hours"), pl.lit(3.0 * h).alias("cost"),
            pl.lit(2.7 * h).alias("idle_cost")) for h in hours])

    return replace(bill, detail=days(first)), replace(bill, detail=days(second))


def test_a_reason_reads_the_same_when_the_bill_differs_in_its_last_bits(fleet):
    """Issue 32: a workload's reason flipped between runs ("idle 67% of 29.0 held hours", then
    "... 29.1 ..."): the bill's figures are summed in no set order (its detail comes "in no set
    order", DuckDB aggregates in parallel) and differ between runs in their last bits, which a
    one-decimal figure rounds apart at a boundary. The allocation `idle_allocations_all` sums is
    the same double for both bills (`_bills_apart_in_their_last_bits`), and so is its reason."""
    from gpuledger.analytics.workloads.recommend import _reclaim, _Terms
    from gpuledger.analytics.workloads.requested import idle_allocations_all

    runs = [idle_allocations_all(bill) for bill in _bills_apart_in_their_last_bits(fleet)]
    assert runs[0].equals(runs[1])
    (row,) = runs[1].to_dicts()
    assert row["held_hours"] == 891 / 60 and row["card_hours"] == 891 / 60 and row["idle_fraction"] == 0.9
    terms = _Terms(month=1.0, mig_factor=1.0, basis="compute", headroom=0.2, reclaim_idle_fraction=0.5)
    change = _reclaim(row | {"workload_class": "notebook"}, terms)
    assert change is not None and change["reason"] == f"idle 90% of {891 / 60:.1f} held hours"


def test_the_idle_list_reads_the_same_when_the_bill_differs_in_its_last_bits(fleet):
    """The demo's idle list (and `gpuledger idle`) read 116.2 idle GPU-h on one run and 116.3 on
    the next: polars sums a group's rows in no set order, and `held_allocations` kept the raw
    sums. Its figures are the same doubles for both bills, so every printed figure is too."""
    from gpuledger.analytics.workloads.idle import idle_allocations

    runs = [idle_allocations(bill) for bill in _bills_apart_in_their_last_bits(fleet)]
    assert runs[0].equals(runs[1])
    (row,) = runs[1].to_dicts()
    assert row["card_hours"] == 891 / 60 and row["idle_fraction"] == pytest.approx(0.9, abs=1e-12)


def test_half_idle_is_half_idle_on_a_seventh_of_a_card(fleet):
    """The reclaim threshold (idle >= 50 %) at its boundary: a 1g instance (1/7 of the card) held
    60 minutes, idle 30 of them, its minutes summed one by one. Its idle fraction is exactly 0.5
    (a ratio of the sums as summed, then steady), so it is reclaimed on every run; as a ratio of
    the sums rounded first it read 0.49999999x and was not (issue 32, docs/decisions/0231)."""
    from dataclasses import replace

    from gpuledger.analytics.billing.bill import compute_bill
    from gpuledger.analytics.workloads.recommend import _reclaim, _Terms
    from gpuledger.analytics.workloads.requested import idle_allocations_all

    with Warehouse.open(fleet, read_only=True) as wh:
        bill = compute_bill(wh, window(4), Settings(), ("team",))
    one = bill.detail.filter((pl.col("kind") == "allocated") & (pl.col("pod") == "nb-0")).head(1)
    minute, share = 1 / 60, 1 / 7
    detail = pl.concat([one.with_columns(
        pl.lit(minute).alias("held_hours"), pl.lit(minute * share).alias("card_hours"),
        pl.lit(minute * share if i % 2 else 0.0).alias("idle_card_hours"),
        pl.lit(minute * share if i % 2 else 0.0).alias("held_idle_card_hours"),
        pl.lit(3.0 * minute * share).alias("cost"), pl.lit(3.0 * minute * share if i % 2 else 0.0).alias("idle_cost"))
        for i in range(60)])
    (row,) = idle_allocations_all(replace(bill, detail=detail)).to_dicts()
    assert row["idle_fraction"] == 0.5 and row["held_hours"] == 1.0 and row["share"] == round(1 / 7, 9)
    terms = _Terms(month=1.0, mig_factor=1.0, basis="compute", headroom=0.2, reclaim_idle_fraction=0.5)
    change = _reclaim(row | {"workload_class": "notebook"}, terms)
    assert change is not None and change["reason"] == "idle 50% of 1.0 held hours"
