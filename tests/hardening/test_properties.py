"""Property-based: malformed and extreme input files always end in one line, writing nothing.

Hypothesis builds a valid config, fleet, demand, queues or history file, then breaks it in one
way that no reader may accept: a misspelt or invented key at any level, a value of the wrong
type, NaN, infinity, a negative or astronomically large number, a key written twice, or bytes
that are not YAML. Each case runs the real CLI in-process (`gpuledger.cli.main`) and asserts:
non-zero exit, exactly one `gpuledger: error:` line on stderr, no traceback, an error of ours
(not the top level's "unexpected" net), and no warehouse file created.

Cases: config files; what-if fleet files; demand files; queues files; history CSVs; bytes.
Bounded and derandomized (`derandomize=True`) so CI runs the same examples in well under a
minute.
"""

from __future__ import annotations

import copy
import math
import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.hardening.conftest import DEMAND, FLEET, run
from tests.hardening.test_inputs import HISTORY, QUEUES

BOUNDED = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                   suppress_health_check=[HealthCheck.too_slow])

BAD_NUMBERS = st.sampled_from([math.nan, math.inf, -math.inf, -1, -1e300, 1e300, 10**30, "12abc", True, [1]])

CONFIG = {
    "price_book": [{"model": "H100-80GB", "unit_price": 3.0}],
    "idle": {"threshold": 0.05, "min_minutes": 30},
    "plans": {"solver_time_limit_s": 10, "max_gpus_changed_per_node": 4},
    "reports": {"min_coverage": 0.9, "adjustment_lookback_months": 3},
    "teams": {"budgets": {"a": 100.0}, "guaranteed_gpus": {"a": 2}},
}
FLEET_DATA = yaml.safe_load(FLEET.read_text())
DEMAND_DATA = yaml.safe_load(DEMAND.read_text())


FREE = frozenset({"budgets", "guaranteed_gpus", "metadata", "teams", "guaranteed"})
"""Mappings whose keys are names the user chooses (teams, Kubernetes metadata)."""


def mappings(data: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths of every mapping inside `data` whose keys are a fixed vocabulary."""
    out = []
    if isinstance(data, dict):
        if not path or path[-1] not in FREE:
            out.append(path)
        for key, value in data.items():
            out += mappings(value, (*path, key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            out += mappings(value, (*path, i))
    return out


def numbers(data: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths of every number inside `data` (not bools)."""
    if isinstance(data, dict):
        return [p for k, v in data.items() for p in numbers(v, (*path, k))]
    if isinstance(data, list):
        return [p for i, v in enumerate(data) for p in numbers(v, (*path, i))]
    return [path] if isinstance(data, int | float) and not isinstance(data, bool) else []


def at(data: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        data = data[key]
    return data


@st.composite
def broken(draw: st.DrawFn, base: Any, *, numeric: list[tuple[Any, ...]] | None = None) -> str:
    """`base` as YAML text, broken in one way no reader may accept."""
    data = copy.deepcopy(base)
    how = draw(st.sampled_from(["unknown key", "bad number", "duplicate key", "not yaml"]))
    targets = numeric if numeric is not None else numbers(data)
    if how == "bad number" and targets:
        path = draw(st.sampled_from(targets))
        at(data, path[:-1])[path[-1]] = draw(BAD_NUMBERS)
        return yaml.safe_dump(data, allow_unicode=True)
    if how == "unknown key" or not targets:
        path = draw(st.sampled_from(mappings(data)))
        section = at(data, path)
        known = list(section)
        key = draw(st.one_of(
            st.sampled_from(known).map(lambda k: f"{k}x" if k != "" else "x"),   # misspelt
            st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12),
        ).filter(lambda k: k not in known))
        section[key] = draw(st.sampled_from([False, 1, "x", None]))
        return yaml.safe_dump(data, allow_unicode=True)
    text = yaml.safe_dump(data, allow_unicode=True, default_flow_style=False, sort_keys=False)
    if how == "duplicate key":
        lines = text.splitlines()
        top = [i for i, line in enumerate(lines) if line and not line.startswith((" ", "-"))]
        first = lines[draw(st.sampled_from(top))].split(":")[0]
        return text + f"{first}: null\n"
    return draw(st.sampled_from(["{[", "a: b: c", "- a\nb: c", "key: [1, 2", "\t- x", "a: *nowhere",
                                 "a: !!python/object:os.system x", "? [1]\n: 2\n: 3"])) + "\n" + text


def refused(argv_of: Any, name: str, text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        path = root / name
        path.write_text(text)
        warehouse = root / "w.duckdb"
        run(["--warehouse", warehouse, *argv_of(path)]).assert_one_line_refusal(warehouse=warehouse)


def mig(fleet: Path = FLEET, demand: Path = DEMAND) -> list[Any]:
    return ["optimize", "mig", "--fleet", fleet, "--demand", demand, "--time-limit", "20"]


@BOUNDED
@given(broken(CONFIG))
def test_broken_config_files(text: str) -> None:
    refused(lambda p: ["--config", p, *mig()], "gpuledger.yaml", text)


@BOUNDED
@given(broken(FLEET_DATA, numeric=[
    p for p in numbers(FLEET_DATA) if p[-1] in ("index", "gpus") or "layout" in p
]))
def test_broken_fleet_files(text: str) -> None:
    refused(lambda p: mig(fleet=p), "fleet.yaml", text)


@BOUNDED
@given(broken(DEMAND_DATA))
def test_broken_demand_files(text: str) -> None:
    refused(lambda p: mig(demand=p), "demand.yaml", text)


def quota(queues: Path, history: Path) -> list[Any]:
    return ["optimize", "quota", "--queues", queues, "--history", history, "--time-limit", "20"]


@BOUNDED
@given(broken(QUEUES, numeric=[p for p in numbers(QUEUES) if p[-1] in ("weight", "nominalQuota")]))
def test_broken_queue_files(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        history = Path(tmp) / "history.csv"
        history.write_text(HISTORY)
        refused(lambda p: quota(p, history), "queues.yaml", text)


ROWS = HISTORY.splitlines()


@st.composite
def broken_history(draw: st.DrawFn) -> str:
    rows = list(ROWS)
    how = draw(st.sampled_from(["repeat", "queue", "demand", "column", "ts"]))
    i = draw(st.integers(1, len(rows) - 1))
    ts, queue, flavor, resource, _ = rows[i].split(",")
    if how == "repeat":
        rows.append(rows[i])
    elif how == "queue":
        name = draw(st.text(alphabet="abcxyz-", min_size=1, max_size=8).filter(
            lambda n: n not in ("team-a", "team-b")))
        rows.append(f"{ts},{name},{flavor},{resource},1")
    elif how == "demand":
        bad = draw(st.sampled_from(["nan", "inf", "-inf", "-1", "1e300", "1e400"]))
        rows[i] = f"{ts},{queue},{flavor},{resource},{bad}"
    elif how == "column":
        extra = draw(st.sampled_from(["demnd", "queue", "note", "flavour"]))
        rows = [rows[0] + f",{extra}"] + [r + ",1" for r in rows[1:]]
    else:
        rows.append(f"{draw(st.sampled_from(['yesterday', '2026-13-01T00:00:00Z', '0000-01-01']))},"
                    f"{queue},{flavor},{resource},1")
    return "\n".join(rows) + "\n"


@BOUNDED
@given(broken_history())
def test_broken_history_files(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        queues = Path(tmp) / "queues.yaml"
        queues.write_text(yaml.safe_dump(QUEUES))
        refused(lambda p: quota(queues, p), "history.csv", text)


@BOUNDED
@given(st.binary(min_size=1, max_size=200), st.sampled_from(["config", "fleet", "demand", "queues"]))
def test_arbitrary_bytes(data: bytes, role: str) -> None:
    """Bytes that are rarely YAML at all; the few that parse must still be refused (none of
    them is a valid file of that role)."""
    argv_of = {
        "config": lambda p: ["--config", p, *mig()],
        "fleet": lambda p: mig(fleet=p),
        "demand": lambda p: mig(demand=p),
        "queues": lambda p: quota(p, FLEET),
    }[role]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "input.yaml"
        path.write_bytes(data)
        warehouse = Path(tmp) / "w.duckdb"
        result = run(["--warehouse", warehouse, *argv_of(path)])
        if role == "config" and result.code == 0:
            return  # a few byte strings are a valid (e.g. empty-mapping) config; nothing to refuse
        result.assert_one_line_refusal(warehouse=warehouse)
