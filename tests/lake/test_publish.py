"""Publishing a cluster's month to a local lake: the partition contract.

- the manifest lists every table with its row count, size and sha256, which match the files;
  the watermark is the bill's newest sample; the bill facts equal the cluster's own bill;
- re-publishing the same warehouse is a no-op: nothing written, the manifest byte-identical;
- a publish killed (SIGKILL) half-way through writing its data files leaves the previous
  partition readable and complete (same manifest, every listed file intact, same org bill);
  the next publish completes and removes the killed run's orphan files;
- a finalized period refuses different numbers (one clear error) unless reissued; a reissue
  bumps the issue and records the replaced digest; the same numbers stay a no-op;
- finalizing a month that is not over, and a bad cluster name, are one-line errors.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from gpuledger.analytics.billing.org_bill import compute_org_bill
from gpuledger.core.config import Settings
from gpuledger.core.errors import InputError
from gpuledger.reports.lake_publish import publish_month
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.lake.errors import FinalizedPartitionError
from gpuledger.warehouse.lake.location import Lake
from gpuledger.warehouse.lake.manifest import TABLES
from gpuledger.warehouse.lake.reader import read_manifest
from tests.lake.conftest import cluster_case, publish_all
from tests.lake.fleets import AFTER, PERIOD

CHEAPER = Settings.model_validate({"price_book": [{"model": m, "unit_price": 1.0} for m in (
    "H100-80GB", "H200-141GB", "A100-80GB", "A100-SXM4-40GB")]})


def _folder(lake: Lake, cluster: str) -> Path:
    return Path(lake.root) / f"cluster={cluster}" / f"period={PERIOD}"


def test_manifest_describes_the_files(published_lake: Lake, reference_bills) -> None:
    for name in ("east", "west", "lab"):
        manifest = read_manifest(published_lake, name, PERIOD)
        assert manifest is not None and manifest.status == "draft" and manifest.issue == 1
        assert set(manifest.tables) == set(TABLES)
        for table, entry in manifest.tables.items():
            data = (_folder(published_lake, name) / entry.file).read_bytes()
            assert hashlib.sha256(data).hexdigest() == entry.sha256
            assert len(data) == entry.bytes
            frame = pl.read_parquet(_folder(published_lake, name) / entry.file)
            assert frame.height == entry.rows, table
            if table != "bill_lines" and frame.height:
                assert frame["cluster"].unique().to_list() == [name]
        own = reference_bills[(name, ("team",))]
        assert manifest.bill["fleet_cost"] == own.fleet_cost
        assert manifest.watermark == own.newest_sample.isoformat().replace("+00:00", "Z")
        raw = json.loads((_folder(published_lake, name) / "_manifest.json").read_text())
        assert raw["schema_version"] == "gpuledger.lake/v1"


def test_republish_is_a_no_op(fresh_lake: Lake, warehouses) -> None:
    publish_all(fresh_lake, warehouses)
    before = {p: p.read_bytes() for p in Path(fresh_lake.root).rglob("*") if p.is_file()}
    again = publish_all(fresh_lake, warehouses)
    assert {r.status for r in again.values()} == {"unchanged"}
    assert all(r.files_written == 0 for r in again.values())
    after = {p: p.read_bytes() for p in Path(fresh_lake.root).rglob("*") if p.is_file()}
    assert after == before


KILLER = textwrap.dedent("""
    import os, signal, sys
    from gpuledger.core.config import Settings
    from gpuledger.reports.lake_publish import publish_month
    from gpuledger.warehouse import Warehouse
    from gpuledger.warehouse.lake import location
    from tests.lake.fleets import AFTER, PERIOD
    from tests.lake.test_publish import CHEAPER

    real = location.Lake.write_bytes
    calls = []
    def write_then_die(self, path, data):
        real(self, path, data)
        calls.append(path)
        if len(calls) == 3:  # three data files written, manifest not yet
            os.kill(os.getpid(), signal.SIGKILL)
    location.Lake.write_bytes = write_then_die
    from gpuledger.core.config_lake import LakeSettings
    settings = LakeSettings(s3_endpoint=sys.argv[3] if len(sys.argv) > 3 else None)
    with Warehouse.open(sys.argv[2], read_only=True) as wh:
        publish_month(wh, CHEAPER, location.Lake.open(sys.argv[1], settings), "west", PERIOD, now=AFTER)
""")


def test_killed_publish_leaves_the_previous_partition(fresh_lake: Lake, warehouses) -> None:
    publish_all(fresh_lake, warehouses)
    folder = _folder(fresh_lake, "west")
    manifest_before = (folder / "_manifest.json").read_bytes()
    bill_before = compute_org_bill(fresh_lake, PERIOD, ("cluster", "team")).lines
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run([sys.executable, "-c", KILLER, fresh_lake.root, str(warehouses["west"])],
                          env=env, capture_output=True, text=True)
    assert done.returncode == -9, done.stderr[-2000:]
    orphans = {p.name for p in folder.iterdir()} - {e.file for e in read_manifest(fresh_lake, "west", PERIOD).tables.values()} - {"_manifest.json"}
    assert len(orphans) == 3  # the killed run's files exist, unlisted
    assert (folder / "_manifest.json").read_bytes() == manifest_before
    assert compute_org_bill(fresh_lake, PERIOD, ("cluster", "team")).lines.equals(bill_before)
    # The next publish completes, and the orphans of the killed run are gone.
    with Warehouse.open(warehouses["west"], read_only=True) as wh:
        result = publish_month(wh, CHEAPER, fresh_lake, "west", PERIOD, now=AFTER)
    assert result.status == "published"
    listed = {e.file for e in result.manifest.tables.values()}
    names = {p.name for p in folder.iterdir()} - {"_manifest.json"}
    assert listed <= names
    assert not any(n.startswith(".") for n in names)
    assert not compute_org_bill(fresh_lake, PERIOD, ("cluster", "team")).lines.equals(bill_before)


def test_finalized_period_refuses_silent_overwrite(fresh_lake: Lake, warehouses) -> None:
    west = cluster_case("west")
    with Warehouse.open(warehouses["west"], read_only=True) as wh:
        first = publish_month(wh, west.settings, fresh_lake, "west", PERIOD, finalize=True, now=AFTER)
        assert first.status == "published" and first.manifest.status == "final"
        same = publish_month(wh, west.settings, fresh_lake, "west", PERIOD, now=AFTER)
        assert same.status == "unchanged"
        with pytest.raises(FinalizedPartitionError, match=r"is final .* --reissue"):
            publish_month(wh, CHEAPER, fresh_lake, "west", PERIOD, now=AFTER)
        assert read_manifest(fresh_lake, "west", PERIOD) == first.manifest
        reissued = publish_month(wh, CHEAPER, fresh_lake, "west", PERIOD, reissue=True, now=AFTER)
    assert reissued.status == "reissued" and reissued.manifest.issue == 2
    assert reissued.manifest.status == "final"
    assert reissued.manifest.reissues[0].replaced_content_sha256 == first.manifest.content_sha256
    assert reissued.manifest.bill["fleet_cost"] < first.manifest.bill["fleet_cost"]


def test_draft_then_finalize_rewrites_only_the_manifest(fresh_lake: Lake, warehouses) -> None:
    east = cluster_case("east")
    with Warehouse.open(warehouses["east"], read_only=True) as wh:
        draft = publish_month(wh, east.settings, fresh_lake, "east", PERIOD, now=AFTER)
        final = publish_month(wh, east.settings, fresh_lake, "east", PERIOD, finalize=True, now=AFTER)
    assert (draft.manifest.status, final.status, final.manifest.status) == ("draft", "finalized", "final")
    assert final.files_written == 0 and final.manifest.tables == draft.manifest.tables


def test_bad_publish_requests(fresh_lake: Lake, warehouses) -> None:
    with Warehouse.open(warehouses["east"], read_only=True) as wh:
        with pytest.raises(InputError, match="not over"):
            publish_month(wh, Settings(), fresh_lake, "east", PERIOD, finalize=True,
                          now=datetime(2024, 11, 20, tzinfo=UTC))
        with pytest.raises(InputError, match="cluster name"):
            publish_month(wh, Settings(), fresh_lake, "east/../x", PERIOD, now=AFTER)
        with pytest.raises(InputError, match="YYYY-MM"):
            publish_month(wh, Settings(), fresh_lake, "east", "November", now=AFTER)


def test_older_versions_are_collected(fresh_lake: Lake, warehouses) -> None:
    """Each publish keeps its own files and the previous version's; older ones are removed."""
    folder = _folder(fresh_lake, "lab")
    prices = [1.0, 1.5, 2.0]
    manifests = []
    with Warehouse.open(warehouses["lab"], read_only=True) as wh:
        for price in prices:
            settings = Settings.model_validate({"price_book": [{"model": m, "unit_price": price} for m in (
                "H100-80GB", "H200-141GB", "A100-80GB", "A100-SXM4-40GB")]})
            manifests.append(publish_month(wh, settings, fresh_lake, "lab", PERIOD, now=AFTER).manifest)
    names = {p.name for p in folder.iterdir()} - {"_manifest.json"}
    last_two = {e.file for m in manifests[1:] for e in m.tables.values()}
    assert names == last_two
    first_only = {e.file for e in manifests[0].tables.values()} - last_two
    assert first_only and not first_only & names
