"""The typed rules and their fingerprints (`core.rules`, docs/decisions/0147), the activity rule
in its one home (`core.activity`), and the walk of how an idle minute is decided.

Cases: the rules round-trip through their stored JSON; one setting written as an integer or a
float is one fingerprint; each rule the roll-up depends on (idle threshold, minimum run,
framebuffer floor, gap tolerance, activity rule, MIG share basis) moves the rollup fingerprint,
the pricing rules (discounts, billing basis, redistribution) move only the full one; a set
written by other code (another version string) is known as not computable here; the activity
rule's SQL and Polars forms agree under both sources, GPU_UTIL's division bit for bit with SQL;
the four modules of an idle minute's walk import one way (rules -> activity -> the pass -> the
read), the pass nothing else of analytics but its step 1b, the holders HAMi published for the
cards dcgm leaves without one (`analytics.sampling.holders`, decision 0160), which decides no
minute: it only names who held a card's rows.
"""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import polars as pl
import pytest

from gpuledger.core import activity
from gpuledger.core.config import Settings
from gpuledger.core.rules import Rules

ROOT = Path(__file__).resolve().parents[2]


def _rules(**changes: Any) -> Rules:
    return Rules.of(Settings.model_validate(changes))


def test_rules_round_trip_and_are_stable():
    rules = _rules()
    assert Rules.from_json(rules.to_json()) == rules
    assert rules.fingerprint == _rules().fingerprint and len(rules.rollup_fingerprint) == 12
    same = _rules(idle={"threshold": 0.05, "held_fb_mib": 1024.0, "min_minutes": 30})
    assert same.rollup_fingerprint == rules.rollup_fingerprint
    assert _rules(idle={"threshold": 0}).rollup_fingerprint == _rules(idle={"threshold": 0.0}).rollup_fingerprint
    assert rules.describe_rollup() == (
        "idle < 5% for >= 30 min, held >= 1024 MiB, GR_ENGINE_ACTIVE else GPU_UTIL, MIG share by compute"
    )


@pytest.mark.parametrize("change", [
    {"idle": {"threshold": 0.15}}, {"idle": {"min_minutes": 60}}, {"idle": {"held_fb_mib": 2048}},
    {"idle": {"gap_tolerance_s": 600}}, {"idle": {"activity": "gpu_util"}},
    {"sharing": {"mig_share_basis": "memory"}},
])
def test_each_rollup_rule_moves_the_rollup_fingerprint(change: dict[str, Any]):
    base, changed = _rules(), _rules(**change)
    assert changed.rollup_fingerprint != base.rollup_fingerprint
    assert changed.fingerprint != base.fingerprint


@pytest.mark.parametrize("change", [
    {"sharing": {"discounts": {"mig": 0.5}}}, {"sharing": {"billing_basis": "utilization"}},
    {"idle": {"unallocated_redistribution": "even"}},
])
def test_pricing_rules_move_only_the_full_fingerprint(change: dict[str, Any]):
    base, changed = _rules(), _rules(**change)
    assert changed.rollup_fingerprint == base.rollup_fingerprint
    assert changed.fingerprint != base.fingerprint


def test_rules_of_other_code_are_not_computable():
    rules = _rules()
    assert rules.computable
    older = replace(rules, sampling=replace(rules.sampling, hole_rule="card-next-scrape-v0"))
    assert not older.computable and older.rollup_fingerprint != rules.rollup_fingerprint
    assert not replace(rules, shares=replace(rules.shares, version="0")).computable


@pytest.mark.parametrize(("source", "expected"), [
    ("gr_engine_active", [0.25, 0.4, None, 0.2]), ("gpu_util", [0.9, 0.4, None, None]),
])
def test_activity_rule_sql_and_polars_agree(source: activity.ActivitySource, expected: list[Any]):
    frame = pl.DataFrame({"gr_engine_active": [0.25, None, None, 0.2],
                          "gpu_util": [90.0, 40.0, None, float("nan")]})
    by_sql = duckdb.sql(f"SELECT {activity.activity_sql(source=source)} AS a FROM frame").pl()["a"].to_list()
    by_polars = frame.select(activity.activity_expr(source).alias("a"))["a"].to_list()
    assert by_sql == by_polars == expected


def test_gpu_util_division_is_sqls_to_the_bit():
    util = np.random.default_rng(3).uniform(0, 100, 50_000)
    frame = pl.DataFrame({"gr": [None] * len(util), "util": util}, schema={"gr": pl.Float64, "util": pl.Float64})
    frame = frame.with_columns(activity.per_cent_column(frame.height))
    ours = frame.select(activity.activity_of_exprs(pl.col("gr"), pl.col("util"),
                                                   per_cent=pl.col(activity.PER_CENT)).alias("a"))["a"]
    sql = duckdb.sql(f"SELECT {activity.activity_of('gr', 'util')} AS a FROM frame").pl()["a"]
    assert (ours.to_numpy() == sql.to_numpy()).all()
    assert (ours.to_numpy() == util / 100.0).all()  # IEEE division, as numpy does it


WALK = {
    "core/rules.py": {"gpuledger.core.activity"},
    "core/activity.py": set(),
    "analytics/sampling/sweep.py": {"gpuledger.core.activity", "gpuledger.core.rules",
                                    "gpuledger.warehouse.queries.sampling",
                                    "gpuledger.analytics.sampling.holders",
                                    "gpuledger.analytics.sampling.neighbours"},
    "analytics/sampling/neighbours.py": set(),
    "analytics/sampling/holders.py": {"gpuledger.warehouse.queries.hami"},
    "warehouse/queries/sampling.py": {"gpuledger.core.activity"},
}
"""How an idle minute is decided: the values, the rule, the pass, the read (the issue's walk)."""
PLUMBING = {"gpuledger.core.errors", "gpuledger.core.window", "gpuledger.core.config",
            "gpuledger.warehouse.protocols", "gpuledger.warehouse.sample_layout"}
"""What the four may import besides each other: errors, time, the settings the rules come from,
the read protocol and the sample table names; none of them decides anything about a minute."""


def _is_module(name: str) -> bool:
    """`gpuledger.core.activity` -> core/activity.py exists (the stages live at the repo top)."""
    return (ROOT / Path(*name.split(".")[1:])).with_suffix(".py").exists()


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("gpuledger"):
            found |= {f"{node.module}.{a.name}" if _is_module(f"{node.module}.{a.name}") else node.module
                      for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("gpuledger")}
    return found


@pytest.mark.parametrize("module", list(WALK))
def test_the_walk_of_an_idle_minute_opens_four_files_one_way(module: str):
    imported = _imports(ROOT / module) - PLUMBING
    assert imported == WALK[module], (module, imported)
