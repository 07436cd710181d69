"""Reports read the warehouse only through `warehouse.queries.reports`, and stay below the roof.

Cases:
- no module of `reports/` runs SQL of its own (no `.query(`, `.scalar(`, `.con`, `duckdb`, SQL
  keywords in its code) and none imports the CLI roof (`gpuledger` itself, `gpuledger.cli`,
  `gpuledger.commands`);
- the manifest's code version is the installed distribution's version;
- the named queries answer from `report_issues` / `report_lines`: issued periods, the latest
  version per period, the recorded issues of one period by version, an issue's own lines
  (adjustments excluded) and the adjustments it carried for one earlier month.
"""

from __future__ import annotations

import ast
import re
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

import polars as pl

from gpuledger.reports.billing import SUMMARY_SCHEMA
from gpuledger.reports.manifest import code_version
from gpuledger.warehouse import LoadBatch, Warehouse
from gpuledger.warehouse.queries import reports as q

REPORTS = Path(__file__).resolve().parents[2] / "reports"
SQL = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE)\s", re.IGNORECASE)
ROOF = ("gpuledger.cli", "gpuledger.commands", "gpuledger.pipeline")


def _code_strings(tree: ast.AST) -> list[str]:
    """String constants that are not docstrings."""
    docstrings = {
        id(node.body[0].value) for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.FunctionDef | ast.ClassDef)
        and node.body and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        n.value for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings
    ]


def test_reports_run_no_sql_and_never_import_the_roof():
    modules = sorted(REPORTS.glob("*.py"))
    assert len(modules) > 10
    for path in modules:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                assert node.attr not in {"query", "scalar", "con", "sql"}, f"{path.name}: .{node.attr}"
            if isinstance(node, ast.ImportFrom):
                assert node.module != "gpuledger", f"{path.name}: imports the roof package"
                assert not (node.module or "").startswith(ROOF), f"{path.name}: {node.module}"
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
                assert "duckdb" not in names and "gpuledger" not in names, f"{path.name}: {names}"
        for text in _code_strings(tree):
            assert not SQL.search(text), f"{path.name}: SQL {text[:60]!r}"


def test_manifest_names_the_installed_version():
    assert code_version()["gpuledger"] == metadata.version("gpuledger")


def _issue(period: str, version: int) -> dict:
    return {
        "period": period, "version": version, "finalized_at": datetime(2025, 1, 2, tzinfo=UTC),
        "manifest_sha256": f"m{period}{version}", "inputs_sha256": "i", "fleet_cost": 100.0 * version,
        "reason": None if version == 1 else "late data", "path": f"/r/{period}/v{version}",
    }


def _line(period: str, version: int, line_no: int, line: str, for_period: str, *, cost: float) -> dict:
    amounts = {name: 0.0 for name, kind in SUMMARY_SCHEMA.items() if kind == pl.Float64}
    return {
        **amounts, "period": period, "version": version, "line_no": line_no, "line": line,
        "for_period": for_period, "team": "nlp", "model": "H100-80GB", "sharing_mode": "exclusive",
        "cost": cost,
    }


def test_named_queries_answer_from_the_issue_tables(tmp_path: Path):
    issues = pl.DataFrame([_issue("2024-11", 1), _issue("2024-11", 2), _issue("2024-12", 1)])
    lines = pl.DataFrame([
        _line("2024-11", 1, 0, "team", "2024-11", cost=10.0),
        _line("2024-11", 2, 0, "team", "2024-11", cost=12.0),
        _line("2024-11", 2, 1, "unallocated", "2024-11", cost=3.0),
        _line("2024-12", 1, 0, "team", "2024-12", cost=20.0),
        _line("2024-12", 1, 1, "adjustment", "2024-11", cost=2.0),
        _line("2024-12", 1, 2, "adjustment", "2024-10", cost=5.0),
    ])
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        assert q.issued_periods(wh) == set()
        assert q.latest_issue_versions(wh) == {}
        wh.load(LoadBatch({"report_issues": issues, "report_lines": lines}))
        assert q.issued_periods(wh) == {"2024-11", "2024-12"}
        assert q.latest_issue_versions(wh) == {"2024-11": 2, "2024-12": 1}
        recorded = q.recorded_issues(wh, "2024-11")
        assert list(recorded) == [1, 2]
        assert recorded[2]["manifest_sha256"] == "m2024-112"
        assert recorded[2]["reason"] == "late data"
        assert q.recorded_issues(wh, "2024-10") == {}
        own = q.issued_own_lines(wh, "2024-12", 1)
        assert own.select("line", "cost").rows() == [("team", 20.0)]
        assert sorted(q.issued_own_lines(wh, "2024-11", 2)["cost"].to_list()) == [3.0, 12.0]
        carried = q.carried_adjustments(wh, "2024-12", 1, "2024-11")
        assert carried.select("line", "for_period", "cost").rows() == [("adjustment", "2024-11", 2.0)]
        assert q.carried_adjustments(wh, "2024-11", 2, "2024-10").height == 0
