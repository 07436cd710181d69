"""The lake commands, run as a user runs them (`python3 -m gpuledger ...` in a subprocess).

- `publish` prints the partition's status; a second run says `unchanged`;
- a final period refuses different numbers with one line (no traceback), exit non-zero;
- `org bill -o json` equals the library's org bill line for line; `--by` is honoured;
- `org report` writes the org statement files;
- no lake given is one line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from gpuledger.analytics.billing.org_bill import compute_org_bill
from gpuledger.warehouse.lake.location import Lake
from tests.lake.fleets import PERIOD

ROOT = Path(__file__).resolve().parents[2]


def gl(*args: str, config: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    pre = ["--config", str(config)] if config else []
    return subprocess.run([sys.executable, "-m", "gpuledger", *pre, *args], env=env,
                          capture_output=True, text=True, timeout=300)


def test_publish_and_org_bill(warehouses, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    for name, path in warehouses.items():
        first = gl("publish", "--warehouse", str(path), "--lake", str(lake), "--cluster", name,
                   "--period", PERIOD, "-o", "json")
        assert first.returncode == 0, first.stderr
        assert json.loads(first.stdout)["status"] == "published"
    again = gl("publish", "--warehouse", str(warehouses["east"]), "--lake", str(lake),
               "--cluster", "east", "--period", PERIOD, "-o", "json")
    assert json.loads(again.stdout)["status"] == "unchanged"
    out = gl("org", "bill", "--lake", str(lake), "--period", PERIOD, "--by", "cluster,team", "-o", "json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    ref = compute_org_bill(Lake.open(str(lake)), PERIOD, ("cluster", "team")).to_dict()
    assert doc["lines"] == ref["lines"] and doc["fleet_cost"] == ref["fleet_cost"]
    report = gl("org", "report", "--lake", str(lake), "--period", PERIOD, "--out", str(tmp_path / "out"))
    assert report.returncode == 0, report.stderr
    assert (tmp_path / "out" / "org" / f"period={PERIOD}" / "focus.parquet").exists()


def test_errors_are_one_line(warehouses, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    final = gl("publish", "--warehouse", str(warehouses["lab"]), "--lake", str(lake), "--cluster", "lab",
               "--period", PERIOD, "--finalize")
    assert final.returncode == 0, final.stderr
    cfg = tmp_path / "cheap.yaml"
    cfg.write_text("price_book:\n  - {model: H100-80GB, unit_price: 1.0}\n  - {model: A100-80GB, unit_price: 1.0}\n"
                   "  - {model: H200-141GB, unit_price: 1.0}\n  - {model: A100-SXM4-40GB, unit_price: 1.0}\n")
    refused = gl("publish", "--warehouse", str(warehouses["lab"]), "--lake", str(lake), "--cluster", "lab",
                 "--period", PERIOD, config=cfg)
    assert refused.returncode != 0
    assert "is final" in refused.stderr and "Traceback" not in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    nolake = gl("org", "bill", "--period", PERIOD)
    assert nolake.returncode != 0 and "no lake" in nolake.stderr and "Traceback" not in nolake.stderr
