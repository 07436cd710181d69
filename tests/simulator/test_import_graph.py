"""The simulator package's own imports form no cycle, and it never talks to a cluster.

Cases (static, from the source; every import counts: module level, inside functions and under
`TYPE_CHECKING`, since an import-linter contract counts them all):
- the graph of `gpuledger.simulator.*` → `gpuledger.simulator.*` imports has no cycle (the old
  engine ⇄ openmetrics circle: the renderers read the `SimulatedFleet` protocol instead);
- no simulator module imports `kubernetes` or `tools` (the kube loader and the MIG Manager
  emulator are test tooling in `tools/`; the product package is installed, `tools` is not).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = "gpuledger.simulator"
ROOT = Path(__file__).resolve().parents[2] / "simulator"


def imports_of(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def graph() -> dict[str, set[str]]:
    modules = {f"{PACKAGE}.{p.stem}": p for p in ROOT.glob("*.py") if p.stem != "__init__"}
    return {name: {i for i in imports_of(path) if i in modules and i != name} for name, path in modules.items()}


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_finder_sees_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_simulator_imports_have_no_cycle():
    edges = graph()
    assert f"{PACKAGE}.openmetrics" in edges[f"{PACKAGE}.engine"]  # the graph does see lazy imports
    assert find_cycle(edges) is None


def test_simulator_never_imports_kubernetes_or_tools():
    offenders = {
        path.name: sorted(i for i in imports_of(path) if i.split(".")[0] in ("kubernetes", "tools"))
        for path in ROOT.glob("*.py")
    }
    assert {name: found for name, found in offenders.items() if found} == {}
