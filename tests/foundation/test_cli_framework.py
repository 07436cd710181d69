"""The CLI framework (issue 16, part 6): Click + rich, one output layer, completion, periods,
plan ids, usage errors.

- every format of `bill` carries the same data: csv rows equal the JSON lines, yaml equals the
  JSON document; `--format json` is byte-identical to `-o json`;
- `completion bash|zsh|fish` prints each shell's script, and the script's callback answers
  (`_GPULEDGER_COMPLETE=bash_complete` completes `pl` to `plans`);
- no window means the last complete month, computed here from the clock independently;
- plan ids: full, unique prefix, `latest`; an ambiguous prefix is one line naming both;
- Click's usage errors are one `gpuledger: error:` line with exit 2;
- a table under `COLUMNS=60` fits 60 columns and keeps every row;
- global options work after the verb, and the empty-window warning names the covered range
  for `idle` too.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from gpuledger.cli import main
from gpuledger.optimizer.plan.contract import Effect, Plan, QuotaChanges, SolverInfo, fingerprint_of
from gpuledger.optimizer.plan.store import save_plan
from gpuledger.warehouse import Warehouse

REPO = Path(__file__).resolve().parents[2]
SPAN = ["--start", "2026-11-02T00:00:00Z", "--end", "2026-11-02T06:00:00Z"]


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "w.duckdb"
    code = main(["--warehouse", str(path), "simulate", "--gpus", "8", "--load", *SPAN])
    assert code == 0
    return path


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_formats_carry_the_same_data(warehouse: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["--warehouse", str(warehouse), "bill", *SPAN, "--by", "team,model"]
    code, as_json, _ = _cli(capsys, *base, "-o", "json")
    assert code == 0
    document = json.loads(as_json)
    _, alias, _ = _cli(capsys, *base, "--format", "json")
    assert alias == as_json  # the old flag, byte for byte
    _, as_csv, _ = _cli(capsys, *base, "-o", "csv")
    rows = list(csv.DictReader(io.StringIO(as_csv)))
    lines = document["lines"]
    assert len(rows) == len(lines) > 1
    for row, line in zip(rows, lines, strict=True):
        assert (row["team"], row["model"] or None) == (line["team"], line["model"])  # csv: empty = null
        assert float(row["cost"]) == pytest.approx(line["cost"])
        assert float(row["card_hours"]) == pytest.approx(line["card_hours"])
    _, as_yaml, _ = _cli(capsys, *base, "-o", "yaml")
    assert yaml.safe_load(as_yaml) == document
    _, wide, _ = _cli(capsys, *base, "-o", "wide")
    _, table, _ = _cli(capsys, *base)
    assert "unpriced" in wide and "unpriced" not in table  # wide = every column
    # A person reads "GPU-hours" (issue #15's one term); the csv/json keys scripts read stay.
    printed = table.splitlines()
    rule = next(i for i, line in enumerate(printed) if line.startswith("─"))
    header = " ".join(printed[1:rule]).split()  # headers wrap at their words over several lines
    assert printed[rule - 1].split()[:3] == ["team", "model", "GPU-hours"] and "card_hours" not in table + wide
    assert {"cost", "(USD)", "idle"} <= set(header)  # money headers carry the currency
    assert "held idle GPU-hours" in wide and "Fleet: 48.000 GPU-hours" in table
    assert {"card_hours", "idle_card_hours"} <= set(rows[0]) and "idle_card_hours" in lines[0]


def test_table_fits_a_narrow_terminal(warehouse: Path) -> None:
    env = {**os.environ, "COLUMNS": "60", "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "gpuledger", "--warehouse", str(warehouse), "bill",
                           *SPAN], capture_output=True, text=True, env=env, check=True, timeout=300)
    lines = done.stdout.splitlines()
    table = lines[1:-2]  # between the title and the Fleet / Data-as-of footer
    assert table and max(len(line) for line in table) <= 60, table
    assert "\x1b[" not in done.stdout  # a pipe gets no ANSI codes
    teams = json.loads(subprocess.run(
        [sys.executable, "-m", "gpuledger", "--warehouse", str(warehouse), "bill", *SPAN, "-o", "json"],
        capture_output=True, text=True, env=env, check=True, timeout=300).stdout)["lines"]
    for line in teams:  # every team is still there (folded cells keep their first characters)
        assert any(row.startswith(line["team"][:6]) for row in table), line["team"]


@pytest.mark.parametrize(("shell", "marker"), [
    ("bash", "complete -o nosort -F"), ("zsh", "#compdef gpuledger"),
    ("fish", "complete --no-files --command gpuledger"),
])
def test_completion_scripts(shell: str, marker: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _cli(capsys, "completion", shell)
    assert code == 0 and marker in out and "_GPULEDGER_COMPLETE" in out


def test_completion_callback_answers() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "_GPULEDGER_COMPLETE": "bash_complete",
           "COMP_WORDS": "gpuledger pl", "COMP_CWORD": "1"}
    done = subprocess.run([sys.executable, "-m", "gpuledger"], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0
    assert "plain,plans" in done.stdout.splitlines()


def test_default_period_is_the_last_complete_month(warehouse: Path, capsys) -> None:
    now = datetime.now(UTC)
    expected = f"{now.year - 1}-12" if now.month == 1 else f"{now.year}-{now.month - 1:02d}"
    code, out, _ = _cli(capsys, "--warehouse", str(warehouse), "bill", "-o", "json")
    assert code == 0 and json.loads(out)["period"] == expected
    code, out, _ = _cli(capsys, "--warehouse", str(warehouse), "bill", "--period", "last", "-o", "json")
    assert code == 0 and json.loads(out)["period"] == expected


def test_idle_warns_on_an_empty_window_with_the_covered_range(warehouse: Path, capsys) -> None:
    code, _, err = _cli(capsys, "--warehouse", str(warehouse), "idle", "--start", "2026-10-01",
                        "--end", "2026-10-02", "-o", "json")
    warnings = [line for line in err.splitlines() if line.startswith("gpuledger: warning:")]
    assert code == 0 and len(warnings) == 1
    assert "no samples in [2026-10-01T00:00Z, 2026-10-02T00:00Z)" in warnings[0]
    assert "the warehouse covers 2026-11-02T00:00Z .. 2026-11-02T05:59Z" in warnings[0]


def _plan(name: str, created: datetime) -> Plan:
    return Plan(
        id=f"quota-{name}", kind="quota", created_at=created, fingerprint=fingerprint_of(()),
        changes=QuotaChanges(quotas=(), cluster_queues=()),
        effect=Effect(), solver=SolverInfo(status="OPTIMAL", wall_s=0.1, time_limit_s=30),
    )


def test_plan_ids_by_prefix_and_latest(tmp_path: Path, capsys) -> None:
    path = tmp_path / "plans.duckdb"
    with Warehouse.open(path) as wh:
        save_plan(wh, _plan("abc111", datetime(2026, 11, 1, tzinfo=UTC)))
        save_plan(wh, _plan("abc222", datetime(2026, 11, 2, tzinfo=UTC)))
        save_plan(wh, _plan("xyz333", datetime(2026, 11, 3, tzinfo=UTC)))
    show = ["--warehouse", str(path), "plans", "show"]
    code, out, _ = _cli(capsys, *show, "quota-abc1", "-o", "json")
    assert code == 0 and json.loads(out)["id"] == "quota-abc111"
    code, out, _ = _cli(capsys, *show, "latest", "-o", "json")
    assert code == 0 and json.loads(out)["id"] == "quota-xyz333"
    code, _, err = _cli(capsys, *show, "quota-abc")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "ambiguous" in err and "quota-abc111" in err and "quota-abc222" in err
    code, _, err = _cli(capsys, *show, "nope")
    assert code == 1 and "not found" in err
    code, out, _ = _cli(capsys, "--warehouse", str(path), "plans", "list", "-o", "csv")
    ids = [row["id"] for row in csv.DictReader(io.StringIO(out))]
    assert ids == ["quota-xyz333", "quota-abc222", "quota-abc111"]


@pytest.mark.parametrize("argv", [
    ["bill", "--nope"], ["bill", "-o", "xml"], ["plans", "show"], ["frobnicate"],
    ["completion", "tcsh"],
])
def test_usage_errors_are_one_line_exit_2(argv: list[str], capsys) -> None:
    code, out, err = _cli(capsys, *argv)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuledger: error: ")


def test_global_options_after_the_verb(warehouse: Path, capsys) -> None:
    code, out, _ = _cli(capsys, "bill", *SPAN, "-o", "json", "--warehouse", str(warehouse))
    assert code == 0 and json.loads(out)["fleet_card_hours"] == pytest.approx(8 * 6)
