"""A bill after a rule changed under a stored roll-up (issue 28, docs/decisions/0147).

On the hand-built fleet of `tests.analytics.rules_fleet`, rolled up under the default rules,
each rule the roll-up depends on (idle threshold, minimum run, activity rule, MIG share basis)
is changed, and the discounts, which it does not depend on. Checked against the hand
computation (arithmetic in `rules_fleet`, never the product):

- raw samples still there: the bill equals the computation under the new rules (from raw
  samples, with one note naming both rule sets and `gpuledger rollup`), at the device grain
  and at the lines grain the command uses; a discount change is billed from the roll-up;
- after compaction (raw samples gone): refused in one line naming both rule sets and the ways
  out; `--as-computed` bills the stored numbers under the stored rules and says so, the
  capacity rows under the stored basis too (one bill, one basis); a discount change still bills;
- the roll-up of half the window stored under the new rules: the other half from raw samples,
  source `mixed`, the numbers those of the new rules;
- every bill names the basis its numbers were computed under (`assert_labelled_honestly`);
- the command line: the note on stderr, the refusal as one line and exit 2, `--as-computed`.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from gpuledger.analytics.billing.bill import Bill, compute_bill
from gpuledger.analytics.usage.rollup import compact_raw_samples, reroll_batch
from gpuledger.cli import main
from gpuledger.core.config import Settings
from gpuledger.core.errors import InputError
from gpuledger.core.rules import Rules
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse
from tests.analytics.rules_fleet import (
    BILLED,
    RULE_CHANGES,
    WHOLE,
    Expected,
    assert_bill,
    assert_labelled_honestly,
    fleet,
    rolled_fleet,
    settings,
)

__all__ = ["fleet", "rolled_fleet"]  # fixtures

DEFAULT = Expected(130, "compute")
EXPECTED = {
    "threshold": Expected(175, "compute"),
    "min_run": Expected(90, "compute"),
    "activity": Expected(100, "compute"),
    "share_basis": Expected(130, "memory"),
}
GRAINS = ("device", "lines")


def _bill(path: Path, rules: Settings, grain: str = "device", **kw: Any) -> Bill:
    with Warehouse.open(path, read_only=True) as wh:
        return compute_bill(wh, BILLED, rules, ("team",), grain=grain, **kw)  # type: ignore[arg-type]


def _compact(path: Path) -> None:
    """Keep one day of raw samples on the evening of the fourth day: the billed days' go."""
    with Warehouse.open(path) as wh:
        settings_now = settings(retention={"raw_days": 1})
        stats = compact_raw_samples(wh, settings_now, WHOLE.end + timedelta(hours=20))
        assert stats.removed_before is not None and stats.removed_before > BILLED.end - timedelta(hours=3)


def test_unchanged_rules_bill_the_rollup(fleet: Path):
    for grain in GRAINS:
        bill = _bill(fleet, settings(), grain)
        assert bill.source == "rollup" and not bill.notes and not bill.warnings
        assert bill.rules == Rules.of(settings()) and not bill.as_computed
        assert_bill(bill, DEFAULT)


@pytest.mark.parametrize("change", list(RULE_CHANGES))
def test_a_rule_changed_after_the_rollup_bills_under_the_new_rules(fleet: Path, change: str):
    new = settings(**RULE_CHANGES[change])
    old_fp, new_fp = Rules.of(settings()).rollup_fingerprint, Rules.of(new).rollup_fingerprint
    assert old_fp != new_fp
    for grain in GRAINS:
        bill = _bill(fleet, new, grain)
        assert_bill(bill, EXPECTED[change])
        assert bill.source == "raw" and bill.rules == Rules.of(new)
        (note,) = bill.notes
        assert old_fp in note and new_fp in note and "gpuledger rollup --start" in note
        assert "\n" not in note


def test_a_discount_changed_after_the_rollup_bills_from_the_rollup(fleet: Path):
    new = settings(sharing={"discounts": {"exclusive": 1.0, "mig": 0.5, "timeslice": 0.8, "vgpu": 0.85}})
    assert Rules.of(new).rollup_fingerprint == Rules.of(settings()).rollup_fingerprint
    bill = _bill(fleet, new, "lines")
    assert bill.source == "rollup" and not bill.notes
    assert_bill(bill, Expected(130, "compute", mig_factor=0.5))
    assert bill.to_dict()["rules"]["discounts"]["mig"] == 0.5


@pytest.mark.parametrize("change", list(RULE_CHANGES))
def test_after_compaction_a_changed_rule_is_refused_or_billed_as_computed(fleet: Path, change: str):
    _compact(fleet)
    new = settings(**RULE_CHANGES[change])
    old_fp, new_fp = Rules.of(settings()).rollup_fingerprint, Rules.of(new).rollup_fingerprint
    for grain in GRAINS:
        with pytest.raises(InputError) as refused:
            _bill(fleet, new, grain)
        message = str(refused.value)
        assert "\n" not in message and old_fp in message and new_fp in message
        assert "--as-computed" in message and "raw samples are gone" in message
        bill = _bill(fleet, new, grain, as_computed=True)
        assert_bill(bill, DEFAULT)  # the stored numbers, labelled with the stored basis
        assert bill.as_computed and bill.rules is not None
        assert bill.rules.rollup_fingerprint == old_fp and bill.rules.pricing == Rules.of(new).pricing
        assert bill.to_dict()["rules"]["as_computed"] is True


def test_after_compaction_a_discount_change_still_bills(fleet: Path):
    _compact(fleet)
    new = settings(sharing={"discounts": {"mig": 0.5}})
    assert_bill(_bill(fleet, new, "lines"), Expected(130, "compute", mig_factor=0.5))


def test_half_the_window_stored_under_the_new_rules_bills_mixed(fleet: Path):
    new = settings(**RULE_CHANGES["share_basis"])
    with Warehouse.open(fleet) as wh:
        wh.load(reroll_batch(wh, Window(BILLED.start, BILLED.start + timedelta(days=1)), Rules.of(new)))
    for grain in GRAINS:
        bill = _bill(fleet, new, grain)
        assert bill.source == "mixed" and len(bill.notes) == 1
        assert "the roll-up of 2026-11-02 was computed under" in bill.notes[0]
        assert_bill(bill, EXPECTED["share_basis"])


def test_as_computed_refuses_two_stored_rule_sets(fleet: Path):
    new = settings(**RULE_CHANGES["threshold"])
    with Warehouse.open(fleet) as wh:
        wh.load(reroll_batch(wh, Window(BILLED.start, BILLED.start + timedelta(days=1)), Rules.of(new)))
    with pytest.raises(InputError, match="2 rule sets") as refused:
        _bill(fleet, new, as_computed=True)
    assert "\n" not in str(refused.value)
    with pytest.raises(InputError, match="not with --source raw"):
        _bill(fleet, new, as_computed=True, source="raw")


def _cli(capsys: pytest.CaptureFixture[str], path: Path, config: Path, *args: str) -> tuple[int, str, str]:
    code = main(["--warehouse", str(path), "--config", str(config), "bill", "--start", "2026-11-01T00:00:00Z",
                 "--end", "2026-11-03T00:00:00Z", "--by", "team", "-o", "json", *args])
    out, err = capsys.readouterr()
    return int(code or 0), out, err


def test_the_command_notes_refuses_and_bills_as_computed(fleet: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]):
    config = tmp_path / "gpuledger.yaml"
    config.write_text(
        "price_book:\n  - model: H100-80GB\n    unit_price: 3.0\n"
        "idle:\n  threshold: 0.15\n  min_minutes: 60\nsharing:\n  mig_share_basis: memory\n"
    )
    new = Rules.of(settings(idle={"threshold": 0.15, "min_minutes": 60}, sharing={"mig_share_basis": "memory"}))
    code, out, err = _cli(capsys, fleet, config)
    document = json.loads(out)
    assert code == 0 and document["source"] == "raw" and document["mig_share_basis"] == "memory"
    assert document["rules"]["rollup_fingerprint"] == new.rollup_fingerprint
    assert document["rules"]["idle_threshold"] == 0.15 and document["rules"]["idle_min_minutes"] == 60
    assert [line for line in err.splitlines() if "billed from raw samples" in line] == [err.strip()]
    # one 90-minute dip a day is idle under these rules (threshold 15 %, at least 60 minutes)
    alpha = next(line for line in document["lines"] if line["team"] == "alpha")
    assert alpha["idle_card_hours"] == pytest.approx(3.0, abs=1e-6)
    _compact(fleet)
    code, out, err = _cli(capsys, fleet, config)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith("gpuledger: error: bill 2026-11-01T00:00:00Z/2026-11-03T00:00:00Z: ")
    code, out, err = _cli(capsys, fleet, config, "--as-computed")
    document = json.loads(out)
    assert code == 0 and err == "" and document["mig_share_basis"] == "compute"
    assert document["rules"]["as_computed"] is True and document["rules"]["idle_threshold"] == 0.05
    bill = _bill(fleet, settings(**RULE_CHANGES["share_basis"]), as_computed=True)
    assert_labelled_honestly(bill)
