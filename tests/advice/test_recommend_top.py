"""`recommend --top N`: the table, the CSV and the JSON list the same rows in the same order,
ties included (issue 32: the JSON once cut its own, unsorted list to the table's length).

Cases, on a 16-GPU simulated fleet over 6 hours (rows of equal saving exist: checked first):
- `-o json`'s rows are ordered by saving, largest first, ties by kind, team, namespace and
  workload (the order computed here, independently of `actionable.rank_key`);
- `--top N` for every N gives the first N of that order in the JSON, the CSV and the table
  (the table's saving column, read at a terminal wide enough for it);
- risk rows aside, every `monthly_saving` in the JSON is a number (no unknown among workload rows);
- on a fleet with more rows than the default cut (128 GPUs): `--all` alone lists every row,
  without it the first `DEFAULT_TOP`, and `--all --top N` the first N of every row.
"""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from pathlib import Path

import pytest

from gpuledger.cli import main
from gpuledger.commands._recommend_advice import DEFAULT_TOP

SPAN = ["--start", "2026-11-02T00:00:00Z", "--end", "2026-11-02T06:00:00Z"]


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("top") / "w.duckdb"
    assert main(["--warehouse", str(path), "simulate", "--gpus", "16", "--load", *SPAN]) == 0
    return path


def _run(capsys: pytest.CaptureFixture[str], warehouse: Path, *argv: str) -> str:
    capsys.readouterr()
    assert main(["--warehouse", str(warehouse), "recommend", "--all", *SPAN, *argv]) == 0
    return capsys.readouterr().out


def _key(row: dict) -> tuple:
    return (-float(row["monthly_saving"]), row["kind"], row["team"] or "", row["namespace"] or "",
            row["workload"] or "")


def test_one_order_for_table_csv_and_json(capsys: pytest.CaptureFixture[str], warehouse: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    every = json.loads(_run(capsys, warehouse, "-o", "json"))["recommendations"]
    savings = [round(float(r["monthly_saving"]), 2) for r in every]
    assert any(n > 1 for n in Counter(savings).values()), "the premise: rows of equal saving"
    assert [_key(r) for r in every] == sorted(_key(r) for r in every)
    ties = [i for i in range(1, len(every)) if savings[i] == savings[i - 1]]
    monkeypatch.setenv("COLUMNS", "400")
    for top in sorted({1, *ties, *(i + 1 for i in ties), len(every)}):
        head = every[:top]
        doc = json.loads(_run(capsys, warehouse, "--top", str(top), "-o", "json"))["recommendations"]
        assert [_key(r) for r in doc] == [_key(r) for r in head], top
        rows = list(csv.DictReader(io.StringIO(_run(capsys, warehouse, "--top", str(top), "-o", "csv"))))
        assert [(r["kind"], r["workload"], f"{float(r['monthly_saving']):.2f}") for r in rows] == [
            (r["kind"], r["workload"], f"{float(r['monthly_saving']):.2f}") for r in head], top
        table = _run(capsys, warehouse, "--top", str(top))
        shown = [line for line in table.splitlines() if any(line.startswith(f"{r['team']} ") for r in head)]
        money = [f"{float(r['monthly_saving']):,.2f}" for r in head]
        assert len(shown) == top and all(m in line for m, line in zip(money, shown, strict=True)), table


def test_all_lists_every_row_unless_a_top_is_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "w.duckdb"
    assert main(["--warehouse", str(path), "simulate", "--gpus", "128", "--load", *SPAN]) == 0

    def listed(*argv: str) -> list[dict]:
        capsys.readouterr()
        assert main(["--warehouse", str(path), "recommend", *SPAN, *argv, "-o", "json"]) == 0
        return json.loads(capsys.readouterr().out)["recommendations"]

    every = listed("--all")
    assert len(every) > DEFAULT_TOP, "the premise: more rows than the default cut"
    assert len(listed()) == DEFAULT_TOP
    assert listed("--all", "--top", "3") == every[:3]
