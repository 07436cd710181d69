"""The house size rules, checked in CI: no product module over 400 lines, no function over 60.

Why a test: small modules with one job are what keeps the code reviewable, and a rule that is
only read in a style guide erodes one exception at a time. Tools, tests and bench are outside
the product and not held to it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STAGES = ("core", "collectors", "warehouse", "simulator", "analytics", "optimizer", "actuator",
          "dashboards", "reports")
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def product_modules() -> list[Path]:
    """Every product module: the stage folders and the roof files directly in `gpuledger/`."""
    found = [p for stage in STAGES if (ROOT / stage).is_dir() for p in (ROOT / stage).rglob("*.py")]
    roof = ROOT / "gpuledger"
    found += [p for p in roof.rglob("*.py") if not any(
        (roof / stage) in p.parents for stage in STAGES)]
    return sorted(found)


def test_the_product_has_modules_to_check():
    assert len(product_modules()) > 100


@pytest.mark.parametrize("path", product_modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_module_and_function_sizes(path: Path):
    text = path.read_text(encoding="utf-8")
    assert text.count("\n") <= MAX_MODULE_LINES, f"{path.name}: {text.count(chr(10))} lines"
    long = [
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(ast.parse(text))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno is not None and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert not long, f"{path.name}: functions over {MAX_FUNCTION_LINES} lines: {', '.join(long)}"
