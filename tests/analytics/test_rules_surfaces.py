"""Every surface that bills follows the stored rules as `bill` does (issue 28, docs/decisions/0158).

On the hand-built fleet of `tests.analytics.rules_fleet` (rolled up under the default rules),
with each expectation worked out by hand there or below:

- `idle`, `recommend` (and `recommend --kind profile-catalog`, which prices from the bill),
  `budgets` and `report monthly`: after compaction under changed rules each refuses in one line
  naming `--as-computed` (exit 2), and with `--as-computed` bills the stored numbers under the
  stored rules; `idle`'s title says the stored threshold, not today's;
- a report issued `--as-computed` says so on every statement ("as computed: ...") and in its
  manifest (`as_computed`, the stored rules' fingerprint);
- the bill's notes reach `report` (stderr and the manifest's `bill_notes`), `budgets`
  (stderr) and the notebook facade (a `BillNote` warning per line); the facade takes
  `as_computed` on every call that bills;
- the workload statistics read activity by the bill's rule: GPU_UTIL under `idle.activity:
  gpu_util`, GR_ENGINE_ACTIVE when the bill is as computed under the stored rules;
- the heatmap plans its hours as the bill does: under another share basis it recomputes from
  raw samples and says so; after compaction it shows the stored hours, saying whose rules they
  carry, instead of refusing.
"""

from __future__ import annotations

import json
import warnings
from datetime import timedelta
from pathlib import Path

import pytest

from gpuledger.analytics.usage.rollup import compact_raw_samples
from gpuledger.cli import main
from gpuledger.core.config import Settings
from gpuledger.core.rules import Rules
from gpuledger.warehouse import Warehouse
from tests.analytics.rules_fleet import (
    BILLED,
    DAYS,
    DIPS,
    HOURS,
    IDLE_MINUTES,
    PRICE,
    RULE_CHANGES,
    SHARE,
    WHOLE,
    fleet,
    rolled_fleet,
    settings,
)

__all__ = ["fleet", "rolled_fleet"]  # fixtures

START, END = "2026-11-01T00:00:00Z", "2026-11-03T00:00:00Z"
NEW_CONFIG = ("price_book:\n  - model: H100-80GB\n    unit_price: 3.0\n"
              "idle:\n  threshold: 0.15\n  min_minutes: 60\nsharing:\n  mig_share_basis: memory\n"
              "teams:\n  budgets: {alpha: 500.0, beta: 500.0}\n")
NEW = settings(idle={"threshold": 0.15, "min_minutes": 60}, sharing={"mig_share_basis": "memory"})
OLD_FP, NEW_FP = Rules.of(settings()).rollup_fingerprint, Rules.of(NEW).rollup_fingerprint
STORED_ALPHA_IDLE = 2 * IDLE_MINUTES["default"] / 60
"""Alpha's idle card-hours over `BILLED` as stored (activity < 5 % for >= 30 min)."""
MONTH_HOURS = DAYS * 24
"""The card-hours of a card held all month: the fleet has `DAYS` days of November."""


def _mean_per_day(field: int) -> float:
    """GPU-A's mean activity over a day by one field (1: GR_ENGINE_ACTIVE, 2: GPU_UTIL / 100):
    0.5 (or 50 %) outside the dips, each dip's value for its minutes."""
    dip_minutes = sum(d[1] for d in DIPS)
    inside = sum(d[1] * (d[2] if field == 1 else d[3] / 100) for d in DIPS)
    return ((1440 - dip_minutes) * 0.5 + inside) / 1440


GR_MEAN, UTIL_MEAN = _mean_per_day(1), _mean_per_day(2)


def _compact(path: Path) -> None:
    """Keep one day of raw samples on the evening of the fourth day: the billed days' go."""
    with Warehouse.open(path) as wh:
        compact_raw_samples(wh, settings(retention={"raw_days": 1}), WHOLE.end + timedelta(hours=20))


def _run(capsys: pytest.CaptureFixture[str], path: Path, config: Path, *args: str) -> tuple[int, str, str]:
    code = main(["--warehouse", str(path), "--config", str(config), *args])
    out, err = capsys.readouterr()
    return int(code or 0), out, err


def _window(*args: str) -> list[str]:
    return [*args, "--start", START, "--end", END, "-o", "json"]


@pytest.fixture
def compacted(fleet: Path, tmp_path: Path) -> tuple[Path, Path]:
    _compact(fleet)
    config = tmp_path / "new.yaml"
    config.write_text(NEW_CONFIG)
    return fleet, config


def _refused(code: int, out: str, err: str) -> None:
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert "--as-computed" in err and OLD_FP in err and NEW_FP in err


def test_idle_as_computed(compacted: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    path, config = compacted
    _refused(*_run(capsys, path, config, *_window("idle")))
    code, out, err = _run(capsys, path, config, *_window("idle", "--as-computed"))
    assert code == 0 and err == ""
    alpha = next(w for w in json.loads(out)["workloads"] if w["team"] == "alpha")
    assert alpha["idle_card_hours"] == pytest.approx(STORED_ALPHA_IDLE, abs=1e-6)
    assert alpha["idle_cost"] == round(STORED_ALPHA_IDLE * PRICE, 2)
    code, out, _ = _run(capsys, path, config, "idle", "--start", START, "--end", END, "--as-computed")
    assert "idle: activity < 0.05 for >= 30 min, as computed" in out  # the stored rules, not 0.15 / 60


def test_recommend_as_computed(compacted: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    path, config = compacted
    _refused(*_run(capsys, path, config, *_window("recommend")))
    code, out, err = _run(capsys, path, config, *_window("recommend", "--as-computed"))
    assert code == 0 and err == "" and json.loads(out)["schema"] == "gpuledger.recommendations/v1"
    _refused(*_run(capsys, path, config, *_window("recommend", "--kind", "profile-catalog")))
    code, out, err = _run(capsys, path, config, *_window("recommend", "--kind", "profile-catalog",
                                                         "--as-computed"))
    assert code == 0 and err == "" and "profile-catalog" in json.loads(out)


def test_budgets_as_computed_and_notes(fleet: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "new.yaml"
    config.write_text(NEW_CONFIG)
    # raw samples still there: billed from them under the new rules, and stderr says so
    code, out, err = _run(capsys, fleet, config, *_window("budgets"))
    assert code == 0
    (note,) = err.strip().splitlines()
    assert "billed from raw samples" in note and OLD_FP in note and NEW_FP in note
    used = {row["team"]: row["used"] for row in json.loads(out)["teams"]}
    assert used["beta"] == pytest.approx(round(HOURS * SHARE["memory"] * PRICE * 0.9, 2), abs=0.011)
    _compact(fleet)
    _refused(*_run(capsys, fleet, config, *_window("budgets")))
    code, out, err = _run(capsys, fleet, config, *_window("budgets", "--as-computed"))
    assert code == 0 and err == ""
    used = {row["team"]: row["used"] for row in json.loads(out)["teams"]}
    assert used["alpha"] == HOURS * PRICE
    assert used["beta"] == pytest.approx(round(HOURS * SHARE["compute"] * PRICE * 0.9, 2), abs=0.011)


def test_a_report_issued_as_computed_says_so(compacted: tuple[Path, Path], tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    path, config = compacted
    out_dir = tmp_path / "reports"
    monthly = ["report", "monthly", "--period", "2026-11", "--out", str(out_dir), "--finalize", "--allow-partial"]
    code, out, err = _run(capsys, path, config, *monthly)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "--as-computed" in err
    code, out, err = _run(capsys, path, config, *monthly, "--as-computed")
    assert code == 0, err
    folder = out_dir / "period=2026-11" / "v1"
    manifest = json.loads((folder / "manifest.json").read_text())
    stored = Rules.of(NEW).with_rollup_of(Rules.of(settings()))  # the stored roll-up, today's pricing
    assert manifest["as_computed"] is True and manifest["rules"]["fingerprint"] == stored.fingerprint
    assert manifest["rules"]["rollup_fingerprint"] == OLD_FP
    pages = sorted((folder / "statements").glob("*.html"))
    assert pages
    for page in pages:
        assert "(as computed: the rules the roll-up was stored under" in page.read_text(), page.name
    assert "as computed: the rules the roll-up was stored under" in out


def test_report_notes_on_stderr_and_in_the_manifest(fleet: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "new.yaml"
    config.write_text(NEW_CONFIG)
    code, _out, err = _run(capsys, fleet, config, "report", "monthly", "--period", "2026-11",
                          "--out", str(tmp_path / "reports"))
    assert code == 0, err
    notes = [line.removeprefix("gpuledger: warning: ") for line in err.strip().splitlines()]
    (note,) = notes
    assert "billed from raw samples" in note and OLD_FP in note and NEW_FP in note
    manifest = json.loads((tmp_path / "reports" / "period=2026-11" / "draft" / "manifest.json").read_text())
    assert manifest["bill_notes"] == notes and manifest["as_computed"] is False
    assert manifest["rules"]["rollup_fingerprint"] == NEW_FP


def test_the_facade_warns_the_notes_and_takes_as_computed(fleet: Path) -> None:
    from gpuledger.api import BillNote, open_ledger

    gl = open_ledger(fleet, settings=NEW)
    with pytest.warns(BillNote) as said:
        lines = gl.bill("2026-11")
    (note,) = {str(w.message) for w in said}
    assert note.startswith("gpuledger: bill 2026-11: ") and "billed from raw samples" in note
    beta = lines.filter(lines["team"] == "beta")
    assert float(beta["card_hours"][0]) == pytest.approx(MONTH_HOURS * SHARE["memory"], abs=1e-9)
    _compact(fleet)
    with pytest.raises(Exception, match="--as-computed"):
        gl.bill("2026-11")
    with warnings.catch_warnings():
        warnings.simplefilter("error", BillNote)  # as computed, one rule set: nothing to say
        lines = gl.bill("2026-11", as_computed=True)
        beta = lines.filter(lines["team"] == "beta")
        assert float(beta["card_hours"][0]) == pytest.approx(MONTH_HOURS * SHARE["compute"], abs=1e-9)
        idle = gl.idle("2026-11", by="pod", as_computed=True)
        alpha = idle.filter(idle["team"] == "alpha")
        assert float(alpha["idle_card_hours"][0]) == pytest.approx(DAYS * IDLE_MINUTES["default"] / 60, abs=1e-6)
        budgets = gl.budgets("2026-11", as_computed=True)
        assert float(budgets.filter(budgets["team"] == "alpha")["used"][0]) == MONTH_HOURS * PRICE
        gl.recommendations("2026-11", as_computed=True)
        gl.teams("2026-11", as_computed=True)


def test_workload_activity_follows_the_bills_rule(fleet: Path) -> None:
    from gpuledger.analytics.billing.bill import compute_bill
    from gpuledger.analytics.workloads.requested import workload_usage

    util = settings(**RULE_CHANGES["activity"])
    with Warehouse.open(fleet, read_only=True) as wh:
        means = {}
        for name, rules, as_computed in (("default", settings(), False), ("gpu_util", util, False),
                                         ("gpu_util as computed", util, True)):
            bill = compute_bill(wh, BILLED, rules, ("team",), as_computed=as_computed)
            usage = workload_usage(wh, BILLED, rules, bill)
            means[name] = float(usage.filter(usage["uuid"] == "GPU-A")["act_mean"][0])
    # to 1e-9: the statistics are kept to 9 decimals (core.steady, docs/decisions/0231)
    assert means["default"] == pytest.approx(GR_MEAN, abs=1e-9)
    assert means["gpu_util"] == pytest.approx(UTIL_MEAN, abs=1e-9)
    assert means["gpu_util as computed"] == pytest.approx(GR_MEAN, abs=1e-9)  # the stored rules' rule
    assert pytest.approx(UTIL_MEAN, abs=1e-3) != GR_MEAN


def _heat(path: Path, rules: Settings) -> tuple[dict[str, float], tuple[str, ...]]:
    from gpuledger.dashboards.heat import active_card_hours

    with Warehouse.open(path, read_only=True) as wh:
        hours = active_card_hours(wh, BILLED, rules)
    sums = {}
    for uuid, value in hours.frame.select("uuid", "active_card_hours").iter_rows():
        sums[str(uuid)] = sums.get(str(uuid), 0.0) + float(value)
    return sums, hours.notes


def test_the_heatmap_plans_its_hours_as_the_bill_does(fleet: Path) -> None:
    # the roll-up's own rules: read from it, nothing to say
    heat, notes = _heat(fleet, settings())
    assert notes == ()
    assert heat["GPU-A"] == pytest.approx(HOURS * GR_MEAN, abs=1e-9)
    assert heat["GPU-M"] == pytest.approx(HOURS * SHARE["compute"] * 0.5, abs=1e-9)
    # another share basis and activity rule: recomputed from raw samples, and said
    for change, a_mean, basis in (("share_basis", GR_MEAN, "memory"), ("activity", UTIL_MEAN, "compute")):
        heat, notes = _heat(fleet, settings(**RULE_CHANGES[change]))
        (note,) = notes
        assert note.startswith("heatmap 2026-11-01T00:00:00Z/2026-11-03T00:00:00Z: ")
        assert "billed from raw samples" in note and OLD_FP in note
        assert heat["GPU-A"] == pytest.approx(HOURS * a_mean, abs=1e-9)
        assert heat["GPU-M"] == pytest.approx(HOURS * SHARE[basis] * 0.5, abs=1e-9)
    # raw samples gone: the stored hours, shown (the bill refuses), and said whose rules they carry
    _compact(fleet)
    heat, notes = _heat(fleet, settings(**RULE_CHANGES["share_basis"]))
    assert heat["GPU-M"] == pytest.approx(HOURS * SHARE["compute"] * 0.5, abs=1e-9)
    assert any("shown as stored" in n and OLD_FP in n for n in notes), notes
