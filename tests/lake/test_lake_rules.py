"""Lake partitions record the rules their bill was computed under (docs/decisions/0150, issue 28).

The three simulated clusters bill under different rules (east: the defaults; west: unallocated
cost redistributed proportionally; lab: evenly), so their fingerprints differ. Expected
fingerprints are computed here from each cluster's own settings (`core.rules`), not read back
from the code under test.

- each manifest records its cluster's rules (fingerprint, description, full values that rebuild
  the same `Rules`), within schema `gpuledger.lake/v1`;
- the org bill states each cluster's rules and says the clusters differ; `org bill -o json`
  carries them, with one warning line on stderr naming every cluster's fingerprint; `org report`
  writes them into its manifest and onto the org statement;
- two clusters under the same rules: no warning, `rules_differ` false;
- a manifest written before partitions recorded rules (no `rules` key) still reads: its cluster
  shows "rules not recorded", which counts as different; a final one re-published with the same
  numbers stays as issued, a draft gains the rules;
- the same numbers under other rules over a final partition are refused unless reissued.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuledger.analytics.billing.org_bill import compute_org_bill
from gpuledger.core.config import Settings
from gpuledger.core.rules import Rules
from gpuledger.reports.lake_publish import publish_month
from gpuledger.reports.org_pdf import render_org_statement
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.lake.errors import FinalizedPartitionError
from gpuledger.warehouse.lake.location import Lake
from gpuledger.warehouse.lake.manifest import MANIFEST, content_sha256
from gpuledger.warehouse.lake.reader import read_manifest
from tests.lake.conftest import copy_lake
from tests.lake.fleets import AFTER, CLUSTERS, PERIOD
from tests.lake.test_cli import gl

EXPECTED = {c.name: Rules.of(c.settings) for c in CLUSTERS}


def test_manifests_record_each_clusters_rules(published_lake: Lake) -> None:
    assert len({r.fingerprint for r in EXPECTED.values()}) == 3  # the premise: three rule sets
    for name, rules in EXPECTED.items():
        manifest = read_manifest(published_lake, name, PERIOD)
        assert manifest is not None and manifest.rules is not None
        assert manifest.rules["fingerprint"] == rules.fingerprint
        assert manifest.rules["rollup_fingerprint"] == rules.rollup_fingerprint
        assert Rules.from_dict(manifest.rules["rules"]) == rules
        assert manifest.schema_version == "gpuledger.lake/v1"


def test_org_bill_states_each_clusters_rules(published_lake: Lake) -> None:
    bill = compute_org_bill(published_lake, PERIOD, ("cluster", "team"))
    doc = bill.to_dict()
    assert {n: r["fingerprint"] for n, r in doc["rules"].items()} == {
        n: r.fingerprint for n, r in EXPECTED.items()}
    assert doc["rules"]["west"]["description"] == EXPECTED["west"].describe()
    assert doc["rules_differ"] is True
    note = bill.rules_note()
    assert note is not None and "different rules" in note
    assert all(r.fingerprint in note for r in EXPECTED.values())
    html = render_org_statement(bill, "gpuledger")
    assert 'id="rules-differ"' in html and all(r.fingerprint in html for r in EXPECTED.values())


def test_org_commands_warn_when_rules_differ(published_lake: Lake, tmp_path: Path) -> None:
    done = gl("org", "bill", "--lake", published_lake.uri, "--period", PERIOD, "-o", "json")
    assert done.returncode == 0, done.stderr
    (warning,) = done.stderr.strip().splitlines()
    assert "different rules" in warning and all(r.fingerprint in warning for r in EXPECTED.values())
    assert json.loads(done.stdout)["rules_differ"] is True
    table = gl("org", "bill", "--lake", published_lake.uri, "--period", PERIOD)
    assert all(f"{n}: rules {r.fingerprint}" in table.stdout for n, r in EXPECTED.items())
    report = gl("org", "report", "--lake", published_lake.uri, "--period", PERIOD, "--out", str(tmp_path))
    assert report.returncode == 0 and "different rules" in report.stderr
    manifest = json.loads((tmp_path / "org" / f"period={PERIOD}" / "manifest.json").read_text())
    assert manifest["rules_differ"] is True and "different rules" in manifest["rules_note"]
    assert {p["cluster"]: p["rules"]["fingerprint"] for p in manifest["partitions"]} == {
        n: r.fingerprint for n, r in EXPECTED.items()}


def test_same_rules_no_warning(fresh_lake: Lake, warehouses: dict[str, Path]) -> None:
    east = next(c for c in CLUSTERS if c.name == "east")
    with Warehouse.open(warehouses["east"], read_only=True) as wh:
        for name in ("east", "north"):  # one fleet published twice, under one rule set
            publish_month(wh, east.settings, fresh_lake, name, PERIOD, now=AFTER)
    bill = compute_org_bill(fresh_lake, PERIOD, ("cluster", "team"))
    assert bill.rules_differ is False and bill.rules_note() is None
    assert set(bill.to_dict()["rules"]) == {"east", "north"}
    done = gl("org", "bill", "--lake", fresh_lake.uri, "--period", PERIOD, "-o", "json")
    assert done.returncode == 0 and done.stderr.strip() == ""


def _strip_rules(lake: Lake, cluster: str) -> None:
    """Rewrite a partition's manifest as the release before recorded rules wrote it."""
    path = Path(lake.root) / f"cluster={cluster}" / f"period={PERIOD}" / MANIFEST
    raw = json.loads(path.read_text())
    raw.pop("rules")
    manifest = read_manifest(lake, cluster, PERIOD)
    assert manifest is not None
    raw["content_sha256"] = content_sha256(dict(manifest.tables), manifest.bill, manifest.watermark)
    path.write_text(json.dumps(raw, indent=2, sort_keys=True) + "\n")


def test_manifest_without_rules(published_lake: Lake, warehouses: dict[str, Path], tmp_path: Path) -> None:
    lake = copy_lake(published_lake, tmp_path / "lake")
    _strip_rules(lake, "lab")
    bill = compute_org_bill(lake, PERIOD, ("cluster", "team"), clusters=("lab",))
    assert bill.rules == {"lab": None} and bill.to_dict()["rules"] == {"lab": None}
    assert bill.rules_lines() == ["lab: rules not recorded"]
    # a draft published again gains its rules (same issue)
    lab = next(c for c in CLUSTERS if c.name == "lab")
    with Warehouse.open(warehouses["lab"], read_only=True) as wh:
        again = publish_month(wh, lab.settings, lake, "lab", PERIOD, now=AFTER)
        assert again.status == "published" and again.manifest.issue == 1
        assert again.manifest.rules is not None
        assert again.manifest.rules["fingerprint"] == EXPECTED["lab"].fingerprint
        # a final one issued before rules were recorded stays as issued with the same numbers
        publish_month(wh, lab.settings, lake, "lab", PERIOD, now=AFTER, finalize=True)
        _strip_rules(lake, "lab")
        kept = publish_month(wh, lab.settings, lake, "lab", PERIOD, now=AFTER, finalize=True)
    assert kept.status == "unchanged" and kept.manifest.rules is None and kept.manifest.finalized


def test_other_rules_over_a_final_partition_need_a_reissue(fresh_lake: Lake, warehouses: dict[str, Path]) -> None:
    east = next(c for c in CLUSTERS if c.name == "east")
    # a pricing rule for a pool this fleet does not have: the same numbers, other rules
    other = east.settings.model_copy(update={"sharing": east.settings.sharing.model_copy(
        update={"pool_billing_basis": {"no-such-pool": "utilization"}})})
    assert Rules.of(other).fingerprint != EXPECTED["east"].fingerprint
    assert isinstance(other, Settings)
    with Warehouse.open(warehouses["east"], read_only=True) as wh:
        first = publish_month(wh, east.settings, fresh_lake, "east", PERIOD, now=AFTER, finalize=True)
        with pytest.raises(FinalizedPartitionError, match="rules they were computed under"):
            publish_month(wh, other, fresh_lake, "east", PERIOD, now=AFTER)
        reissued = publish_month(wh, other, fresh_lake, "east", PERIOD, now=AFTER, reissue=True)
    assert reissued.status == "reissued" and reissued.manifest.issue == 2
    def said(m: object) -> dict[str, str]:
        return {n: e.content_sha256 for n, e in m.tables.items()}  # type: ignore[attr-defined]

    assert said(reissued.manifest) == said(first.manifest)  # the numbers did not move
    assert reissued.manifest.rules is not None
    assert reissued.manifest.rules["fingerprint"] == Rules.of(other).fingerprint
