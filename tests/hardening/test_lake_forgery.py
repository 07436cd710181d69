"""Issue 31 items 2, 10 and 11 (lake): forged partitions and impossible manifests are refused.

The issue's forgery: a cluster's `bill_detail` rewritten (one team's cost moved onto another,
the total kept, so conservation still holds) under a new file name, the manifest's file, size
and sha256 updated and its `content_sha256` left stale. Cases:
- keyless lake: the reader re-checks the file's content digest and refuses it (today: accepted);
- signed lake: the same forgery with every digest recomputed is refused by the signature; a
  manifest without a signature is refused when a key is set, and read with
  `lake.accept_unsigned` (the migration setting); a signed manifest read without a key is refused;
- `final` on read: a manifest that says issue 2 with no recorded reissue, or a reissued draft;
- `fleet_cost` NaN (a traceback today) and a table of 10^15 rows (silent today): one clear
  line, from the library and from `org bill` as a user runs it.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from gpuledger.analytics.billing.org_bill import compute_org_bill
from gpuledger.core.config_lake import LakeSettings
from gpuledger.warehouse.lake.errors import LakeError
from gpuledger.warehouse.lake.location import Lake
from gpuledger.warehouse.lake.manifest import content_sha256
from gpuledger.warehouse.lake.partition import canonical_sha256, parquet_bytes
from tests.lake.conftest import publish_all, warehouses  # noqa: F401 - fixture
from tests.lake.fleets import PERIOD

KEY = "lake-test-key-0123456789"


def _manifest_path(lake: Lake, cluster: str = "east") -> Path:
    return Path(lake.root) / f"cluster={cluster}" / f"period={PERIOD}" / "_manifest.json"


def _forge(lake: Lake, *, recompute_content: bool) -> tuple[str, str, float]:
    """Move the first team's cost onto the second in east's detail; returns (from, to, amount)."""
    path = _manifest_path(lake)
    doc = json.loads(path.read_text())
    entry = doc["tables"]["bill_detail"]
    detail = pl.read_parquet(path.parent / entry["file"])
    teams = sorted(t for t in detail["team"].unique().to_list() if t)
    victim, thief = teams[0], teams[1]
    amount = float(detail.filter(pl.col("team") == victim)["list_cost"].sum())
    forged = detail.with_columns(pl.when(pl.col("team") == victim).then(pl.lit(thief))
                                 .otherwise(pl.col("team")).alias("team"))
    data = parquet_bytes(forged)
    digest = hashlib.sha256(data).hexdigest()
    name = f"bill_detail-{digest[:16]}.parquet"
    (path.parent / name).write_bytes(data)
    entry.update(file=name, bytes=len(data), sha256=digest)
    if recompute_content:
        from gpuledger.warehouse.lake.manifest import TableEntry

        entry["content_sha256"] = canonical_sha256(forged)
        tables = {k: TableEntry(**v) for k, v in doc["tables"].items()}
        doc["content_sha256"] = content_sha256(tables, doc["bill"], doc["watermark"], doc.get("rules"))
    path.write_text(json.dumps(doc, indent=2, sort_keys=True))
    return victim, thief, amount


def _lake(root: Path, key: str | None = None, accept_unsigned: bool = False) -> Lake:
    return Lake.open(str(root), LakeSettings(accept_unsigned=accept_unsigned), key)


def test_forged_detail_refused_without_key(tmp_path: Path, warehouses: dict[str, Path]) -> None:  # noqa: F811
    lake = _lake(tmp_path / "lake")
    publish_all(lake, warehouses)
    honest = compute_org_bill(lake, PERIOD, ("cluster", "team")).lines
    victim, _, amount = _forge(lake, recompute_content=False)
    assert amount > 0 and honest.filter((pl.col("cluster") == "east") & (pl.col("team") == victim)).height
    with pytest.raises(LakeError, match=r"content_sha256|other numbers"):
        compute_org_bill(lake, PERIOD, ("cluster", "team"))


def test_signed_lake(tmp_path: Path, warehouses: dict[str, Path]) -> None:  # noqa: F811
    root = tmp_path / "lake"
    publish_all(_lake(root, KEY), warehouses)
    assert isinstance(json.loads(_manifest_path(_lake(root)).read_text()).get("signature"), str)
    compute_org_bill(_lake(root, KEY), PERIOD)  # intact: reads
    with pytest.raises(LakeError, match=r"signed, but reports\.signing_key is not set"):
        compute_org_bill(_lake(root), PERIOD)
    with pytest.raises(LakeError, match="signature does not match"):
        compute_org_bill(_lake(root, "another-key"), PERIOD)
    _forge(_lake(root), recompute_content=True)  # every digest consistent, signature stale
    with pytest.raises(LakeError, match="signature does not match"):
        compute_org_bill(_lake(root, KEY), PERIOD)


def test_unsigned_manifest_with_key(tmp_path: Path, warehouses: dict[str, Path]) -> None:  # noqa: F811
    root = tmp_path / "lake"
    publish_all(_lake(root), warehouses)
    with pytest.raises(LakeError, match="not signed"):
        compute_org_bill(_lake(root, KEY), PERIOD)
    migrating = _lake(root, KEY, accept_unsigned=True)
    compute_org_bill(migrating, PERIOD)
    publish_all(migrating, warehouses)  # the migration: republishing signs what was unsigned
    compute_org_bill(_lake(root, KEY), PERIOD)


def _edit(lake: Lake, change: dict[str, object]) -> None:
    path = _manifest_path(lake)
    doc = json.loads(path.read_text())
    for dotted, value in change.items():
        *head, last = dotted.split(".")
        target = doc
        for part in head:
            target = target[part]
        target[last] = value
    path.write_text(json.dumps(doc, indent=2, sort_keys=True))  # NaN written as JSON's NaN


@pytest.mark.parametrize(("change", "message"), [
    ({"bill.fleet_cost": float("nan")}, "finite number"),
    ({"tables.bill_detail.rows": 10**15}, "less than or equal"),
    ({"issue": 2}, "issue 2 with 0 recorded reissues"),
    ({"issue": 2, "reissues": [{"issue": 1, "published_at": "2024-12-01T00:00:00Z",
                                "replaced_content_sha256": "0" * 64}]}, "reissued partition is final"),
])
def test_impossible_manifest_one_line(tmp_path: Path, warehouses: dict[str, Path],  # noqa: F811
                                      change: dict[str, object], message: str) -> None:
    lake = _lake(tmp_path / "lake")
    publish_all(lake, warehouses)
    _edit(lake, change)
    with pytest.raises(LakeError, match=message):
        compute_org_bill(lake, PERIOD)
    env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", str(Path.cwd()))}
    run = subprocess.run([sys.executable, "-m", "gpuledger", "org", "bill", "--lake", lake.root, "--period",
                          PERIOD], capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert run.returncode not in (0, 70), run.stderr
    assert "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) == 1, run.stderr


def test_row_count_checked_against_file(tmp_path: Path, warehouses: dict[str, Path]) -> None:  # noqa: F811
    lake = _lake(tmp_path / "lake")
    publish_all(lake, warehouses)
    doc = json.loads(_manifest_path(lake).read_text())
    rows = pl.read_parquet(io.BytesIO((_manifest_path(lake).parent / doc["tables"]["bill_detail"]["file"])
                                      .read_bytes())).height
    _edit(lake, {"tables.bill_detail.rows": rows + 1})
    with pytest.raises(LakeError, match=f"holds {rows} rows"):
        compute_org_bill(lake, PERIOD)
