"""Storing the roll-up under the current rules, and what a warehouse from before the rules
were recorded does (issue 28, docs/decisions/0147), on the fleet of `tests.analytics.rules_fleet`.

- `gpuledger rollup` re-rolls the hours stored under other rules, says from which rules, and
  the bill then reads the roll-up again (source `rollup`, no note) with the numbers of the new
  rules; a second run re-rolls nothing and leaves every stored row as it was (idempotent); after
  compaction it refuses in one line;
- `gpuledger compact` re-rolls the hours whose raw samples it is about to remove when they were
  rolled up under other rules, says so, and the bill afterwards is the new rules' from the roll-up;
- `gpuledger status` lists the roll-up's runs by rules, the current one marked, the stale one
  with its raw samples kept;
- rows from before v010 (no rules recorded): billed from raw samples while there are any (a
  note), after compaction billed as stored, labelled with no rules and MIG basis `unknown`;
- migration v010 on a v009 file keeps its rows (rules NULL) and adds the two tables;
- the stamps: one `rollup_hours` row per rolled-up hour, every roll-up row with the
  fingerprint, its rules in `rule_sets`.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from gpuledger.analytics.billing.bill import Bill, compute_bill
from gpuledger.analytics.usage.rollup import compact_raw_samples
from gpuledger.cli import main
from gpuledger.core.config import Settings
from gpuledger.core.rules import Rules
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.schema import LATEST
from tests.analytics.rules_fleet import (
    BILLED,
    RULE_CHANGES,
    WHOLE,
    Expected,
    assert_bill,
    fleet,
    rolled_fleet,
    settings,
)
from tests.foundation.released_files import released_file

__all__ = ["fleet", "rolled_fleet"]  # fixtures

NEW = settings(**RULE_CHANGES["threshold"], sharing={"mig_share_basis": "memory"})
NEW_EXPECTED = Expected(175, "memory")
CONFIG = ("price_book:\n  - model: H100-80GB\n    unit_price: 3.0\n"
          "idle:\n  threshold: 0.15\nsharing:\n  mig_share_basis: memory\n")
SPAN = ("--start", "2026-11-01T00:00:00Z", "--end", "2026-11-03T00:00:00Z")


def _bill(path: Path, rules: Settings, **kw: Any) -> Bill:
    with Warehouse.open(path, read_only=True) as wh:
        return compute_bill(wh, BILLED, rules, ("team",), **kw)


def _run(capsys: pytest.CaptureFixture[str], path: Path, config: Path, *args: str) -> tuple[int, str, str]:
    code = main(["--warehouse", str(path), "--config", str(config), *args])
    out, err = capsys.readouterr()
    return int(code or 0), out, err


def _rows(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    with Warehouse.open(path, read_only=True) as wh:
        return {t: wh.query(f"SELECT * FROM {t} ORDER BY ALL").rows()
                for t in ("card_hours_hourly", "allocations", "rollup_hours", "rule_sets")}


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "gpuledger.yaml"
    path.write_text(CONFIG)
    return path


def test_the_rollup_is_stamped_with_its_rules(fleet: Path):
    fingerprint = Rules.of(settings()).rollup_fingerprint
    with Warehouse.open(fleet, read_only=True) as wh:
        hours = wh.query("SELECT ts, rules FROM rollup_hours ORDER BY ts")
        assert hours.height == 24 * 3 and set(hours["rules"]) == {fingerprint}
        assert hours["ts"][0] == WHOLE.start and hours["ts"][-1] == WHOLE.end - timedelta(hours=1)
        for table in ("card_hours_hourly", "allocations"):
            assert wh.query(f"SELECT DISTINCT rules FROM {table}")["rules"].to_list() == [fingerprint]
        stored = wh.query("SELECT fingerprint, CAST(rules AS VARCHAR) AS rules, first_used FROM rule_sets")
    assert stored.rows() == [(fingerprint, Rules.of(settings()).to_json(), WHOLE.start)]


def test_rollup_command_stores_the_new_rules_once(fleet: Path, config: Path, capsys: pytest.CaptureFixture[str]):
    old = Rules.of(settings()).rollup_fingerprint
    assert _bill(fleet, NEW).source == "raw"
    code, out, err = _run(capsys, fleet, config, "rollup", *SPAN, "-o", "json")
    document = json.loads(out)
    assert code == 0 and err == "" and document["rules"] == Rules.of(NEW).rollup_fingerprint
    assert [(r["start"], r["end"], r["hours"], r["from_rules"]) for r in document["rerolled"]] == [
        ("2026-11-01T00:00:00Z", "2026-11-03T00:00:00Z", 48, old)]
    assert document["days"] == 2
    bill = _bill(fleet, NEW)
    assert bill.source == "rollup" and not bill.notes
    assert_bill(bill, NEW_EXPECTED)
    assert _bill(fleet, NEW, grain="lines").source == "rollup"
    stored = _rows(fleet)
    code, out, _ = _run(capsys, fleet, config, "rollup", *SPAN)
    assert code == 0 and "already under the current rules" in out and len(out.strip().splitlines()) == 1
    assert _rows(fleet) == stored
    # the third day, outside the span, is still the old rules'
    with Warehouse.open(fleet, read_only=True) as wh:
        assert wh.scalar("SELECT count(*) FROM rollup_hours WHERE rules = ?", [old]) == 24


def test_rollup_command_refuses_hours_without_raw_samples(fleet: Path, config: Path,
                                                          capsys: pytest.CaptureFixture[str]):
    with Warehouse.open(fleet) as wh:
        compact_raw_samples(wh, settings(retention={"raw_days": 1}), WHOLE.end + timedelta(hours=20))
    before = _rows(fleet)
    code, out, err = _run(capsys, fleet, config, "rollup", *SPAN)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "raw samples of 2026-11-01..11-02 are gone" in err and "--as-computed" in err
    assert _rows(fleet) == before


def test_compact_rerolls_stale_hours_before_removing_their_samples(fleet: Path, config: Path,
                                                                    capsys: pytest.CaptureFixture[str]):
    code, out, err = _run(capsys, fleet, config, "compact", "--raw-days", "1", "-o", "json")
    document = json.loads(out)
    assert code == 0 and document["removed_rows"] > 0
    assert document["rerolled_hours"] == 3 * 24 - 2  # all but the margin's hours at the end
    assert "rolled up 70 hours again under the current rules" in err and len(err.strip().splitlines()) == 1
    bill = _bill(fleet, NEW)
    assert bill.source == "rollup" and not bill.notes
    assert_bill(bill, NEW_EXPECTED)


def test_status_lists_the_rollup_by_rules(fleet: Path, config: Path, capsys: pytest.CaptureFixture[str]):
    code, _, _ = _run(capsys, fleet, config, "rollup", "--start", "2026-11-01T00:00:00Z",
                      "--end", "2026-11-02T00:00:00Z")
    assert code == 0
    code, out, _ = _run(capsys, fleet, config, "status", "-o", "json")
    runs = json.loads(out)["rollup_rules"]
    assert [(r["from"], r["to"], r["rules"]) for r in runs] == [
        ("2026-11-01T00:00:00Z", "2026-11-02T00:00:00Z", Rules.of(NEW).rollup_fingerprint),
        ("2026-11-02T00:00:00Z", "2026-11-04T00:00:00Z", Rules.of(settings()).rollup_fingerprint),
    ]
    assert runs[0]["state"] == "current" and "raw samples kept" in runs[1]["state"]
    assert "MIG share by memory" in runs[0]["description"] and "idle < 5%" in runs[1]["description"]
    code, out, _ = _run(capsys, fleet, config, "status")
    assert "hourly roll-up by rules" in out and Rules.of(NEW).rollup_fingerprint in out


def _forget_rules(path: Path) -> None:
    """The roll-up as a warehouse from before v010 holds it: no rules recorded."""
    with Warehouse.open(path) as wh:
        for table in ("card_hours_hourly", "allocations"):
            wh.execute(f"UPDATE {table} SET rules = NULL")
        wh.execute("DELETE FROM rollup_hours")
        wh.execute("DELETE FROM rule_sets")


def test_rows_from_before_the_rules_were_recorded(fleet: Path):
    _forget_rules(fleet)
    bill = _bill(fleet, settings())
    assert bill.source == "raw" and "rules not recorded" in bill.notes[0]
    assert_bill(bill, Expected(130, "compute"))
    with Warehouse.open(fleet) as wh:
        compact_raw_samples(wh, settings(retention={"raw_days": 1}), WHOLE.end + timedelta(hours=20))
    for kw in ({}, {"as_computed": True}):
        bill = _bill(fleet, settings(), **kw)  # type: ignore[arg-type]
        assert bill.source == "rollup" and bill.rules is None and bill.mig_share_basis == "unknown"
        assert "rolled up before rules were recorded" in bill.warnings[0]
        document = bill.to_dict()
        assert document["rules"] is None and document["mig_share_basis"] == "unknown"
        assert bill.fleet_cost == 2 * 48 * 3.0  # the stored numbers (the default rules')


def test_v010_on_a_v009_file_keeps_its_rows(tmp_path: Path):
    path = tmp_path / "v9.duckdb"
    con = released_file(path, 9)
    con.execute(
        "INSERT INTO card_hours_hourly (ts, uuid, gpu_i_id, node, model, sharing_mode, share, held_hours, "
        "card_hours, idle_card_hours, held_idle_card_hours) VALUES "
        "('2026-11-01 00:00:00+00', 'GPU-A', -1, 'n', 'H100-80GB', 'exclusive', 1, 1, 1, 0, 0)"
    )
    con.close()
    with Warehouse.open(path) as wh:
        assert LATEST >= 10 and wh.scalar("SELECT max(version) FROM schema_version") == LATEST
        assert wh.query("SELECT uuid, card_hours, rules FROM card_hours_hourly").rows() == [("GPU-A", 1.0, None)]
        assert wh.count("rollup_hours") == 0 and wh.count("rule_sets") == 0
