"""Hardening: issued statements nobody can forge, recovery from a killed finalize, and months
with missing data (issue 22, items 1, 12 and 13).

Cases:
- a forged version (v1 copied to v2, a cost changed, its manifest rewritten to match) is not
  adopted by crash recovery (`report due`, finalize): the warehouse keeps v1 only, the refusal
  is audited once however often recovery runs, `report verify` fails naming v2, December's
  report carries no adjustment for November, and issuing November again is refused while the
  forged folder sits there;
- a genuine crash between the rename and the warehouse record is still adopted (audited
  `adopt ok`), while the same crash with the folder rewritten is refused;
- with `reports.signing_key` the manifest carries an HMAC-SHA256 (recomputed here with `hmac`)
  that the warehouse records before the rename; verify passes with the key, fails with another
  key and says it cannot check without one; every issue's manifest chains to the manifest
  sha256 of the issue recorded before it;
- verify reports a recorded issue whose folder is missing;
- a finalize killed after sealing its staging folder leaves it behind; the next finalize
  removes it (audited), issues v1, and a draft staging folder older than a day is removed
  while a fresh one is kept;
- a month with 3 of 30 days of samples: finalize is refused (one `gpuledger: error:` line
  naming 72 of 720 hours, 10.0%), `--allow-partial` finalizes it; the draft's notes, the
  statement and the manifest state the covered range (2024-11-01 00:00 to 2024-11-04 00:00 UTC).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from gpuledger.cli import main
from gpuledger.core.config import Settings
from gpuledger.core.errors import ReportError
from gpuledger.reports import monthly
from gpuledger.reports.adjustments import adjustments_for
from gpuledger.reports.monthly import issue_monthly
from gpuledger.reports.recovery import reconcile, verify_issues
from gpuledger.reports.schedule import run_due
from gpuledger.warehouse import Warehouse
from tests.reports.fleet import load

pytestmark = pytest.mark.slow

NOV, DEC = "2024-11", "2024-12"
AFTER_NOV = datetime(2024, 12, 2, tzinfo=UTC)
AFTER_DEC = datetime(2025, 1, 2, tzinfo=UTC)
KEY = "s3cret-statement-key"


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("statements") / "base.duckdb"
    load(path)
    return path


@pytest.fixture
def warehouse(base: Path, tmp_path: Path) -> Path:
    path = tmp_path / "w.duckdb"
    shutil.copyfile(base, path)
    return path


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _forge(v1: Path, v2: Path, delta: float) -> None:
    """What an attacker with write access to the folder does: copy, edit, re-seal to match."""
    shutil.copytree(v1, v2)
    for path in v2.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    summary = pl.read_csv(v2 / "summary.csv", infer_schema_length=0)
    first_team = summary["line"].to_list().index("team")
    cost = float(summary["cost"][first_team]) + delta
    summary = summary.with_columns(
        pl.when(pl.int_range(pl.len()) == first_team).then(pl.lit(f"{cost:.6f}"))
        .otherwise(pl.col("cost")).alias("cost")
    )
    summary.write_csv(v2 / "summary.csv")
    manifest = json.loads((v2 / "manifest.json").read_text())
    manifest["version"] = 2
    manifest["reason"] = "corrected"
    for entry in manifest["files"]:
        entry["sha256"] = _sha(v2 / entry["path"])
        entry["bytes"] = (v2 / entry["path"]).stat().st_size
    (v2 / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def _audit(path: Path) -> list[tuple[str, str, str]]:
    with Warehouse.open(path, read_only=True) as wh:
        return wh.query("SELECT action, object, result FROM audit_log ORDER BY seq").rows()


def test_a_forged_version_is_never_adopted(warehouse: Path, tmp_path: Path, capsys):
    out, settings = tmp_path / "out", Settings()
    with Warehouse.open(warehouse) as wh:
        issue_monthly(wh, settings, NOV, out, finalize=True, now=AFTER_NOV)
    v1, v2 = out / "period=2024-11" / "v1", out / "period=2024-11" / "v2"
    _forge(v1, v2, delta=1000.0)
    tick = datetime(2024, 12, 1, 7, tzinfo=UTC)
    assert run_due(settings, warehouse, out, tick) == []
    assert run_due(settings, warehouse, out, tick + timedelta(hours=1)) == []
    with Warehouse.open(warehouse) as wh:
        done = reconcile(wh, out, NOV)
        assert done.adopted == [] and "never recorded an intent" in done.refused[2]
        assert wh.query("SELECT version FROM report_issues").rows() == [(1,)]
        assert adjustments_for(wh, settings, DEC).height == 0
        december = issue_monthly(wh, settings, DEC, out, now=AFTER_DEC)
        assert "adjustment" not in pl.read_csv(december.folder / "summary.csv")["line"].to_list()
        with pytest.raises(ReportError, match=r"v2: not an issue the warehouse recorded"):
            issue_monthly(wh, settings, NOV, out, reissue_reason="typo", now=AFTER_DEC)
    refusals = [a for a in _audit(warehouse) if a[0] == "adopt"]
    assert refusals == [("adopt", "report period=2024-11 v2", "refused")]
    verify = ["--warehouse", str(warehouse), "report", "verify", "--period", NOV, "--out", str(out)]
    assert main(verify) == 1
    captured = capsys.readouterr()
    assert "v2: on disk but the warehouse never recorded issuing it" in captured.out
    assert captured.err.count("gpuledger: error:") == 1


def test_a_crash_after_the_rename_is_adopted_only_as_recorded(warehouse: Path, tmp_path: Path):
    out, settings = tmp_path / "out", Settings()
    with Warehouse.open(warehouse) as wh:
        issue_monthly(wh, settings, NOV, out, finalize=True, now=AFTER_NOV)
        wh.con.execute("DELETE FROM report_lines")   # the crash: folder renamed, issue not recorded
        wh.con.execute("DELETE FROM report_issues")
    v1 = out / "period=2024-11" / "v1"
    rewritten = tmp_path / "rewritten"
    _forge(v1, rewritten, delta=-1000.0)
    genuine = tmp_path / "genuine"
    shutil.move(v1, genuine)
    shutil.copytree(rewritten, v1)
    manifest = json.loads((v1 / "manifest.json").read_text())
    manifest["version"] = 1
    (v1 / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    with Warehouse.open(warehouse) as wh:
        refused = reconcile(wh, out, NOV).refused
        assert "differs from the one the warehouse recorded" in refused[1]
    shutil.rmtree(v1)
    shutil.move(genuine, v1)
    with Warehouse.open(warehouse) as wh:
        assert reconcile(wh, out, NOV).adopted == [1]
        assert wh.query("SELECT version, manifest_sha256 FROM report_issues").rows() == [
            (1, _sha(v1 / "manifest.json"))]
        assert verify_issues(wh, out, NOV) == []
    assert ("adopt", "report period=2024-11 v1", "ok") in _audit(warehouse)


def test_signed_and_chained_manifests(warehouse: Path, tmp_path: Path):
    out = tmp_path / "out"
    signed = Settings.model_validate({"reports": {"signing_key": KEY}})
    with Warehouse.open(warehouse) as wh:
        nov = issue_monthly(wh, signed, NOV, out, finalize=True, now=AFTER_NOV)
        dec = issue_monthly(wh, signed, DEC, out, finalize=True, now=AFTER_DEC)
        intents = wh.query("SELECT period, signature, manifest_sha256 FROM report_intents ORDER BY period").rows()
        assert verify_issues(wh, out, NOV, key=KEY) == [] and verify_issues(wh, out, DEC, key=KEY) == []
        wrong = verify_issues(wh, out, NOV, key="another key")
        unkeyed = verify_issues(wh, out, NOV)
    for result, (period, signature, digest) in zip((nov, dec), intents, strict=True):
        manifest = json.loads((result.folder / "manifest.json").read_text())
        body = {k: v for k, v in manifest.items() if k != "signature"}
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
        expected = hmac.new(KEY.encode(), canonical, hashlib.sha256).hexdigest()
        assert (period, manifest["signature"], signature) == (result.period, expected, expected)
        assert digest == _sha(result.folder / "manifest.json")
    first = json.loads((nov.folder / "manifest.json").read_text())
    second = json.loads((dec.folder / "manifest.json").read_text())
    assert first["chain"] is None
    assert second["chain"] == {"previous": "2024-11/v1",
                               "previous_manifest_sha256": _sha(nov.folder / "manifest.json")}
    assert len(wrong) == 1 and "signature does not match" in wrong[0]
    assert len(unkeyed) == 1 and "reports.signing_key is not set" in unkeyed[0]


def test_verify_reports_a_recorded_issue_whose_folder_is_missing(warehouse: Path, tmp_path: Path):
    out = tmp_path / "out"
    with Warehouse.open(warehouse) as wh:
        issue_monthly(wh, Settings(), NOV, out, finalize=True, now=AFTER_NOV)
    shutil.move(out / "period=2024-11" / "v1", tmp_path / "moved")
    with Warehouse.open(warehouse, read_only=True) as wh:
        problems = verify_issues(wh, out, NOV)
    assert problems == [f"{out / 'period=2024-11' / 'v1'}: recorded in the warehouse but missing on disk"]


def test_a_killed_finalize_leaves_staging_that_the_next_run_removes(warehouse: Path, tmp_path: Path, monkeypatch):
    out, settings = tmp_path / "out", Settings()
    period_dir = out / "period=2024-11"

    def killed(staging: Path, target: Path) -> None:
        raise KeyboardInterrupt  # the process dies here: after sealing, before the rename

    monkeypatch.setattr(monthly, "_move_new", killed)
    monkeypatch.setattr(monthly.shutil, "rmtree", lambda *a, **k: None)  # no cleanup: killed
    with Warehouse.open(warehouse) as wh, pytest.raises(KeyboardInterrupt):
        issue_monthly(wh, settings, NOV, out, finalize=True, now=AFTER_NOV)
    monkeypatch.undo()
    left = [p.name for p in period_dir.iterdir()]
    assert len(left) == 1 and left[0].startswith(".staging-")
    old_draft, new_draft = period_dir / ".staging-draft-old", period_dir / ".staging-draft-new"
    old_draft.mkdir()
    new_draft.mkdir()
    two_days_ago = time.time() - 2 * 86400
    os.utime(old_draft, (two_days_ago, two_days_ago))
    with Warehouse.open(warehouse) as wh:
        result = issue_monthly(wh, settings, NOV, out, finalize=True, now=AFTER_NOV)
    assert result.version == 1
    assert sorted(p.name for p in period_dir.iterdir()) == [".staging-draft-new", "v1"]
    audit = _audit(warehouse)
    assert audit[0] == ("discard staging", f"report period=2024-11/{left[0]}", "ok")
    assert audit[-1] == ("finalize", "report period=2024-11 v1", "ok")


def test_a_month_with_three_days_of_data_is_not_finalized_silently(tmp_path: Path, capsys):
    path, out = tmp_path / "partial.duckdb", tmp_path / "out"
    load(path, until=datetime(2024, 11, 4, tzinfo=UTC))
    args = ["--warehouse", str(path), "report", "monthly", "--period", NOV, "--out", str(out)]
    covered = "samples in 72 of 720 hours (10.0%), from 2024-11-01 00:00 to 2024-11-04 00:00 UTC"
    assert main(args) == 0
    assert f"note: Data coverage: {covered}." in capsys.readouterr().out
    assert covered in (out / "period=2024-11" / "draft" / "statements" / "fleet.html").read_text()
    assert main([*args, "--finalize"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        "gpuledger: error: period 2024-11: only 72 of 720 hours (10.0%) have samples")
    assert "--allow-partial" in err[0]
    assert not (out / "period=2024-11" / "v1").exists()
    assert main([*args, "--finalize", "--allow-partial"]) == 0
    v1 = out / "period=2024-11" / "v1"
    manifest = json.loads((v1 / "manifest.json").read_text())
    assert manifest["coverage"] == {"hours": 72, "of_hours": 720, "ratio": 0.1,
                                    "first": "2024-11-01T00:00:00Z", "end": "2024-11-04T00:00:00Z"}
    statement = (v1 / "statements" / "fleet.html").read_text()
    assert covered in statement and "with --allow-partial" in statement
