"""The data behind the pages, computed once per snapshot and cached.

A page view must answer in well under 300 ms on a 1,000-GPU month, while that month's bill,
recommendations and token costs take seconds to tens of seconds to compute. So:

1. Everything a page shows is derived from one snapshot (see `dashboards.store`) once, kept in
   a cache keyed by the snapshot generation, and sliced per request with Polars (milliseconds).
2. Pages are served from the *serving* snapshot. A new snapshot is first warmed in the
   background (the latest month's bills, heatmap, queues, idle, token costs, recommendations)
   and only then becomes the serving one, so pages never wait for a recomputation and every
   number on a page comes from the same snapshot.

Every query takes request values as parameters (`?`), never pasted into SQL.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import polars as pl

from gpuledger.core.config import Settings, utcnow
from gpuledger.core.window import Window
from gpuledger.dashboards.state import previous_period
from gpuledger.dashboards.store import Snapshot, SnapshotStore
from gpuledger.warehouse import Warehouse

T = TypeVar("T")
SPECIAL_TEAMS = ("unallocated", "unattributed", "sharing_discount")
MAX_ENTRIES = 256
"""Cached results kept per snapshot, least recently used dropped first."""


class ReadModel:
    """Cached, per-snapshot views of the warehouse for the pages."""

    def __init__(self, store: SnapshotStore, settings: Settings) -> None:
        self.store = store
        self.settings = settings
        self._cache: OrderedDict[tuple[int, Hashable], Any] = OrderedDict()
        self._gate = threading.RLock()
        self._closing = threading.Event()
        self._warmers: list[threading.Thread] = []
        self._guard = threading.Lock()
        self._overlay: _Overlay | None = None
        self._serving: Snapshot | None = None
        self.warm_timings: dict[str, float] = {}
        """Seconds per step of the last completed warm-up (for the benchmark and /healthz)."""

    # 1. The cache ----------------------------------------------------------------------------
    def serving(self) -> Snapshot:
        """The snapshot pages are served from (the first one is taken on demand)."""
        with self._guard:
            snap = self._serving
        if snap is None:
            snap = self.store.current()
            self._promote(snap)
        return snap

    @property
    def serving_snapshot(self) -> Snapshot | None:
        """The snapshot pages are served from, if any yet (never takes one)."""
        return self._serving

    def _promote(self, snap: Snapshot) -> None:
        """Serve `snap` from now on; keep it open while it serves, let the old one go."""
        snap.acquire()
        with self._guard:
            old, self._serving = self._serving, snap
            for full in [k for k in self._cache if k[0] < snap.generation]:
                del self._cache[full]
        if old is not None:
            old.release()

    def _cached(self, key: Hashable, compute: Callable[[Snapshot], T], snap: Snapshot | None = None) -> T:
        """Compute `key` once per snapshot (the serving one unless `snap` is given).

        Computations run one at a time (`_gate`, re-entrant: a computation may need another
        cached value): on two cores parallel bills only thrash, and DuckDB already uses every
        core for one query. A cache hit never waits.
        """
        snap = snap or self.serving()
        full = (snap.generation, key)
        with self._guard:
            if full in self._cache:
                self._cache.move_to_end(full)
                return self._cache[full]
        with self._gate:
            with self._guard:
                if full in self._cache:
                    return self._cache[full]
            value = compute(snap)
            with self._guard:
                self._cache[full] = value
                while len(self._cache) > MAX_ENTRIES:  # URL values are user input: bound the cache
                    self._cache.popitem(last=False)
        return value

    def memo(self, key: Hashable, compute: Callable[[], T]) -> T:
        """Cache a page's derived frames per snapshot (`key` must name everything they depend
        on; access checks happen before, never inside)."""
        return self._cached(("memo", key), lambda _snap: compute())

    def clear(self) -> None:
        """Forget everything computed (the benchmark's no-cache baseline)."""
        with self._guard:
            self._cache.clear()
            self._overlay = None

    def warm(self, snapshot: Snapshot) -> None:
        """`SnapshotStore.on_new_snapshot` listener: pre-compute the latest month on the new
        snapshot in the background, then serve it (step 2 of the module docstring)."""

        if self._closing.is_set():
            return

        def run() -> None:
            snapshot.acquire()
            try:
                if self._closing.is_set():
                    return
                period = self.default_period(snapshot)
                steps: dict[str, Callable[[], object]] = {
                    "bill": lambda: self.bill(period, snap=snapshot),
                    "bill_previous_month": lambda: self.bill(previous_period(period), snap=snapshot),
                    "bill_by_team_model": lambda: self.bill(period, ("team", "model"), snap=snapshot),
                    "heatmap": lambda: self.fleet_heat(period, snap=snapshot),
                    "queues": lambda: self.queue_series(period, snap=snapshot),
                    "idle": lambda: self.idle_allocations(period, snap=snapshot),
                    "token_costs": lambda: self.token_costs(period, snap=snapshot),
                    "recommendations": lambda: self.recommendations(period, snap=snapshot),
                }
                timings: dict[str, float] = {}
                for name, step in steps.items():
                    if self._closing.is_set() or self.store.snapshot is not snapshot:
                        return  # closing, or a newer snapshot will warm itself
                    started = time.perf_counter()
                    step()
                    timings[name] = round(time.perf_counter() - started, 2)
                self.warm_timings = timings
            except Exception:  # best effort: a page computes what is missing on demand
                pass
            finally:
                if not self._closing.is_set() and self.store.snapshot is snapshot:
                    self._promote(snapshot)
                snapshot.release()

        thread = threading.Thread(target=run, name="gpuledger-dash-warm", daemon=True)
        with self._guard:
            self._warmers = [t for t in self._warmers if t.is_alive()] + [thread]
        thread.start()

    def wait_warm(self, timeout_s: float = 600.0) -> None:
        """Wait until the warm-ups started so far are done (benchmark, tests)."""
        for thread in list(self._warmers):
            thread.join(timeout_s)

    def close(self, timeout_s: float = 120.0) -> None:
        """Stop warming, wait for a computation in progress (DuckDB must not be running a
        query when the interpreter exits) and let the serving snapshot go."""
        self._closing.set()
        for thread in list(self._warmers):
            thread.join(timeout_s)
        with self._guard:
            old, self._serving = self._serving, None
        if old is not None:
            old.release()

    def query(self, sql: str, params: list[Any] | None = None) -> pl.DataFrame:
        """Run one parameterized query on the serving snapshot (uncached)."""
        with self.store.reader(self.serving()) as wh:
            return wh.query(sql, params or [])

    def _query(self, snap: Snapshot, sql: str, params: list[Any] | None = None) -> pl.DataFrame:
        with self.store.reader(snap) as wh:
            return wh.query(sql, params or [])

    # 2. Periods, teams, models ---------------------------------------------------------------
    def data_range(self, snap: Snapshot | None = None) -> tuple[datetime, datetime] | None:
        def compute(snap: Snapshot) -> tuple[datetime, datetime] | None:
            frame = self._query(
                snap,
                "SELECT min(lo) AS lo, max(hi) AS hi FROM ("
                " SELECT min(ts) AS lo, max(ts) AS hi FROM gpu_samples"
                " UNION ALL SELECT min(ts), max(ts) FROM card_hours_hourly"
                " UNION ALL SELECT min(ts), max(ts) FROM allocations)",  # end_ts is exclusive
            )
            lo, hi = frame["lo"][0], frame["hi"][0]
            return (lo, hi) if lo is not None and hi is not None else None

        return self._cached("data_range", compute, snap)

    def periods(self, snap: Snapshot | None = None) -> list[str]:
        """Months with data, newest first (the current month when the warehouse is empty)."""
        span = self.data_range(snap)
        if span is None:
            now = utcnow()
            return [f"{now.year:04d}-{now.month:02d}"]
        lo, hi = span
        out = []
        year, month = hi.year, hi.month
        while (year, month) >= (lo.year, lo.month):
            out.append(f"{year:04d}-{month:02d}")
            year, month = (year - 1, 12) if month == 1 else (year, month - 1)
        return out

    def default_period(self, snap: Snapshot | None = None) -> str:
        return self.periods(snap)[0]

    # 3. Bills (analytics) --------------------------------------------------------------------
    def bill(self, period: str, by: tuple[str, ...] = ("team",), *, snap: Snapshot | None = None) -> Any:
        """`analytics.bill.compute_bill` for the month, on the snapshot."""

        def compute(snap: Snapshot) -> Any:
            from gpuledger.analytics.bill import compute_bill

            with self.store.reader(snap) as wh:
                return compute_bill(wh, Window.month(period), self.settings, by=by)

        return self._cached(("bill", period, by), compute, snap)

    def teams(self, period: str) -> list[str]:
        """Teams with a bill line this month plus teams with a budget, sorted."""
        lines = self.bill(period).lines
        names = {t for t in lines["team"].to_list() if t and t not in SPECIAL_TEAMS}
        names |= set(self.settings.teams.budgets)
        return sorted(names)

    def models(self, period: str) -> list[str]:
        detail = self.bill(period).detail
        return sorted(m for m in detail["model"].unique().to_list() if m)

    def idle_allocations(self, period: str, *, snap: Snapshot | None = None) -> pl.DataFrame:
        """`analytics.idle.idle_allocations` of the month's bill (what `gpuledger idle` ranks)."""

        def compute(s: Snapshot) -> pl.DataFrame:
            from gpuledger.analytics.idle import idle_allocations

            return idle_allocations(self.bill(period, snap=s))

        return self._cached(("idle", period), compute, snap)

    def recommendations(self, period: str, *, snap: Snapshot | None = None) -> pl.DataFrame:
        """`analytics.recommend.recommend(...).recommendations` for the month."""

        def compute(s: Snapshot) -> pl.DataFrame:
            from gpuledger.analytics.recommend import recommend

            bill = self.bill(period, snap=s)
            with self.store.reader(s) as wh:
                return recommend(wh, Window.month(period), self.settings, bill=bill).recommendations

        return self._cached(("recommend", period), compute, snap)

    def token_costs(
        self, period: str, generation_weight: float = 3.0, *, snap: Snapshot | None = None
    ) -> pl.DataFrame:
        """Token cost per team and model service: vLLM token increases (`analytics.tokens`)
        against the serving pods' GPU cost in the bill, split between prompt and generated
        tokens by the same work rule as `analytics.tokens.token_costs` (a generated token
        weighs `generation_weight` prompt tokens)."""

        def compute(s: Snapshot) -> pl.DataFrame:
            from gpuledger.analytics.tokens import token_increases

            with self.store.reader(s) as wh:
                tokens = token_increases(wh, Window.month(period))
            detail = self.bill(period, snap=s).detail
            held = detail.filter(pl.col("kind") == "allocated")
            pod_cost = held.group_by("day", "namespace", "pod").agg(pl.col("cost").sum().alias("pod_cost"))
            teams = held.select("namespace", "team").unique("namespace", keep="first")
            share = pl.col("prompt_tokens") + pl.col("generation_tokens")
            per_series = (
                tokens.join(pod_cost, on=["day", "namespace", "pod"], how="left")
                .join(teams, on="namespace", how="left")
                .with_columns(
                    (pl.col("pod_cost").fill_null(0.0) * share / share.sum().over("day", "namespace", "pod"))
                    .fill_nan(0.0).alias("gpu_cost")
                )
                .filter(pl.col("team").is_not_null())
            )
            work = pl.col("prompt_tokens") + generation_weight * pl.col("generation_tokens")
            return (
                per_series.group_by("team", "model_name")
                .agg(pl.col("pod").n_unique().alias("pods"), pl.col("prompt_tokens").sum(),
                     pl.col("generation_tokens").sum(), pl.col("gpu_cost").sum())
                .with_columns(
                    (pl.col("gpu_cost") / work * 1e6).alias("cost_per_m_prompt"),
                    (pl.col("gpu_cost") * generation_weight / work * 1e6).alias("cost_per_m_generated"),
                    (pl.col("gpu_cost") / share * 1e6).alias("cost_per_m_tokens"),
                )
                .sort("team", "model_name")
            )

        return self._cached(("tokens", period, generation_weight), compute, snap)

    # 4. Fleet --------------------------------------------------------------------------------
    def fleet_heat(self, period: str, *, snap: Snapshot | None = None) -> pl.DataFrame:
        """Card activity per node and hour: the mean over the node's cards of each card's
        share-weighted GR_ENGINE_ACTIVE (an unheld card or slice counts as 0).

        Hours the roll-up covers come from `card_hours_hourly` (Σ card-hours × active ratio /
        cards); the rest (normally the day being collected) from raw samples, weighting a MIG
        instance by its compute slices / 7. A month of raw samples is ~80 M rows for 1,000
        cards; its roll-up is ~60 times smaller.
        """
        window = Window.month(period)

        def compute(snap: Snapshot) -> pl.DataFrame:
            from gpuledger.analytics.usage import rollup_span

            with self.store.reader(snap) as wh:
                span = rollup_span(wh, window)
                if span is None:
                    ranges = [("raw", window.start, window.end)]
                else:
                    ranges = [("raw", window.start, span.start), ("rollup", span.start, span.end),
                              ("raw", span.end, window.end)]
                parts = [
                    wh.query(_ROLLUP_HEAT_SQL if kind == "rollup" else _RAW_HEAT_SQL, [lo, hi])
                    for kind, lo, hi in ranges if lo < hi
                ]
                nodes = wh.query("SELECT node, model, pool FROM nodes")
            heat = pl.concat(parts, how="vertical_relaxed") if parts else pl.DataFrame(
                schema={"node": pl.String, "hour": pl.Datetime("us", "UTC"), "activity": pl.Float64})
            return heat.join(nodes, on="node", how="left").sort("node", "hour")

        return self._cached(("fleet_heat", period), compute, snap)

    def gpu_heat(self, period: str, node: str) -> pl.DataFrame:
        """Card activity per GPU and hour on one node (the heatmap's drill-down), from raw
        samples weighted like `fleet_heat`'s raw part."""
        window = Window.month(period)

        def compute(snap: Snapshot) -> pl.DataFrame:
            with self.store.reader(snap) as wh:
                heat = wh.query(_GPU_HEAT_SQL, [node, window.start, window.end])
                cards = wh.query("SELECT uuid, gpu_index FROM gpus WHERE node = ?", [node])
            return heat.join(cards, on="uuid", how="left").with_columns(
                pl.col("gpu_index").fill_null(-1)).sort("gpu_index", "hour")

        return self._cached(("gpu_heat", period, node), compute)

    def nodes(self) -> pl.DataFrame:
        return self._cached(
            "nodes",
            lambda snap: self._query(
                snap,
                "SELECT node, pool, model, gpu_count, sharing_mode, mig_config, mig_config_state"
                " FROM nodes ORDER BY node",
            ),
        )

    def gpus(self) -> pl.DataFrame:
        return self._cached(
            "gpus",
            lambda snap: self._query(
                snap,
                "SELECT uuid, node, gpu_index, model, pool, sharing_mode FROM gpus ORDER BY node, gpu_index",
            ),
        )

    def mig_instances(self, at: datetime) -> pl.DataFrame:
        """MIG instances alive at `at`, with the pod and team holding each (if any): the holder
        is the pod on the instance's last sample in the 15 minutes up to `at`."""
        at = at.astimezone(UTC)

        def compute(snap: Snapshot) -> pl.DataFrame:
            return self._query(
                snap,
                "WITH inst AS (SELECT uuid, gpu_i_id, profile FROM mig_instances"
                "   WHERE start_ts <= ? AND end_ts > ?),"
                " holder AS (SELECT uuid, gpu_i_id, arg_max(namespace, ts) AS namespace,"
                "   arg_max(pod, ts) AS pod FROM gpu_samples"
                "   WHERE ts > ? - INTERVAL 15 MINUTE AND ts <= ? AND gpu_i_id >= 0 GROUP BY ALL)"
                " SELECT g.node, g.gpu_index, g.model, i.uuid, i.gpu_i_id, i.profile,"
                "   h.namespace, h.pod, n.team"
                " FROM inst i JOIN gpus g USING (uuid)"
                " LEFT JOIN holder h ON h.uuid = i.uuid AND h.gpu_i_id = i.gpu_i_id"
                " LEFT JOIN namespaces n ON n.namespace = h.namespace"
                " ORDER BY g.node, g.gpu_index, i.gpu_i_id",
                [at, at, at, at],
            )

        return self._cached(("mig_instances", at.isoformat()), compute)

    def unlabeled_namespaces(self) -> pl.DataFrame:
        """Namespaces without the team label (their usage lands on `unattributed`)."""
        return self._cached(
            "unlabeled",
            lambda snap: self._query(
                snap, "SELECT namespace, observed_at FROM namespaces WHERE team IS NULL ORDER BY namespace"
            ),
        )

    def team_namespaces(self) -> dict[str, list[str]]:
        def compute(snap: Snapshot) -> dict[str, list[str]]:
            frame = self._query(
                snap, "SELECT team, namespace FROM namespaces WHERE team IS NOT NULL ORDER BY 1, 2"
            )
            out: dict[str, list[str]] = {}
            for team, namespace in frame.iter_rows():
                out.setdefault(team, []).append(namespace)
            return out

        return self._cached("team_namespaces", compute)

    # 5. Queues -------------------------------------------------------------------------------
    def queue_series(self, period: str, *, snap: Snapshot | None = None) -> pl.DataFrame:
        """Kueue samples per ClusterQueue and hour, in GPU-equivalents.

        Quota and usage are summed over flavors and resources, a MIG resource counted at its
        compute share (`nvidia.com/mig-3g.40gb` = 3/7 GPU) like the bill does; pending workloads
        and admission wait are per ClusterQueue (repeated on each flavor row), so take the max.
        """
        window = Window.month(period)

        def compute(snap: Snapshot) -> pl.DataFrame:
            return self._query(
                snap,
                "WITH weighted AS (SELECT *, CASE WHEN resource LIKE 'nvidia.com/mig-%'"
                "   THEN coalesce(try_cast(regexp_extract(resource, 'mig-(\\d+)g', 1) AS DOUBLE), 7) / 7.0"
                "   ELSE 1.0 END AS w FROM queue_samples"
                "   WHERE ts >= ? AND ts < ?"
                "   AND (resource = 'nvidia.com/gpu' OR resource LIKE 'nvidia.com/mig-%')),"
                " per_ts AS (SELECT ts, cluster_queue, sum(nominal_quota * w) AS nominal_quota,"
                "   sum(usage * w) AS usage, max(pending_workloads) AS pending_workloads,"
                "   max(admission_wait_s) AS admission_wait_s"
                "   FROM weighted GROUP BY ts, cluster_queue)"
                " SELECT cluster_queue, date_trunc('hour', ts) AS hour,"
                "   avg(nominal_quota) AS nominal_quota, avg(usage) AS usage,"
                "   max(usage) AS usage_max, avg(pending_workloads) AS pending_workloads,"
                "   avg(admission_wait_s) AS admission_wait_s,"
                "   avg(greatest(usage - nominal_quota, 0)) AS borrowed"
                " FROM per_ts GROUP BY ALL ORDER BY cluster_queue, hour",
                [window.start, window.end],
            )

        return self._cached(("queue_series", period), compute, snap)

    def queue_teams(self) -> dict[str, set[str]]:
        """ClusterQueue → teams whose namespaces submit to it (through their LocalQueues)."""

        def compute(snap: Snapshot) -> dict[str, set[str]]:
            frame = self._query(
                snap,
                "SELECT q.name, q.namespace, q.spec, n.team FROM queues q"
                " LEFT JOIN namespaces n ON n.namespace = q.namespace"
                " WHERE q.kind = 'LocalQueue'",
            )
            out: dict[str, set[str]] = {}
            for row in frame.iter_rows(named=True):
                spec = _json(row["spec"])
                cq = spec.get("clusterQueue") or spec.get("spec", {}).get("clusterQueue") or row["name"]
                if row["team"]:
                    out.setdefault(cq, set()).add(row["team"])
            return out

        return self._cached("queue_teams", compute)

    def cluster_queues(self) -> pl.DataFrame:
        return self._cached(
            "cluster_queues",
            lambda snap: self._query(
                snap, "SELECT name, cohort, spec FROM queues WHERE kind = 'ClusterQueue' ORDER BY name"
            ),
        )

    # 6. Plans and audit: small, changed by the page's own buttons ---------------------------
    def capture_plans(self, wh: Warehouse) -> None:
        """`SnapshotStore.on_write` listener: read plans and recent audit records through our
        own write connection, so the Plans page shows an action before the next snapshot."""
        from gpuledger.optimizer.plan import list_plans

        overlay = _Overlay(utcnow(), list_plans(wh), _audit(wh, None, OVERLAY_AUDIT))
        with self._guard:
            self._overlay = overlay

    def plans_data(self, plan_id: str | None, audit_limit: int = 30) -> PlansData:
        """Stored plans, the selected one's audit trail and the latest audit records: from the
        snapshot, or from what our last write read back when that is newer than the snapshot."""
        from gpuledger.optimizer.plan import list_plans

        snap = self.serving()
        with self._guard:
            overlay = self._overlay
        if overlay is not None and overlay.at > snap.taken_at:
            records, recent = overlay.records, overlay.audit
        else:
            records, recent = self._cached(
                "plans", lambda s: _read_plans(self.store, s, list_plans)
            )
        ids = [r.plan.id for r in records]
        selected = plan_id if plan_id in ids else (ids[0] if ids else None)
        plan_audit = recent.filter(pl.col("plan_id") == selected).head(50) if selected else recent.head(0)
        return PlansData(records, selected, plan_audit, recent.head(audit_limit))


_ROLLUP_HEAT_SQL = """
WITH cards AS (SELECT node, count(*) AS cards FROM gpus GROUP BY node),
hours AS (SELECT unnest(generate_series(CAST(? AS TIMESTAMPTZ), CAST(? AS TIMESTAMPTZ) - INTERVAL 1 HOUR,
                                        INTERVAL 1 HOUR)) AS hour),
used AS (SELECT node, ts AS hour, sum(card_hours * coalesce(active_ratio, 0)) AS active
         FROM card_hours_hourly WHERE ts >= (SELECT min(hour) FROM hours)
         AND ts <= (SELECT max(hour) FROM hours) GROUP BY node, ts)
SELECT k.node, h.hour, coalesce(u.active, 0) / k.cards AS activity
FROM cards k CROSS JOIN hours h LEFT JOIN used u ON u.node = k.node AND u.hour = h.hour
"""
_RAW_HEAT_SQL = """
WITH per_card AS (
    SELECT node, uuid, ts,
        CASE WHEN max(gpu_i_id) >= 0
             THEN sum(coalesce(gr_engine_active, 0)
                      * coalesce(try_cast(regexp_extract(mig_profile, '^(\\d+)g', 1) AS DOUBLE), 0) / 7)
             ELSE avg(coalesce(gr_engine_active, gpu_util / 100.0)) END AS act
    FROM gpu_samples WHERE ts >= ? AND ts < ? GROUP BY node, uuid, ts)
SELECT node, date_trunc('hour', ts) AS hour, avg(act) AS activity FROM per_card GROUP BY ALL
"""
_GPU_HEAT_SQL = """
WITH per_card AS (
    SELECT uuid, ts,
        CASE WHEN max(gpu_i_id) >= 0
             THEN sum(coalesce(gr_engine_active, 0)
                      * coalesce(try_cast(regexp_extract(mig_profile, '^(\\d+)g', 1) AS DOUBLE), 0) / 7)
             ELSE avg(coalesce(gr_engine_active, gpu_util / 100.0)) END AS act
    FROM gpu_samples WHERE node = ? AND ts >= ? AND ts < ? GROUP BY uuid, ts)
SELECT uuid, date_trunc('hour', ts) AS hour, avg(act) AS activity FROM per_card GROUP BY ALL
"""
OVERLAY_AUDIT = 500
"""Audit records read back after a write (the Plans page shows at most 50 of one plan)."""


@dataclass(frozen=True)
class _Overlay:
    at: datetime
    records: list[Any]
    audit: pl.DataFrame


def _read_plans(store: SnapshotStore, snap: Snapshot, list_plans: Callable[[Warehouse], list[Any]]) -> Any:
    with store.reader(snap) as wh:
        return list_plans(wh), _audit(wh, None, OVERLAY_AUDIT)


@dataclass(frozen=True)
class PlansData:
    records: list[Any]
    selected: str | None
    plan_audit: pl.DataFrame
    audit: pl.DataFrame


def _audit(wh: Warehouse, plan_id: str | None, limit: int) -> pl.DataFrame:
    where, params = "", []
    if plan_id is not None:
        where, params = "WHERE plan_id = ?", [plan_id]
    return wh.query(
        "SELECT seq, occurred_at, actor, plan_id, action, object, result, detail"
        f" FROM audit_log {where} ORDER BY seq DESC LIMIT ?",
        [*params, limit],
    )


def _json(text: Any) -> dict[str, Any]:
    if isinstance(text, dict):
        return text
    try:
        value = json.loads(text) if text else {}
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}
