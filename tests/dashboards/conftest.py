"""Shared fixtures for the dashboard tests: a small simulated warehouse with two plans, the
settings with one user per role, and helpers to build apps on a private copy.

The warehouse: the simulator's default fleet scaled to 32 cards (4 nodes: exclusive H100s,
a MIG A100 node, time-sliced A100-40GBs, HAMi vGPU H100s), from 2026-10-31 18:00 to
2026-11-01 12:00 UTC, so both October (last month) and November (this month) have data.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gpuledger.core.config import AccessSettings, RoleBinding, Settings, TeamSettings, utcnow
from gpuledger.core.period import Period
from gpuledger.core.window import Window

PERIOD = "2026-11"
PREVIOUS = "2026-10"
LEAD_TEAM = "nlp"
OTHER_TEAM = "vision"
ADMIN, LEAD, VIEWER, STRANGER = "ada", "leo", "vic", "sam"
MIG_PLAN, QUOTA_PLAN = "mig-test-1", "quota-test-1"


def settings_with_roles(proxy: tuple[str, ...] = ("127.0.0.1",)) -> Settings:
    return Settings(
        access=AccessSettings(
            proxy_addresses=proxy,
            roles=(
                RoleBinding(subject="platform-admins", kind="group", role="admin"),
                RoleBinding(subject=LEAD, kind="user", role="lead", team=LEAD_TEAM),
                RoleBinding(subject=VIEWER, kind="user", role="viewer"),
            ),
        ),
        teams=TeamSettings(budgets={LEAD_TEAM: 400.0}),
    )


def admin_headers() -> dict[str, str]:
    return {"X-Forwarded-User": ADMIN, "X-Forwarded-Groups": "platform-admins,everyone"}


def lead_headers() -> dict[str, str]:
    return {"X-Forwarded-User": LEAD, "X-Forwarded-Groups": "everyone"}


def demo_plans() -> list[object]:
    from gpuledger.optimizer.plan.contract import (
        ClusterQueueUpdate,
        Effect,
        GpuChange,
        GpuConfig,
        MigChanges,
        MigPartedGroup,
        NodeMigChange,
        ObservedObject,
        Plan,
        PodRef,
        QuotaChange,
        QuotaChanges,
        SolverInfo,
        fingerprint_of,
    )

    created = utcnow() - timedelta(hours=1)
    observed = (ObservedObject(kind="Node", name="a100-mig-000", resource_version="1", state="s"),)
    node = NodeMigChange(
        node="a100-mig-000", model="A100-80GB", mig_config="gpuledger-test",
        previous_mig_config="all-balanced",
        mig_parted=(MigPartedGroup(devices=(0,), mig_enabled=True, mig_devices={"3g.40gb": 2}),),
        gpus_changed=(GpuChange(
            index=0, before=GpuConfig(mig_enabled=True, mig_devices={"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}),
            after=GpuConfig(mig_enabled=True, mig_devices={"3g.40gb": 2})),),
        pods_to_evict=(PodRef(namespace="nlp", pod="nb-ivan-0", gpu_index=0, profile="1g.10gb"),),
    )
    mig = Plan(
        id=MIG_PLAN, kind="mig", created_at=created, fingerprint=fingerprint_of(observed), observed=observed,
        changes=MigChanges(nodes=(node,)),
        effect=Effect(gpus_changed=1, gpus_freed=1, monthly_cost_saving=1387.0, currency="USD"),
        solver=SolverInfo(status="OPTIMAL", wall_s=0.2, time_limit_s=30),
    )
    change = QuotaChange(cluster_queue="nlp", cohort="gpu-fleet", flavor="h100-train",
                         resource="nvidia.com/gpu", old_nominal=4, new_nominal=6)
    groups = ({"coveredResources": ["nvidia.com/gpu"],
               "flavors": [{"name": "h100-train", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 6}]}]},)
    quota = Plan(
        id=QUOTA_PLAN, kind="quota", created_at=created - timedelta(minutes=5), fingerprint="f",
        changes=QuotaChanges(quotas=(change,), cluster_queues=(
            ClusterQueueUpdate(name="nlp", resource_version="1", resource_groups=groups),)),
        effect=Effect(pending_gpu_minutes_before=900.0, pending_gpu_minutes_after=300.0,
                      monthly_cost_saving=0.0, currency="USD"),
        solver=SolverInfo(status="OPTIMAL", wall_s=0.1, time_limit_s=30),
    )
    return [mig, quota]


def build_demo_warehouse(path: Path, gpus: int = 32) -> Path:
    from gpuledger.optimizer.plan.store import save_plan
    from gpuledger.simulator.engine import Simulation
    from gpuledger.simulator.fleet import FleetSpec
    from gpuledger.warehouse import LoadBatch, Warehouse

    window = Window(datetime(2026, 10, 31, 18, tzinfo=UTC), datetime(2026, 11, 1, 12, tzinfo=UTC))
    sim = Simulation(FleetSpec.default(gpus=gpus), window, seed=7)
    with Warehouse.open(path) as wh:
        wh.load(LoadBatch(frames=sim.inventory()))
        for sub, frames in sim.batches():
            wh.load(LoadBatch(frames=frames, window=sub))
        for plan in demo_plans():
            save_plan(wh, plan)  # type: ignore[arg-type]
    return path


@pytest.fixture(scope="session")
def demo_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pristine demo warehouse (never written by tests: copy it first)."""
    return build_demo_warehouse(tmp_path_factory.mktemp("dash-demo") / "demo.duckdb")


@pytest.fixture
def demo_copy(demo_source: Path, tmp_path: Path) -> Path:
    """A private copy a test may write (approve, reject)."""
    target = tmp_path / "warehouse.duckdb"
    shutil.copyfile(demo_source, target)
    return target


@pytest.fixture(scope="session")
def reference_bills(demo_source: Path) -> dict[tuple[str, tuple[str, ...]], object]:
    """The bills `gpuledger bill` prints, computed on the original file (not via the app)."""
    from gpuledger.analytics.billing.bill import compute_bill
    from gpuledger.warehouse import Warehouse

    settings = settings_with_roles()
    out: dict[tuple[str, tuple[str, ...]], object] = {}
    with Warehouse.open(demo_source, read_only=True) as wh:
        for period in (PERIOD, PREVIOUS):
            out[(period, ("team",))] = compute_bill(wh, Period.exact(period).window, settings)
        out[(PERIOD, ("team", "model"))] = compute_bill(wh, Period.exact(PERIOD).window, settings, by=("team", "model"))
    return out


def store_results(path: Path, settings: Settings | None = None) -> Path:
    """What `gpuledger refresh-serving --force` does (docs/decisions/0140): publish the serving
    store beside `path` with the month results, so the app serves them rather than "not
    computed yet" (the dashboard never computes them from a serving store)."""
    from gpuledger.dashboards.serving_results import refresh_serving
    from gpuledger.warehouse import Warehouse

    with Warehouse.open(path, read_only=True) as wh:
        refresh_serving(wh, settings or settings_with_roles())
    return path


@pytest.fixture(scope="session")
def shared_app(tmp_path_factory: pytest.TempPathFactory, demo_source: Path) -> Iterator[object]:
    """One app for the tests that only read, on its own copy, refreshed by hand."""
    from gpuledger.dashboards.app import create_app

    folder = tmp_path_factory.mktemp("dash-app")
    path = folder / "warehouse.duckdb"
    shutil.copyfile(demo_source, path)
    app = create_app(settings_with_roles(), store_results(path), background=False, cache_dir=folder / "cache")
    yield app
    app.close()


# Real Chromium (Debian's /usr/bin/chromium driven by Playwright), shared by the browser tests.
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--no-first-run", "--disable-sync"]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture
def open_page(browser: Any) -> Iterator[Any]:
    """Open a page in a fresh browser context with these request headers (closed after the test)."""
    contexts: list[Any] = []

    def opener(headers: dict[str, str] | None) -> Any:
        context = browser.new_context(viewport={"width": 1400, "height": 1000}, extra_http_headers=headers or {})
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(60_000)
        return page

    yield opener
    for context in contexts:
        context.close()


def lead_team_queues(path: Path, team: str) -> list[str]:
    """The queues a lead of `team` may see, read straight from the stored objects: the Kueue
    ClusterQueue named after the team (the simulator's tenants) and every Volcano Queue that a
    PodGroup in one of the team's namespaces names (`spec.queue`)."""
    from gpuledger.warehouse import Warehouse

    sql = """
        SELECT DISTINCT json_extract_string(q.spec, '$.queue') AS queue
        FROM queues q JOIN namespaces n ON n.namespace = q.namespace
        WHERE q.kind = 'PodGroup' AND n.team = ?
    """
    with Warehouse.open(path, read_only=True) as wh:
        volcano = [q for q in wh.query(sql, [team])["queue"].to_list() if q]
        kueue = wh.query("SELECT name FROM queues WHERE kind = 'ClusterQueue' AND name = ?", [team])
    return sorted({*kueue["name"].to_list(), *volcano})
