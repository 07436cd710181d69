"""Workload profiles: k-means over usage features, each cluster named and explained.

Features per workload (`analytics.workloads.requested`): mean activity, p95 activity, activity spread,
the share of held time spent idle, and p95 framebuffer use as a fraction of the device. They
are standardized, then clustered with k-means (scipy's, fixed `seed`, rows sorted first, so
the same data always gives the same profiles). A cluster is named after the nearest
archetype in the original units (e.g. "idle notebook": almost no activity, mostly idle,
memory held), and explained by its centroid in words.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from gpuledger.core.steady import STEADY_DECIMALS

FEATURES: tuple[str, ...] = ("act_mean", "act_p95", "act_std", "idle_fraction", "fb_p95_ratio")

ARCHETYPES: dict[str, tuple[float, ...]] = {
    # act_mean, act_p95, act_std, idle_fraction, fb_p95_ratio
    "idle notebook": (0.05, 0.2, 0.05, 0.8, 0.3),
    "memory-bound inference": (0.3, 0.55, 0.15, 0.1, 0.75),
    "light inference": (0.2, 0.4, 0.1, 0.2, 0.3),
    "compute-bound training": (0.8, 0.95, 0.1, 0.02, 0.6),
    "bursty batch": (0.45, 0.85, 0.3, 0.25, 0.4),
    "idle serving": (0.05, 0.2, 0.05, 0.6, 0.85),
    "active notebook": (0.35, 0.8, 0.3, 0.4, 0.4),
    "underused training": (0.3, 0.6, 0.2, 0.3, 0.6),
}
CLASS_OF: dict[str, str] = {
    "idle notebook": "notebook", "active notebook": "notebook",
    "memory-bound inference": "serving", "light inference": "serving", "idle serving": "serving",
    "compute-bound training": "training", "underused training": "training", "bursty batch": "batch",
}
"""Which kind of workload each archetype describes: a workload whose owner says what it is
(a Deployment serves, a Job trains or runs a batch, a notebook is a notebook) is only ever
named after an archetype of its own kind, so a quiet vLLM Deployment is "idle serving", never
"idle notebook"."""
TRAINING_ACTIVITY = 0.6
"""A Job whose mean activity reaches this trains; below it, a batch job."""
RESTARTS = 10
"""k-means' starts (one start can stop in a worse local minimum: 11 % more distortion on one
seed of a 1,000-GPU month)."""
SAMPLE_ROWS = 10_000
"""Rows the starts run on, drawn with the seed (`_centroids`)."""
CONVERGED = 1e-4
"""A refinement stops when the mean distance to the centroids moves less than this (standardized
units): on a 1,000-GPU month within 0.001 % of the distortion at full convergence, as close as
scikit-learn's default tolerance came, at half the iterations of scipy's default (1e-5)."""


@dataclass(frozen=True)
class Profiles:
    assignments: pl.DataFrame
    """The input rows with `profile_id` and `workload_profile` added."""
    clusters: pl.DataFrame
    """One row per profile: id, name, members, centroid features, explanation."""


SERVING_KINDS = ("Deployment", "StatefulSet", "ReplicaSet")
JOB_KINDS = ("Job", "CronJob")


def workload_class(kind: str = "workload_kind", labels: str | None = "labels",
                   act_mean: str | None = "act_mean") -> pl.Expr:
    """serving, training, batch or notebook from the owner (columns `kind` and `labels`, the
    owner as `analytics.workloads.requested.owned_by` names it) and, for a Job, its behaviour
    (column `act_mean`); null when the owner says nothing (a bare pod). A column given as None
    reads as empty (no labels) or 0 (no activity): one expression for a month's 170,000
    allocations, where a Python loop over them took 0.15 s of every refresh."""
    owner = pl.col(kind)
    text = pl.col(labels).fill_null("") if labels is not None else pl.lit("")
    mean = pl.col(act_mean).fill_null(0.0) if act_mean is not None else pl.lit(0.0)
    serving = (owner.is_in(SERVING_KINDS).fill_null(False) | text.str.contains("inference", literal=True)
               | text.str.contains("serving", literal=True))
    return (pl.when(owner == "notebook").then(pl.lit("notebook"))
            .when(serving).then(pl.lit("serving"))
            .when(owner.is_in(JOB_KINDS))
            .then(pl.when(mean >= TRAINING_ACTIVITY).then(pl.lit("training")).otherwise(pl.lit("batch")))
            .otherwise(pl.lit(None, dtype=pl.String)).alias("workload_class"))


def _name(centroid: np.ndarray, kind: str | None = None) -> str:
    """The archetype nearest to `centroid` (among those of class `kind`, when given)."""
    return _nearest(centroid[np.newaxis, :], kind)[0]


def _nearest(points: np.ndarray, kind: str | None = None) -> list[str]:
    """The archetype nearest to each row of `points` (Euclidean, in the features' own units),
    among those of class `kind` when given; the first in `ARCHETYPES` order on a tie. One
    array operation for a class's rows: a month of 1,000 GPUs names 100,000 of them."""
    names = [name for name in ARCHETYPES if kind is None or CLASS_OF[name] == kind]
    protos = np.array([ARCHETYPES[name] for name in names])
    distances = np.sqrt(np.einsum("ijk,ijk->ij", diff := points[:, np.newaxis, :] - protos, diff))
    return [names[i] for i in np.argmin(distances, axis=1)]


def _explain(c: dict[str, float], name: str, members: int) -> str:
    """The profile in words; a centre's share is a mean of shares >= 0, so float noise below zero
    reads 0% (it read "idle -0%")."""
    idle, memory = max(0.0, c["idle_fraction"]), max(0.0, c["fb_p95_ratio"])  # never -0.0
    return (
        f"{name}: {members} workload(s); mean activity {c['act_mean']:.2f} (p95 {c['act_p95']:.2f}, "
        f"spread {c['act_std']:.2f}), idle {idle:.0%} of held time, p95 memory {memory:.0%} of the device"
    )


def workload_profiles(usage: pl.DataFrame, k: int = 4, seed: int = 7) -> Profiles:
    """Cluster `usage` rows into at most `k` named profiles (see module docstring)."""
    rows = usage.sort(["namespace", "pod", "uuid", "gpu_i_id"], nulls_last=True)
    data = rows.select([pl.col(f).cast(pl.Float64).fill_null(0.0).fill_nan(0.0) for f in FEATURES])
    x = data.to_numpy()
    n = x.shape[0]
    if n == 0:
        empty = rows.with_columns(
            pl.lit(None, dtype=pl.Int32).alias("profile_id"),
            pl.lit(None, dtype=pl.String).alias("workload_profile"),
        )
        return Profiles(empty, pl.DataFrame(schema={"profile_id": pl.Int32, "name": pl.String}))
    clusters = max(1, min(k, _distinct_rows(x, k)))
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0  # a feature every row shares: left unscaled, as a standard scaler does
    standardized = (x - mean) / scale
    found, labels = _centroids(standardized, clusters, seed)
    centroids = np.round(found * scale + mean, STEADY_DECIMALS)  # in the features' own units
    # Stable ids: order clusters by their centroid's mean activity.
    order = np.argsort(centroids[:, 0], kind="stable")
    relabel = np.empty(len(order), dtype=np.int32)
    relabel[order] = np.arange(len(order), dtype=np.int32)
    labels = relabel[labels]
    names: list[str] = []
    bases: list[str] = []
    info: list[dict[str, object]] = []
    for new, old in enumerate(order):
        centroid = centroids[old]
        base = _name(centroid)
        name = base if base not in bases else f"{base} #{bases.count(base) + 1}"
        bases.append(base)
        names.append(name)
        members = int((labels == new).sum())
        features = {f: float(v) for f, v in zip(FEATURES, centroid, strict=True)}
        info.append({"profile_id": new, "name": name, "members": members, **features,
                     "explanation": _explain(features, name, members)})
    assignments = rows.with_columns(
        pl.Series("profile_id", labels, dtype=pl.Int32),
        pl.Series("workload_profile", names, dtype=pl.String).gather(labels),
    )
    return Profiles(_by_class(assignments, x), pl.DataFrame(info))


def _centroids(standardized: np.ndarray, clusters: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """k-means centroids of `standardized` rows and each row's nearest one, with scipy:
    `RESTARTS` k-means++ starts run on at most `SAMPLE_ROWS` rows drawn with `seed`; each
    distinct solution they reach is refined on every row and the least distorted kept (a
    sample's own best missed the month's best in two draws of six). Fewer than `clusters` when
    a cluster empties (scipy drops it).

    Why not scikit-learn's `KMeans` (decision 0272): its import alone (1 s, with pandas, and
    100 MB) cost more than this whole clustering of a 1,000-GPU month's 173,000 allocations,
    which reaches the same minimum as it did."""
    import warnings

    from scipy.cluster.vq import kmeans, kmeans2

    rng = np.random.default_rng(seed)
    rows = len(standardized)
    sample = standardized if rows <= SAMPLE_ROWS else \
        standardized[np.sort(rng.choice(rows, SAMPLE_ROWS, replace=False))]
    reached: dict[tuple[float, ...], np.ndarray] = {}
    for _ in range(RESTARTS):
        with warnings.catch_warnings():  # a start's emptied cluster: `kmeans` drops it below
            warnings.filterwarnings("ignore", "One of the clusters is empty")
            start, _labels = kmeans2(sample, clusters, iter=1, minit="++", seed=rng)
        solution, _distortion = kmeans(sample, start)
        reached.setdefault(tuple(np.sort(np.round(solution, 1), axis=None)), solution)
    fits = [_fit(standardized, kmeans(standardized, solution, thresh=CONVERGED)[0])
            for solution in reached.values()]
    _, centroids, labels = min(fits, key=lambda fit: fit[0])
    return centroids, labels


def _fit(rows: np.ndarray, centroids: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """The sum of squared distances to the nearest centroid (what k-means minimizes: scipy's
    `kmeans` reports the mean distance, whose least can be another solution), the centroids and
    each row's nearest one."""
    from scipy.cluster.vq import vq

    labels, distances = vq(rows, centroids)
    return float(np.square(distances).sum()), centroids, labels


def _distinct_rows(x: np.ndarray, at_most: int) -> int:
    """How many distinct rows `x` has (to 6 decimals), counted up to `at_most`: k-means asks for
    no more clusters than that, and a month's 170,000 allocations reach 4 in their first rows
    (the whole set took a quarter of a second)."""
    seen: set[tuple[float, ...]] = set()
    for row in x.round(6):
        seen.add(tuple(row.tolist()))
        if len(seen) >= at_most:
            break
    return len(seen)


def _by_class(rows: pl.DataFrame, x: np.ndarray) -> pl.DataFrame:
    """Where the owner says what a workload is (`workload_kind`, see `workload_class`), its
    profile is the nearest archetype of that class (its cluster's name when that fits)."""
    if "workload_kind" not in rows.columns:
        return rows
    classed = rows.with_columns(workload_class(labels="labels" if "labels" in rows.columns else None))
    cluster_class = pl.col("workload_profile").str.replace(r" #\d+$", "").replace_strict(
        CLASS_OF, default=None, return_dtype=pl.String)
    other = classed.select(pl.col("workload_class").is_not_null()
                           & cluster_class.ne_missing(pl.col("workload_class"))).to_series().to_numpy()
    classes = classed["workload_class"].to_numpy()
    named = classed["workload_profile"].to_numpy().astype(object)
    for cls in {str(c) for c in classes[other]}:
        where = np.flatnonzero(other & (classes == cls))
        named[where] = _nearest(x[where], cls)
    return classed.with_columns(pl.Series("workload_profile", named, dtype=pl.String))
