"""A finalized report states the rules it was issued under (docs/decisions/0150, issue 28).

Expected fingerprints and descriptions are computed here from the settings (`core.rules`), not
read back from the code under test.

Cases, November 2024 of the small fleet finalized under config A (the defaults):
- the manifest records A's rules (fingerprint, description, the values that rebuild them);
- every statement (HTML, and each PDF read back with pdftotext) carries one line
  "Computed under: <A's description>; rules <A's fingerprint>.", and summary.csv a `rules`
  column holding A's fingerprint on every line; `report monthly` prints the line too;
- `report verify` under config A: no note; under config B (idle < 15 %): still passes (exit 0),
  with one note naming v1's rules and the current ones;
- an issue whose manifest predates recorded rules reads as "rules not recorded";
- FOCUS: the split allocation's method names the bill's MIG share basis, not the settings'.
"""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from gpuledger.cli import main
from gpuledger.core.config import Settings
from gpuledger.core.rules import Rules
from gpuledger.reports.billing import month_bill, summary_lines
from gpuledger.reports.focus import focus_frame
from gpuledger.reports.manifest import rules_notes
from gpuledger.reports.monthly import issue_monthly
from gpuledger.warehouse import Warehouse

pytestmark = pytest.mark.slow

NOV = "2024-11"
AFTER_NOV = datetime(2024, 12, 2, tzinfo=UTC)
A = Settings()
B = Settings.model_validate({"idle": {"threshold": 0.15}})


@pytest.fixture(scope="module")
def issued(base_warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    import shutil

    folder = tmp_path_factory.mktemp("report-rules")
    path = folder / "warehouse.duckdb"
    shutil.copyfile(base_warehouse, path)
    out = folder / "out"
    with Warehouse.open(path) as wh:
        issue_monthly(wh, A, NOV, out, finalize=True, now=AFTER_NOV)
    return {"warehouse": path, "out": out, "v1": out / f"period={NOV}" / "v1", "folder": folder}


def test_manifest_records_the_rules(issued: dict[str, Path]) -> None:
    manifest = json.loads((issued["v1"] / "manifest.json").read_text())
    rules = Rules.of(A)
    assert manifest["rules"]["fingerprint"] == rules.fingerprint
    assert manifest["rules"]["description"] == rules.describe()
    assert Rules.from_dict(manifest["rules"]["rules"]) == rules


def test_every_statement_and_the_summary_state_the_rules(issued: dict[str, Path]) -> None:
    rules = Rules.of(A)
    line = f"Computed under: {rules.describe()}; rules {rules.fingerprint}."
    statements = issued["v1"] / "statements"
    pages = sorted(statements.glob("*.html"))
    assert [p.stem for p in pages] == ["fleet", "team-nlp", "team-speech", "team-vision"]
    for page in pages:
        html = page.read_text()
        assert html.count('id="computed-under"') == 1, page.name
        assert line.replace(">", "&gt;").replace("<", "&lt;") in html, page.name
        text = subprocess.run(["pdftotext", "-layout", str(page.with_suffix(".pdf")), "-"],
                              capture_output=True, text=True, check=True).stdout
        assert "Computed under:" in text and f"rules {rules.fingerprint}" in text, page.name
    summary = pl.read_csv(issued["v1"] / "summary.csv", infer_schema_length=0)
    assert summary.height > 0 and summary["rules"].unique().to_list() == [rules.fingerprint]


def _config(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def test_verify_notes_other_rules(issued: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    verify = ["--warehouse", str(issued["warehouse"]), "report", "verify", "--period", NOV,
              "--out", str(issued["out"])]
    same = _config(issued["folder"], "a.yaml", "currency: USD\n")
    assert main(["--config", str(same), *verify]) == 0
    assert "note:" not in capsys.readouterr().out
    other = _config(issued["folder"], "b.yaml", "idle:\n  threshold: 0.15\n")
    assert main(["--config", str(other), *verify]) == 0  # informational, not a failure
    out = capsys.readouterr().out
    (note,) = [line for line in out.splitlines() if line.startswith("note:")]
    assert f"v1 was issued under rules {Rules.of(A).fingerprint}" in note
    assert f"current settings' rules are {Rules.of(B).fingerprint}" in note
    assert "matches its manifest" in out


def test_draft_prints_the_rules_line(issued: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(issued["folder"], "b2.yaml", "idle:\n  threshold: 0.15\n")
    args = ["--config", str(config), "--warehouse", str(issued["warehouse"]), "report", "monthly",
            "--period", NOV, "--out", str(issued["folder"] / "drafts")]
    assert main(args) == 0
    assert f"rules {Rules.of(B).fingerprint}." in capsys.readouterr().out


def test_an_issue_without_recorded_rules(tmp_path: Path) -> None:
    v1 = tmp_path / f"period={NOV}" / "v1"
    v1.mkdir(parents=True)
    (v1 / "manifest.json").write_text(json.dumps({"status": "final", "period": NOV, "version": 1}))
    (note,) = rules_notes(tmp_path, NOV, Rules.of(A))
    assert note.startswith("v1 was issued under rules not recorded;")


def test_focus_names_the_bills_mig_basis(base_warehouse: Path) -> None:
    memory = Settings.model_validate({"sharing": {"mig_share_basis": "memory"}})
    with Warehouse.open(base_warehouse, read_only=True) as wh:
        bill = month_bill(wh, A, NOV)

    def methods(rules: Rules | None) -> set[str]:
        frame = focus_frame(bill.detail, summary_lines(bill), bill.window, A, bill.currency, rules=rules)
        return set(frame.filter(pl.col("x_SharingMode") == "mig")["AllocatedMethodId"].drop_nulls().to_list())

    assert methods(bill.raw.rules) == {"gpuledger/mig-compute-slices"}
    # the settings say compute; numbers computed under the memory basis are named so
    assert methods(Rules.of(memory)) == {"gpuledger/mig-memory-slices"}
    assert methods(None) == {"gpuledger/mig-unknown-slices"}
