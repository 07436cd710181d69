"""The data behind the pages: named views of one snapshot, each computed once and cached.

Why a facade: pages ask for "this month's bill", "the fleet heatmap", "the queues of this
team" and must not care where it comes from. Each method here names one view, computes it
with analytics (the bill, idle, recommendations, token costs, shares) or a named warehouse
query (`warehouse.queries.dashboards`), on the serving snapshot, once per snapshot
(`dashboards.serving`); a new snapshot is warmed before it serves (`dashboards.warmup`). This
module computes nothing of its own: it only decides what is cached under which key.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, TypeVar

import polars as pl

from gpuledger.analytics.billing.special_lines import SPECIAL_LINES
from gpuledger.analytics.teams.namespaces import with_teams_at
from gpuledger.analytics.workloads.tokens import GENERATION_WEIGHT
from gpuledger.core.config import Settings, utcnow
from gpuledger.core.period import Period
from gpuledger.core.window import Window
from gpuledger.dashboards import heat, queue_views, serving_results
from gpuledger.dashboards.plans_data import PlanOverlay, PlansData, read_plans, select
from gpuledger.dashboards.serving import SnapshotCache
from gpuledger.dashboards.warmup import Warmer
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.queries import dashboards as q
from gpuledger.warehouse.queries.freshness import data_range
from gpuledger.warehouse.snapshot_store import Snapshot, SnapshotStore

T = TypeVar("T")


class ReadModel:
    """Cached, per-snapshot views of the warehouse for the pages."""

    def __init__(self, store: SnapshotStore, settings: Settings) -> None:
        self.store = store
        self.settings = settings
        self._cache = SnapshotCache(store)
        self._warmer = Warmer(self._cache, self._warm_steps)
        self._overlay = PlanOverlay()
        self._extra_steps: dict[str, Callable[[Snapshot], object]] = {}

    # 1. Snapshots and the cache --------------------------------------------------------------
    def serving(self) -> Snapshot:
        """The snapshot pages are served from (the first one is taken on demand)."""
        return self._cache.serving()

    @property
    def serving_snapshot(self) -> Snapshot | None:
        """The snapshot pages are served from, if any yet (never takes one)."""
        return self._cache.serving_snapshot

    @property
    def warm_timings(self) -> dict[str, float]:
        """Seconds per step of the last completed warm-up (for the benchmark and /healthz)."""
        return self._warmer.timings

    def _cached(self, key: Hashable, compute: Callable[[Snapshot], T], snap: Snapshot | None = None) -> T:
        return self._cache.cached(key, compute, snap)

    def _read(self, key: Hashable, read: Callable[[Warehouse], T], snap: Snapshot | None = None) -> T:
        """Cache `read(wh)` run on a read connection to the snapshot."""

        def compute(s: Snapshot) -> T:
            with self.store.reader(s) as wh:
                return read(wh)

        return self._cached(key, compute, snap)

    def memo(self, key: Hashable, compute: Callable[[], T], snap: Snapshot | None = None) -> T:
        """Cache a page's derived frames per snapshot (`key` must name everything they depend
        on; access checks happen before, never inside). `snap`: a snapshot being warmed (then
        `compute` must read that snapshot too)."""
        return self._cached(("memo", key), lambda _snap: compute(), snap)

    def add_warm_step(self, name: str, step: Callable[[Snapshot], object]) -> None:
        """Also run `step(snapshot)` when warming each new snapshot, after the read model's own
        steps (a caller's derived views: `dashboards.api`'s recommendations answer)."""
        self._extra_steps[name] = step

    def clear(self) -> None:
        """Forget everything computed (the benchmark's no-cache baseline)."""
        self._cache.clear()
        self._overlay.clear()

    def warm(self, snapshot: Snapshot) -> None:
        """`SnapshotStore.on_new_snapshot` listener: warm `snapshot`, then serve it."""
        self._warmer.warm(snapshot)

    def _warm_steps(self, snap: Snapshot) -> dict[str, Callable[[], object]]:
        period = self.default_period(snap)
        previous = str(Period.exact(period).shift(-1))
        return {
            "bill": lambda: self.bill(period, snap=snap),
            "bill_previous_month": lambda: self.bill(previous, snap=snap),
            "bill_by_team_model": lambda: self.bill(period, ("team", "model"), snap=snap),
            "bill_by_team_priority": lambda: self.bill(period, ("team", "priority_class"), snap=snap),
            "heatmap": lambda: self.fleet_heat(period, snap=snap),
            "queues": lambda: self.queue_series(period, snap=snap),
            "idle": lambda: self.idle_allocations(period, snap=snap),
            "idle_workloads": lambda: self.idle_workloads(period, snap=snap),
            "token_costs": lambda: self.token_costs(period, snap=snap),
            "recommendations": lambda: self.recommendations(period, snap=snap),
            **{name: functools.partial(step, snap) for name, step in self._extra_steps.items()},
        }

    def wait_warm(self, timeout_s: float = 600.0) -> None:
        """Wait until the warm-ups started so far are done (benchmark, tests)."""
        self._warmer.wait(timeout_s)

    def close(self, timeout_s: float = 120.0) -> None:
        """Stop warming, wait for a computation in progress and let the serving snapshot go."""
        self._warmer.close(timeout_s)
        self._cache.close()

    # 2. Periods, teams, models ---------------------------------------------------------------
    def data_range(self, snap: Snapshot | None = None) -> tuple[datetime, datetime] | None:
        return self._read("data_range", data_range, snap)

    def periods(self, snap: Snapshot | None = None) -> list[str]:
        """Months with data, newest first (the current month when the warehouse is empty)."""
        span = self.data_range(snap)
        if span is None:
            return [str(Period.of(utcnow()))]
        return [str(month) for month in Period.newest_first(*span)]

    def default_period(self, snap: Snapshot | None = None) -> str:
        return self.periods(snap)[0]

    # 3. Analytics ----------------------------------------------------------------------------
    def bill(self, period: str, by: tuple[str, ...] = ("team",), *, snap: Snapshot | None = None,
             as_computed: bool = False) -> Any:
        """`analytics.billing.bill.compute_bill` for the month, on the snapshot. Only the team bill keeps
        its `detail` (one row per allocation and day, ~70 MiB a 1,000-GPU month): every page,
        download and API answer reads the detail of that one, and only the lines, unallocated
        rows and preemption of the others (team x model, x priority class, the metrics' x
        sharing mode), so each of those is kept with an empty detail (docs/decisions/0141).
        `as_computed` (the API's `?as_computed=true`): the roll-up under its stored rules."""
        key = ("bill", period, by, "as_computed") if as_computed else ("bill", period, by)
        return self._bill(Period.exact(period).window, by, key, as_computed, snap)

    def bill_over(self, window: Window, by: tuple[str, ...] = ("team",), *, snap: Snapshot | None = None,
                  as_computed: bool = False) -> Any:
        """`bill` over any window (the API's `start`/`end` and `window=`)."""
        key = ("bill_over", window.start, window.end, by, as_computed)
        return self._bill(window, by, key, as_computed, snap)

    def _bill(self, window: Window, by: tuple[str, ...], key: Hashable, as_computed: bool,
              snap: Snapshot | None) -> Any:
        from gpuledger.analytics.billing.bill import compute_bill

        def read(wh: Warehouse) -> Any:
            bill = compute_bill(wh, window, self.settings, by=by, as_computed=as_computed)
            return bill if by == ("team",) and not as_computed else replace(bill, detail=bill.detail.clear())

        return self._read(key, read, snap)

    def missing(self, name: str, period: str, *, snap: Snapshot | None = None) -> str | None:
        """`serving_results.NOT_COMPUTED` when this serving store lacks the month result `name`
        (shown instead of an empty result's 0: docs/decisions/0195), else None. A frame result's
        view answers it from its own read (`_stored`), so no second reader is opened for it."""
        snap = snap or self.serving()
        view = {serving_results.RECOMMENDATIONS: self.recommendations,
                serving_results.TOKEN_COSTS: self.token_costs}.get(name)
        if view is not None and not snap.owned:
            view(period, snap=snap)  # cached: its read answered the question (`_stored`)

        def compute(s: Snapshot) -> str | None:
            if s.owned:
                return None
            with self.store.reader(s) as wh:
                stored = serving_results.stored_result(wh, name, period, payload=False)
            return None if stored is not None else serving_results.NOT_COMPUTED

        return self._cached(("missing", name, period), compute, snap)

    def bill_notes(self, period: str, *, snap: Snapshot | None = None) -> list[str]:
        """What the month's bill tells its reader (`analytics.billing.notes`), for the banner of
        every page that shows it."""
        from gpuledger.analytics.billing.notes import bill_notes

        return self._cached(("bill_notes", period), lambda s: bill_notes(self.bill(period, snap=s)), snap)

    def advice(self, period: str, kind: str, *, snap: Snapshot | None = None) -> Any:
        """One `analytics.advice.run` kind for the month (`recommend --kind`): the writer's
        stored result on a serving store, "not computed yet" there without one (never computed
        from its raw tail, docs/decisions/0141); computed on a full copy."""
        from gpuledger.analytics.advice import KINDS

        window = Period.exact(period).window

        def compute(s: Snapshot) -> Any:
            with self.store.reader(s) as wh:
                stored = serving_results.stored_advice(wh, kind, period)
                if stored is not None or not s.owned:
                    return stored if stored is not None else serving_results.not_computed_advice(kind)
                return KINDS.get(kind)(wh, window, self.settings)

        return self._cached(("advice", period, kind), compute, snap)

    def teams(self, period: str) -> list[str]:
        """Teams with a bill line this month plus teams with a budget, sorted."""
        lines = self.bill(period).lines
        names = {t for t in lines["team"].to_list() if t and t not in SPECIAL_LINES}
        return sorted(names | set(self.settings.teams.budgets))

    def models(self, period: str) -> list[str]:
        detail = self.bill(period).detail
        return sorted(m for m in detail["model"].unique().to_list() if m)

    def idle_allocations(self, period: str, *, snap: Snapshot | None = None) -> pl.DataFrame:
        """`analytics.workloads.idle.idle_allocations` of the month's bill (what `gpuledger idle` ranks)."""
        from gpuledger.analytics.workloads.idle import idle_allocations

        return self._cached(("idle", period), lambda s: idle_allocations(self.bill(period, snap=s)), snap)

    def held_allocations(self, period: str, *, snap: Snapshot | None = None) -> pl.DataFrame:
        """`analytics.workloads.idle.held_allocations` of the month's bill (busy allocations included)."""
        from gpuledger.analytics.workloads.idle import held_allocations

        return self._cached(("held", period), lambda s: held_allocations(self.bill(period, snap=s)), snap)

    def workloads(self, by: str = "owner", *, snap: Snapshot | None = None) -> pl.DataFrame:
        """Pod → workload (`analytics.workloads.requested.pod_workloads`)."""
        from gpuledger.analytics.workloads.requested import pod_workloads

        return self._read(("workloads", by), lambda wh: pod_workloads(wh, by), snap)

    def idle_workloads(self, period: str | Window, by: str = "owner", *,
                       snap: Snapshot | None = None) -> pl.DataFrame:
        """`analytics.workloads.idle.idle_workloads` of the month (or of a `bill_over` window):
        idle per Deployment, Job, notebook (`by` a `pod_workloads` grouping), or pod (`by="pod"`).

        Cached per snapshot like its bill, unscoped: `/api/v1/idle` cuts it per request (team,
        namespace, top; rows group within a namespace, so that equals cutting the allocations first).
        Per request it was 0.56-0.93 s at 10x the small demo, the p95 of a mixed API load (issue 31)."""
        from gpuledger.analytics.workloads.idle import held_allocations, idle_workloads

        def compute(s: Snapshot) -> pl.DataFrame:
            workloads = None if by == "pod" else self.workloads(by, snap=s)
            held = (self.held_allocations(period, snap=s) if isinstance(period, str)
                    else held_allocations(self.bill_over(period, snap=s)))
            return idle_workloads(held, workloads)

        return self._cached(("idle_workloads", period, by), compute, snap)

    def recommendations(self, period: str, *, snap: Snapshot | None = None) -> pl.DataFrame:
        """`analytics.workloads.recommend.recommend(...).recommendations` for the month: stored by the
        writer on a serving store (none there yet: no rows), computed on a full copy."""
        from gpuledger.analytics.workloads.recommend import recommend

        def compute(s: Snapshot) -> pl.DataFrame:
            stored = self._stored(s, serving_results.RECOMMENDATIONS, period)
            if stored is not None:
                return stored
            bill = self.bill(period, snap=s)
            with self.store.reader(s) as wh:
                return recommend(wh, Period.exact(period).window, self.settings, bill=bill).recommendations

        return self._cached(("recommend", period), compute, snap)

    def token_costs(
        self, period: str, generation_weight: float = GENERATION_WEIGHT, *, snap: Snapshot | None = None
    ) -> pl.DataFrame:
        """`analytics.workloads.tokens.team_token_costs` for the month, priced by the month's bill: stored
        by the writer on a serving store (none there yet, or another weight: no rows; it keeps an
        hour of token samples only), computed on a full copy."""
        from gpuledger.analytics.workloads.tokens import team_token_costs

        def compute(s: Snapshot) -> pl.DataFrame:
            stored = None
            if generation_weight == GENERATION_WEIGHT:
                stored = self._stored(s, serving_results.TOKEN_COSTS, period)
            elif not s.owned:  # a serving store holds the default weight's result only
                stored = serving_results.not_computed_frame(serving_results.TOKEN_COSTS)
            if stored is not None:
                return stored
            bill = self.bill(period, snap=s)
            with self.store.reader(s) as wh:
                return team_token_costs(wh, Period.exact(period).window, self.settings, bill=bill,
                                        generation_weight=generation_weight)

        return self._cached(("tokens", period, generation_weight), compute, snap)

    def result_note(self, name: str, period: str, *, snap: Snapshot | None = None) -> str | None:
        """Said beside a stored month result (`serving_results.NAMES`) computed under other rules
        than this server's settings (docs/decisions/0150), else None: computed here, or stored
        under the same rules."""
        from gpuledger.core.rules import Rules

        current = Rules.of(self.settings)
        return self._read(("result_note", name, period),
                          lambda wh: serving_results.rules_note(wh, name, period, current), snap)

    def _stored(self, snap: Snapshot, name: str, period: str) -> pl.DataFrame | None:
        """The writer's stored frame; on a serving store without one, the empty frame ("not
        computed yet", docs/decisions/0141); None on a full copy without one (compute it)."""
        with self.store.reader(snap) as wh:
            stored = serving_results.stored_frame(wh, name, period)
        absent = None if stored is not None or snap.owned else serving_results.NOT_COMPUTED
        self._cached(("missing", name, period), lambda _s: absent, snap)  # `missing` reads no more
        if stored is None and not snap.owned:
            return serving_results.not_computed_frame(name)
        return stored

    # 4. Fleet --------------------------------------------------------------------------------
    def active_card_hours(self, period: str, *, snap: Snapshot | None = None) -> pl.DataFrame:
        """Per card and hour, card-hours × active ratio (`dashboards.heat`, step 1)."""
        return self._heat_hours(period, snap).frame

    def heat_notes(self, period: str, *, snap: Snapshot | None = None) -> tuple[str, ...]:
        """What the heatmap's hours rest on when not the roll-up under the server's rules
        (`dashboards.heat.HeatHours.notes`)."""
        return self._heat_hours(period, snap).notes

    def _heat_hours(self, period: str, snap: Snapshot | None) -> heat.HeatHours:
        window, settings = Period.exact(period).window, self.settings
        return self._read(("active", period), lambda wh: heat.active_card_hours(wh, window, settings), snap)

    def _hours(self, period: str, snap: Snapshot | None) -> pl.Series:
        span = self.data_range(snap)
        return heat.hour_grid(Period.exact(period).window, span[1] if span else None)

    def fleet_heat(self, period: str, *, snap: Snapshot | None = None) -> pl.DataFrame:
        """Card activity per node and hour (`dashboards.heat.node_heat`)."""

        def compute(s: Snapshot) -> pl.DataFrame:
            return heat.node_heat(self.active_card_hours(period, snap=s), self.gpus(s), self.nodes(s),
                                  self._hours(period, s))

        return self._cached(("fleet_heat", period), compute, snap)

    def gpu_heat(self, period: str, node: str) -> pl.DataFrame:
        """Card activity per GPU and hour on one node (the heatmap's drill-down)."""

        def compute(s: Snapshot) -> pl.DataFrame:
            return heat.gpu_heat(self.active_card_hours(period, snap=s), self.gpus(s), node,
                                 self._hours(period, s))

        return self._cached(("gpu_heat", period, node), compute)

    def nodes(self, snap: Snapshot | None = None) -> pl.DataFrame:
        return self._read("nodes", q.node_table, snap)

    def gpus(self, snap: Snapshot | None = None) -> pl.DataFrame:
        return self._read("gpus", q.gpu_table, snap)

    def mig_instances(self, at: datetime) -> pl.DataFrame:
        """MIG instances alive at `at`, with the pod holding each (if any) and its team then."""
        at = at.astimezone(UTC)
        return self._read(("mig_instances", at.isoformat()),
                          lambda wh: with_teams_at(wh, self.settings, q.mig_instances_at(wh, at), at))

    def unlabeled_namespaces(self) -> pl.DataFrame:
        """Namespaces without the team label (their usage lands on `unattributed`)."""
        return self._read("unlabeled", q.unlabeled_namespaces)

    # 5. Queues -------------------------------------------------------------------------------
    def queue_series(self, period: str, *, snap: Snapshot | None = None) -> pl.DataFrame:
        """Kueue samples per ClusterQueue and hour in GPU-equivalents (`dashboards.queue_views`)."""
        window, basis = Period.exact(period).window, self.settings.sharing.mig_share_basis

        def read(wh: Warehouse) -> pl.DataFrame:
            return queue_views.queue_series(wh, window, basis)

        return self._read(("queue_series", period), read, snap)

    def queue_teams(self) -> dict[str, frozenset[str]]:
        """ClusterQueue (and Volcano Queue) → teams submitting to it
        (`analytics.teams.volcano.any_queue_team_sets`)."""
        from gpuledger.analytics.teams.volcano import any_queue_team_sets

        return self._read("queue_teams", any_queue_team_sets)

    def volcano_queues(self) -> pl.DataFrame:
        """Volcano Queues with their quotas in GPUs and teams (`dashboards.queue_views`)."""
        return self._read("volcano_queues", queue_views.volcano_queues)

    def cluster_queues(self) -> pl.DataFrame:
        return self._read("cluster_queues", q.cluster_queue_rows)

    # 6. Plans and audit: small, changed by the page's own buttons ---------------------------
    def capture_plans(self, wh: Warehouse) -> None:
        """`SnapshotStore.on_write` listener (`dashboards.plans_data.PlanOverlay.capture`)."""
        self._overlay.capture(wh)

    def plans_data(self, plan_id: str | None, audit_limit: int = 30) -> PlansData:
        """Stored plans, the selected one's audit trail and the latest audit records: from the
        snapshot, or from what our last write read back when that is newer than the snapshot."""
        snap = self.serving()
        fresh = self._overlay.newer_than(snap.taken_at)
        records, recent = fresh if fresh is not None else self._read("plans", read_plans)
        return select(records, recent, plan_id, audit_limit)
