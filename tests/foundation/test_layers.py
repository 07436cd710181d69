"""The design's arrows are executable: the import contract in pyproject.toml can fail.

`.ci/run` runs `lint-imports` over the real tree. These tests make sure that check cannot pass
silently, by running the *same* contract (read from pyproject.toml, the root package renamed)
over a tiny throw-away package laid out like ours: stage folders at the top, linked into the
package. Cases:
- the clean tree keeps every contract, and `lint-imports` exits 0 on it;
- each kind of wrong-way import breaks exactly the contract that forbids it: a lazy relative
  import from core upward, a type-checking-only import upward, collectors ⇄ warehouse,
  reports → dashboards, a stage into the CLI roof, a stage importing the roof package itself
  (`__version__`), the product importing the simulator or test tooling (`tools`, never
  installed), `kubernetes` outside collectors and actuator, `duckdb` outside the warehouse, a
  cycle between sibling modules, and a new roof module that no layer places; `lint-imports`
  exits non-zero on a broken tree (an upward import also closes a stage cycle);
- the nested contracts hold inside a stage too: the toy's analytics and optimizer have the real
  rooms (each importing the room below it), and an upward import between rooms (billing from
  teams, a type-checking-only one from sampling into exports, a lazy relative one from plan
  into quota) or a sideways one between independent rooms (devices → sampling, mig → quota)
  breaks the rooms' contract;
- on the real tree, every module directly in analytics/ and optimizer/ sits in a room of its
  stage's contract (a new flat module is placed on purpose);
- on the real tree, the import graph sees every module file of every linked stage folder
  (a folder without `__init__.py` would be invisible to the contract).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
STAGES = ("core", "collectors", "warehouse", "analytics", "optimizer", "actuator", "dashboards",
          "reports", "simulator")
TOY = "toyledger"

# A legal import for each stage, so the clean toy has a realistic graph (and the external
# packages the contracts protect are in it).
CLEAN_IMPORTS = {
    "core": "",
    "collectors": "from toyledger.core import ground\nimport kubernetes\n",
    "warehouse": "from toyledger.core import ground\nimport duckdb\n",
    "simulator": "from toyledger.core import ground\n",
    "analytics": "from toyledger.warehouse import mod\n",
    "optimizer": "from toyledger.analytics import mod\n",
    "actuator": "from toyledger.optimizer import mod\nimport kubernetes\n",
    "dashboards": "from toyledger.actuator import mod\nfrom toyledger.warehouse import mod as wh\n",
    "reports": "from toyledger.analytics import mod\n",
}


def _real_contract() -> dict[str, Any]:
    with (ROOT / "pyproject.toml").open("rb") as fh:
        section: dict[str, Any] = tomllib.load(fh)["tool"]["importlinter"]
    return section


def _renamed(value: Any) -> Any:
    """The contract with its root package renamed, so the toy never shadows the real package."""
    if isinstance(value, str):
        return re.sub(r"\bgpuledger\b", TOY, value)
    if isinstance(value, list):
        return [_renamed(v) for v in value]
    if isinstance(value, dict):
        return {k: _renamed(v) for k, v in value.items()}
    return value


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return json.dumps(value)  # strings and lists of strings: JSON spelling is valid TOML


def _write_config(path: Path, section: dict[str, Any]) -> None:
    lines = ["[tool.importlinter]"]
    lines += [f"{k} = {_toml_value(v)}" for k, v in section.items() if k != "contracts"]
    for contract in section["contracts"]:
        lines.append("\n[[tool.importlinter.contracts]]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in contract.items()]
    path.write_text("\n".join(lines) + "\n")


def _layer_names(layer: str) -> list[str]:
    return [n.strip().strip("()") for n in re.split(r"[|:]", layer)]


def _roof_modules(section: dict[str, Any]) -> list[str]:
    """Every layer name of the pipeline contract that is not a stage: the CLI roof's modules."""
    pipeline = next(c for c in section["contracts"] if c["id"] == "pipeline")
    names = [n for layer in pipeline["layers"] for n in _layer_names(layer)]
    return [n for n in names if n not in STAGES]


def _room_contracts(section: dict[str, Any]) -> dict[str, list[list[str]]]:
    """Stage folder → its rooms, layer by layer top to bottom (the nested layers contracts)."""
    rooms: dict[str, list[list[str]]] = {}
    for contract in section["contracts"]:
        if contract["type"] != "layers" or contract["id"] == "pipeline":
            continue
        for container in contract["containers"]:
            stage = container.split(".", 1)[1]
            rooms[stage] = [_layer_names(layer) for layer in contract["layers"]]
    return rooms


def _write_rooms(tree: Path, section: dict[str, Any]) -> None:
    """The rooms of each nested contract, each a package whose `mod` imports the room below."""
    for stage, layers in _room_contracts(section).items():
        for depth, layer in enumerate(layers):
            below = layers[depth + 1][0] if depth + 1 < len(layers) else None
            for room in layer:
                folder = tree / stage / room
                folder.mkdir()
                (folder / "__init__.py").write_text("")
                (folder / "mod.py").write_text(
                    f"from {TOY}.{stage}.{below} import mod\n" if below else "")


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    """A clean tree shaped like ours: stage folders at the top, linked into `toyledger/`."""
    section = _renamed(_real_contract())
    pkg = tmp_path / TOY
    pkg.mkdir()
    (pkg / "__init__.py").write_text('__version__ = "0"\n')
    for stage in STAGES:
        folder = tmp_path / stage
        folder.mkdir()
        (folder / "__init__.py").write_text("")
        (folder / "mod.py").write_text(CLEAN_IMPORTS[stage])
        (pkg / stage).symlink_to(Path("..") / stage, target_is_directory=True)
    (tmp_path / "core" / "ground.py").write_text("")
    _write_rooms(tmp_path, section)
    for name in _roof_modules(section):
        if name == "commands":
            (pkg / name).mkdir()
            (pkg / name / "__init__.py").write_text("from toyledger.dashboards import mod\n")
        else:
            (pkg / f"{name}.py").write_text("from toyledger.reports import mod\n")
    _write_config(tmp_path / "pyproject.toml", section)
    return tmp_path


def _lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    """The command `.ci/run` runs, on the toy tree (wide columns: one summary line per contract)."""
    lint = Path(sys.executable).with_name("lint-imports")
    return subprocess.run(
        [str(lint), "--no-cache", "--config", str(tree / "pyproject.toml")],
        cwd=tree, env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin", "COLUMNS": "10000"},
        capture_output=True, text=True, timeout=120, check=False,
    )


def _broken(tree: Path) -> set[str]:
    """The ids of the contracts the tree breaks, read from the summary `lint-imports` prints."""
    result = _lint_imports(tree)
    assert result.returncode in (0, 1), result.stdout[-3000:] + result.stderr[-3000:]
    ids = {c["name"]: c["id"] for c in _renamed(_real_contract())["contracts"]}
    verdicts = dict(re.findall(r"^(.+) (KEPT|BROKEN)$", result.stdout, flags=re.MULTILINE))
    assert set(verdicts) == set(ids), result.stdout[-3000:]  # every contract ran
    broken = {ids[name] for name, verdict in verdicts.items() if verdict == "BROKEN"}
    assert (result.returncode == 1) == bool(broken)
    return broken


def test_every_contract_has_an_id_and_a_name():
    contracts = _real_contract()["contracts"]
    assert {c["type"] for c in contracts} >= {"layers", "forbidden", "protected", "acyclic_siblings"}
    assert all(c.get("id") and c.get("name") for c in contracts)
    assert len({c["id"] for c in contracts}) == len(contracts)


def test_clean_tree_keeps_every_contract(toy: Path):
    assert _broken(toy) == set()  # and `lint-imports` exited 0


UPWARD_LAZY_RELATIVE = """
def later() -> None:
    from ..analytics import mod  # a lazy, relative, upward import
"""
UPWARD_TYPE_ONLY = """
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from toyledger.optimizer.mod import Plan
"""

# (contracts it must break, file, source). An upward import against a path that already runs
# downward also closes a cycle between stages, so it breaks the acyclic contract as well.
UPWARD = frozenset({"pipeline", "acyclic"})
VIOLATIONS: list[tuple[frozenset[str], str, str]] = [
    (UPWARD, "core/bad.py", UPWARD_LAZY_RELATIVE),
    (UPWARD, "core/bad.py", UPWARD_TYPE_ONLY),
    (frozenset({"pipeline"}), "collectors/bad.py", "from toyledger.warehouse import mod\n"),
    (frozenset({"pipeline"}), "warehouse/bad.py", "import toyledger.collectors.mod\n"),
    (frozenset({"pipeline"}), "reports/bad.py", "from toyledger.dashboards import mod\n"),
    (UPWARD, "analytics/bad.py", "from toyledger.optimizer import mod\n"),
    (frozenset({"pipeline"}), "dashboards/bad.py", "def f():\n    from toyledger import cli\n"),
    (frozenset({"pipeline"}), "simulator/bad.py", "from toyledger.warehouse import mod\n"),
    (frozenset({"pipeline"}), f"{TOY}/unplaced.py", ""),
    (frozenset({"roof-package"}), "reports/bad.py", "from toyledger import __version__\n"),
    (frozenset({"simulator-is-test-fleet"}), "analytics/bad.py", "from toyledger.simulator import mod\n"),
    (frozenset({"test-tooling"}), "simulator/bad.py", "def f():\n    from tools import kube_loader\n"),
    (frozenset({"kubernetes"}), "optimizer/bad.py", "def f():\n    import kubernetes.client\n"),
    (frozenset({"kubernetes"}), "simulator/bad.py", "from kubernetes import client\n"),
    (frozenset({"duckdb"}), "dashboards/bad.py", "def f():\n    import duckdb\n"),
    (frozenset({"acyclic"}), "simulator/bad.py", "from toyledger.simulator import other\n"),
    # Inside a stage: the rooms of the nested contracts (an upward import along the toy's chain
    # of rooms also closes a room cycle; sampling is not on it).
    (frozenset({"analytics-rooms", "acyclic"}), "analytics/teams/bad.py",
     "from toyledger.analytics.billing import mod\n"),
    (frozenset({"analytics-rooms"}), "analytics/sampling/bad.py", UPWARD_TYPE_ONLY.replace(
        "toyledger.optimizer.mod import Plan", "toyledger.analytics.exports.mod import doc")),
    (frozenset({"analytics-rooms"}), "analytics/devices/bad.py",
     "from toyledger.analytics.sampling import mod\n"),
    (frozenset({"optimizer-rooms", "acyclic"}), "optimizer/plan/bad.py",
     "def later() -> None:\n    from ..quota import mod\n"),
    (frozenset({"optimizer-rooms"}), "optimizer/mig/bad.py", "from toyledger.optimizer.quota import mod\n"),
]


@pytest.mark.parametrize(("contracts", "path", "source"), VIOLATIONS,
                         ids=[f"{p}:{i}" for i, (_, p, _) in enumerate(VIOLATIONS)])
def test_a_wrong_way_import_breaks_its_contract(toy: Path, contracts: frozenset[str], path: str,
                                                source: str):
    (toy / path).write_text(source)
    if path == "simulator/bad.py" and "other" in source:
        (toy / "simulator" / "other.py").write_text("def f():\n    from . import bad\n")
    assert _broken(toy) == contracts


def test_lint_imports_fails_on_a_broken_tree(toy: Path):
    (toy / "core" / "bad.py").write_text(UPWARD_LAZY_RELATIVE)
    result = _lint_imports(toy)
    assert result.returncode == 1, result.stdout[-3000:]
    assert f"{TOY}.core.bad -> {TOY}.analytics.mod" in result.stdout


def test_the_graph_sees_every_module_of_the_real_tree():
    """grimp follows the linked stage folders, but skips a folder without `__init__.py`."""
    import grimp

    graph = grimp.build_graph("gpuledger", cache_dir=None)
    files: list[str] = []
    for stage in STAGES:
        for file in sorted((ROOT / stage).rglob("*.py")):
            parts = file.relative_to(ROOT).with_suffix("").parts
            files.append(".".join(("gpuledger", *(parts[:-1] if parts[-1] == "__init__" else parts))))
    assert len(files) > 100
    unseen = sorted(set(files) - graph.modules)
    assert unseen == [], f"modules the import contract cannot see (add __init__.py): {unseen}"


def test_every_module_of_the_real_stages_sits_in_a_room():
    """The nested contracts name every module directly in their stage folder, and nothing else."""
    for stage, layers in _room_contracts(_real_contract()).items():
        rooms = {room for layer in layers for room in layer}
        present = {p.stem for p in (ROOT / stage).glob("*.py") if p.stem != "__init__"}
        present |= {p.parent.name for p in (ROOT / stage).glob("*/__init__.py")}
        assert present == rooms, f"{stage}: unplaced {sorted(present - rooms)}, absent {sorted(rooms - present)}"
