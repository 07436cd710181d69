"""Every plug-in point is a `core.registry.Registry`, and a plug-in is one module (decision 0154).

Cases:
- each point lists its built-ins, in its order: queue systems (per stage, by name), advice kinds
  (the order the statements show), recommendation rules (priority), device sources (claim
  precedence, the whole card last), plan kinds (the optimizer's part and the actuator's, the
  same names, each part naming its own kind), dashboard pages and lake pages (navigation
  order), CLI commands (by module name, and exactly what the CLI offers);
- a toy plan kind written in a temporary module, registering its changes model, its table and
  summary (optimizer stage) and its rollout with its progress record and manifests (actuator
  stage), is picked up with no other edit: its plans validate, round-trip through JSON and the
  warehouse store, show, list, export and resume through the registered parts; an unknown
  kind is refused naming the known ones;
- a toy device source registered ahead of the whole-card fallback claims its rows and prices
  them, with every other row as before; withdrawn, its rows fall back to whole cards;
- a toy advice kind registered from a temporary module runs with the built-ins, in registry
  order; an unknown kind is refused in one line.
"""

from __future__ import annotations

import sys
import textwrap
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType

import polars as pl
import pydantic
import pytest

from gpuledger.actuator.plan_kinds import ROLLOUTS, rollout_for
from gpuledger.actuator.queues import WRITERS
from gpuledger.analytics.advice import KINDS
from gpuledger.analytics.devices.registry import SOURCES, pod_holder_modes, sharing_mode_expr, with_shares
from gpuledger.analytics.workloads.recommend import RULES, kinds
from gpuledger.collectors.queues import COLLECTORS
from gpuledger.commands import COMMANDS
from gpuledger.core.config import Settings
from gpuledger.core.errors import InputError
from gpuledger.core.window import Window
from gpuledger.dashboards.pages.org import LAKE_PAGES
from gpuledger.dashboards.registry import PAGES, page_for
from gpuledger.optimizer.plan.contract import PLAN_KINDS, Effect, Plan, SolverInfo
from gpuledger.optimizer.quota.queues import READERS
from gpuledger.warehouse import Warehouse
from tests.analytics.test_device_sources import _frame, _inputs

T0 = datetime(2026, 11, 5, 12, tzinfo=UTC)


# 1. The built-ins of each point ----------------------------------------------------------------
@pytest.mark.parametrize("registry", [COLLECTORS, READERS, WRITERS], ids=["collect", "optimize", "apply"])
def test_queue_systems_per_stage(registry):
    assert registry.names() == ("kueue", "volcano")
    assert [part.name for part in registry] == ["kueue", "volcano"]


def test_advice_kinds_in_statement_order():
    assert KINDS.names() == ("profile-catalog", "overcommit", "autoscaling", "fragmentation",
                             "dra-fragmentation", "dra-profiles")


def test_recommendation_rules_in_priority_order():
    assert RULES.names() == ("reclaim", "rightsize")
    assert kinds() == ("reclaim_idle_notebook", "scale_down_when_idle", "whole_to_mig", "rightsize_mig")


def test_device_sources_in_claim_precedence_whole_card_last():
    assert SOURCES.names() == ("dra", "mig", "timeslice", "vgpu", "exclusive")


def test_plan_kinds_have_both_stage_parts_naming_their_own_kind():
    assert PLAN_KINDS.names() == ROLLOUTS.names() == ("mig", "quota")
    for name in ("mig", "quota"):
        assert PLAN_KINDS.get(name).changes.model_fields["kind"].default == name
        rollout = rollout_for(name)
        assert rollout.kind == name and rollout.progress.model_fields["kind"].default == name


def test_pages_in_navigation_order():
    assert PAGES.names() == ("/teams", "/team", "/fleet", "/queues", "/capacity", "/plans")
    assert LAKE_PAGES.names() == ("/teams", "/org", "/team", "/fleet", "/queues", "/plans")
    assert page_for("/fleet/").path == "/fleet" and page_for("/nowhere").path == "/team"


def test_commands_by_module_name_are_what_the_cli_offers():
    from gpuledger.cli import build_cli

    assert COMMANDS.names() == (
        "agent", "bill", "budgets", "capacity", "collect", "compact", "completion", "demo", "export",
        "idle", "mcp", "optimize", "org", "plans", "publish", "recommend", "refresh_serving", "report",
        "rollup", "serve", "simulate", "status", "why")
    assert set(build_cli().commands) == {name.replace("_", "-") for name in COMMANDS.names()}


# 2. A toy plan kind: one module, both stages ---------------------------------------------------
TOY_KIND = '''
"""A toy plan kind: set Deployments' replicas (both stages' parts, as a real kind would)."""
from typing import Literal

from gpuledger.actuator.gateway import ObjectRef
from gpuledger.actuator.plan_kinds import ROLLOUTS, RollbackOutcome, StepOutcome
from gpuledger.actuator.rollout_progress import KindProgress
from gpuledger.optimizer.plan.contract import PLAN_KINDS, PlanChanges, PlanKind
from gpuledger.optimizer.plan.render import table


class ToyChanges(PlanChanges):
    kind: Literal["toyscale"] = "toyscale"
    replicas: dict[str, int]


def render(changes):
    return table(sorted(changes.replicas.items()), ("deployment", "replicas"))


def summary(plan):
    return f"{len(plan.changes.replicas)} deployments rescaled"


class ToyProgress(KindProgress):
    kind: Literal["toyscale"] = "toyscale"
    done: list[str] = []


class ToyRollout:
    kind = "toyscale"
    progress = ToyProgress

    def apply(self, ctx):
        ctx.progress.apply = ToyProgress(done=sorted(ctx.plan.changes.replicas))

    def rollback(self, ctx, applied):
        return RollbackOutcome()

    def steps(self, progress):
        done = progress.apply.done if isinstance(progress.apply, ToyProgress) else []
        return tuple(StepOutcome(f"Deployment/{d}", "done") for d in done)

    def problems(self, progress):
        return []

    def retry_failed(self, progress):
        pass

    def manifests(self, plan, settings):
        return [(ObjectRef("Deployment", d, "apps", f"/apis/apps/v1/namespaces/apps/deployments/{d}"),
                 {"spec": {"replicas": n}}) for d, n in sorted(plan.changes.replicas.items())]


PLAN_KINDS.register("toyscale", PlanKind(ToyChanges, render=render, summary=summary))
ROLLOUTS.register("toyscale", ToyRollout())
'''


def _load(tmp_path: Path, source: str) -> ModuleType:
    """`source` as a fresh module outside the product (imported once, forgotten after)."""
    name = f"toy_plugin_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    sys.path.insert(0, str(tmp_path))
    try:
        __import__(name)
    finally:
        sys.path.remove(str(tmp_path))
    return sys.modules.pop(name)


@pytest.fixture
def toy_kind(tmp_path: Path) -> Iterator[ModuleType]:
    module = _load(tmp_path, TOY_KIND)
    yield module
    PLAN_KINDS.unregister("toyscale")
    ROLLOUTS.unregister("toyscale")


def _toy_plan(module: ModuleType) -> Plan:
    return Plan(id="toyscale-20261105-120000-abcdef", kind="toyscale", created_at=T0, fingerprint="f0",
                changes=module.ToyChanges(replicas={"web": 3, "api": 1}), effect=Effect(),
                solver=SolverInfo(status="OPTIMAL", wall_s=0.0, time_limit_s=1.0))


def test_a_toy_plan_kind_is_picked_up_by_every_stage(toy_kind, tmp_path):
    from gpuledger.actuator.export import export_objects
    from gpuledger.actuator.rollout_progress import Progress
    from gpuledger.optimizer.plan.render import render_list, render_plan
    from gpuledger.optimizer.plan.store import list_plans, load_record, save_plan

    plan = _toy_plan(toy_kind)
    body = plan.to_json_dict()
    assert body["changes"] == {"kind": "toyscale", "replicas": {"web": 3, "api": 1}}
    again = Plan.from_json(plan.to_json())
    assert again == plan and type(again.changes) is toy_kind.ToyChanges

    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        save_plan(wh, plan, now=T0)
        record = load_record(wh, plan.id)
        assert record.plan == plan and [r.plan.id for r in list_plans(wh, None, kind="toyscale")] == [plan.id]

    shown = render_plan(plan, "proposed").splitlines()
    assert "plan toyscale-20261105-120000-abcdef  (toyscale, proposed)" in shown
    assert [line.split() for line in shown if line.startswith(("api", "web"))] == [["api", "1"], ["web", "3"]]
    assert "2 deployments rescaled" in render_list([record])

    exported = [doc for _, doc in export_objects(plan, Settings())]
    assert exported == [
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": n, "namespace": "apps"},
         "spec": {"replicas": r}} for n, r in (("api", 1), ("web", 3))]

    rollout = rollout_for("toyscale")
    stored = Progress(apply=toy_kind.ToyProgress(done=["api"])).dump()
    resumed = Progress.load(stored, rollout.progress)
    assert rollout.steps(resumed) == (toy_kind.StepOutcome("Deployment/api", "done"),)


def test_an_unknown_plan_kind_is_refused_naming_the_known_ones(toy_kind):
    body = _toy_plan(toy_kind).to_json_dict()
    body["kind"] = body["changes"]["kind"] = "autoscale"
    with pytest.raises(pydantic.ValidationError, match=r"plan kind 'autoscale': unknown \(known: mig, quota, toyscale\)"):
        Plan.from_json(body)
    with pytest.raises(Exception, match=r"plan kind 'autoscale': no rollout \(known: mig, quota, toyscale\)"):
        rollout_for("autoscale")


# 3. A toy device source ------------------------------------------------------------------------
TOY_SOURCE = '''
import polars as pl

from gpuledger.analytics.devices.registry import SOURCES


class HalfCard:
    """`toyshare`: a card split in two fixed halves, whatever the holders."""

    mode = "toyshare"
    holders_from_pods = True

    def matches(self):
        return pl.col("card_mode") == "toyshare"

    def prepare(self, frame, inputs):
        return frame.with_columns(pl.lit(0.5).alias("_toy_half"))

    def share(self):
        return pl.col("_toy_half")


SOURCES.add(HalfCard(), before="exclusive")
'''


def _with_toy_rows() -> pl.DataFrame:
    frame = _frame()
    toy = frame.head(1).with_columns(pl.lit("toy").alias("uuid"), pl.lit("toyshare").alias("card_mode"))
    return pl.concat([frame, toy])


def test_a_toy_device_source_claims_and_prices_its_rows(tmp_path):
    frame = _with_toy_rows()
    before = frame.with_columns(sharing_mode_expr())["sharing_mode"].to_list()
    assert before[-1] == "exclusive"  # unknown card mode: a whole card
    _load(tmp_path, TOY_SOURCE)
    try:
        moded = frame.with_columns(sharing_mode_expr())
        assert moded["sharing_mode"].to_list() == [*before[:-1], "toyshare"]
        with Warehouse.open(tmp_path / "w.duckdb") as wh:  # empty: no HAMi allocation
            priced = with_shares(moded, _inputs("compute", wh))
        shares = dict(zip(priced["uuid"] + ":" + priced["vgpu"].fill_null(""), priced["share"], strict=True))
        assert shares["toy:"] == 0.5 and shares["whole:"] == 1.0 and shares["ts4:0"] == pytest.approx(1 / 4)
        assert pod_holder_modes() == ("timeslice", "toyshare")  # HAMi's from HAMi (decision 0160)
        assert SOURCES.names()[-2:] == ("toyshare", "exclusive")
    finally:
        SOURCES.unregister("toyshare")
    assert frame.with_columns(sharing_mode_expr())["sharing_mode"].to_list() == before


# 4. A toy advice kind --------------------------------------------------------------------------
TOY_ADVICE = '''
from gpuledger.analytics.advice import KINDS
from gpuledger.analytics.advice.run import Advice


def toy_advice(wh, window, settings):
    row = {"kind": "toy", "scope": "fleet", "current": f"{window.hours:g} h", "recommended": "nothing",
           "monthly_saving": 0.0, "reason": "a toy"}
    return Advice("toy", [row], {"hours": window.hours})


KINDS.register("toy", toy_advice)
'''


def test_a_toy_advice_kind_runs_with_the_built_ins(tmp_path):
    from gpuledger.analytics.advice.run import run_advice

    _load(tmp_path, TOY_ADVICE)
    day = Window(T0.replace(hour=0), T0.replace(hour=0) + timedelta(days=1))
    try:
        with Warehouse.open(tmp_path / "w.duckdb") as wh:
            found = run_advice(wh, day, Settings(), ("toy", "overcommit"))
            assert [a.kind for a in found] == ["overcommit", "toy"]  # registry order, not asked order
            assert found[1].rows[0]["current"] == "24 h" and found[1].document == {"hours": 24.0}
            with pytest.raises(InputError) as info:
                run_advice(wh, day, Settings(), ("nope",))
        assert str(info.value) == ("advice kind 'nope': unknown (known: profile-catalog, overcommit, "
                                   "autoscaling, fragmentation, dra-fragmentation, dra-profiles, toy)")
    finally:
        KINDS.unregister("toy")
