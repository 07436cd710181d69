"""Every card priced, nothing blocked: the default catalog, unpriced models, strict prices.

Expected prices are read from `core/data/gpu_price_catalog.yaml` by this test itself (plain
YAML, not through `core.pricing`), so the lookup under test is checked against the file.

Cases:
- a fleet of `NVIDIA A10` with the default config bills at the catalog's A10 price (this failed
  before with `price_book: no price for GPU model 'NVIDIA A10'`);
- dcgm `modelName`, GFD `nvidia.com/gpu.product` (with `-SHARED` and `-MIG-...` suffixes),
  `core.mig.canonical_model` names and other cases all find the same catalog entry; names that
  are no model stay unknown;
- every model family issue 13 lists has a positive default price;
- a configured `price_book` entry wins over the catalog, under any spelling of the model;
- the catalog is not used for a bill in another currency (no conversion): the model is unpriced;
- one model priced under two spellings (`H100-80GB` and `NVIDIA H100 80GB HBM3`, one catalog
  key since upgrades fold spellings): the same price on the same date is one price (the bill
  prices 2 h at it), a different one is refused in one line naming both entries, each as
  written and at its place in the book (issue 29: the error named one spelling only);
- an unknown model (`NVIDIA Foo 9000`) next to an H100 is billed at 0 on a line marked
  `unpriced`, conservation holds to the cent, the JSON names it in `unpriced_models` and keeps
  every existing key; the CLI prints exactly one warning naming the model and `price_book`;
  `--strict-prices` exits non-zero with one error line (bill, idle and recommend);
- `activity_unknown_card_hours`: a holder with no activity field at all has all its card-hours
  there, a holder with readings none; `newest_sample` is the last sample before the window end
  (JSON, ISO UTC) and the table prints "Data as of".
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuledger.core.config import PriceEntry, Settings
from gpuledger.core.errors import ConfigError
from gpuledger.core.pricing import PriceBook, catalog_entry
from tests.analytics.builders import Seg, at, gpus, load, namespaces, samples, window
from tests.analytics.conftest import by_team

CATALOG = Path(__file__).resolve().parents[2] / "core" / "data" / "gpu_price_catalog.yaml"
ROOT = Path(__file__).resolve().parents[2]
H100 = 3.00
"""The default config's H100-80GB price (core.config.Settings.price_book)."""


def _catalog_price(name: str) -> float:
    """The file's price for the entry listing `name` exactly (as canonical or alias)."""
    data = yaml.safe_load(CATALOG.read_text())
    for entry in data["models"]:
        if name == entry["canonical"] or name in (entry.get("aliases") or ()):
            return float(entry["unit_price"])
    raise AssertionError(f"{name} not in the catalog file")


def _run(argv: list[str]) -> tuple[int, str, str]:
    done = subprocess.run([sys.executable, "-m", "gpuledger", *argv], capture_output=True,
                          text=True, check=False, cwd=ROOT, timeout=300)
    return done.returncode, done.stdout, done.stderr


def test_a10_fleet_bills_with_no_config(make_bill):
    frames = {
        "gpus": gpus({"uuid": "GPU-A", "model": "NVIDIA A10", "model_name": "NVIDIA A10"}),
        "gpu_samples": samples([Seg("GPU-A", at(0), at(2), "ml", "p1", act=0.5)]),
        "namespaces": namespaces({"ml": "vision"}),
    }
    bill = make_bill(window(2), frames)
    price = _catalog_price("NVIDIA A10")
    lines = by_team(bill)
    assert lines["vision"]["card_hours"] == pytest.approx(2.0)
    assert lines["vision"]["cost"] == round(2 * price, 2)
    assert bill.fleet_cost == round(2 * price, 2)
    assert bill.catalog_priced_models == ("NVIDIA A10",)
    assert bill.unpriced_models == ()
    assert not any(bill.lines["unpriced"].to_list())


@pytest.mark.parametrize(("spelling", "listed"), [
    ("NVIDIA A10", "NVIDIA A10"),
    ("NVIDIA-A10", "NVIDIA A10"),
    ("nvidia a10", "NVIDIA A10"),
    ("NVIDIA-L4-SHARED", "NVIDIA-L4"),
    ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "NVIDIA-A100-SXM4-40GB"),
    ("NVIDIA-A100-SXM4-40GB-MIG-INVALID", "NVIDIA-A100-SXM4-40GB"),
    ("NVIDIA A100 80GB PCIe", "NVIDIA A100 80GB PCIe"),
    ("NVIDIA-A100-80GB-PCIe", "NVIDIA A100 80GB PCIe"),
    ("Tesla-T4", "Tesla T4"),
    ("NVIDIA-H100-80GB-HBM3-SHARED", "NVIDIA H100 80GB HBM3"),
    ("H100-80GB", "NVIDIA H100 80GB HBM3"),
    ("A100-80GB", "NVIDIA A100-SXM4-80GB"),
    ("NVIDIA GH200 96GB HBM3", "NVIDIA GH200 96GB HBM3"),
    ("NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition", "NVIDIA RTX PRO 6000 Blackwell Server Edition"),
])
def test_collector_spellings_find_their_entry(spelling, listed):
    entry = catalog_entry(spelling)
    assert entry is not None
    assert entry.unit_price == _catalog_price(listed)
    assert entry == catalog_entry(listed)


@pytest.mark.parametrize("name", ["T4", "NVIDIA Foo 9000", "", "NVIDIA"])
def test_names_that_are_no_model_stay_unknown(name):
    assert catalog_entry(name) is None


@pytest.mark.parametrize("name", [
    "Tesla T4", "NVIDIA A2", "NVIDIA A10", "NVIDIA A10G", "NVIDIA A16", "NVIDIA A30", "NVIDIA A40",
    "NVIDIA L4", "NVIDIA L40", "NVIDIA L40S", "Tesla V100-SXM2-16GB", "Tesla V100-PCIE-32GB",
    "NVIDIA A100-PCIE-40GB", "NVIDIA A100-SXM4-40GB", "NVIDIA A100 80GB PCIe",
    "NVIDIA A100-SXM4-80GB", "NVIDIA H100 PCIe", "NVIDIA H100 80GB HBM3", "NVIDIA H100 NVL",
    "NVIDIA H200", "NVIDIA H20", "NVIDIA GH200 480GB", "NVIDIA B200", "NVIDIA-B300-SXM6-AC",
    "NVIDIA GB200", "NVIDIA RTX 6000 Ada Generation", "NVIDIA RTX PRO 6000 Blackwell Server Edition",
])
def test_every_listed_family_has_a_default(name):
    entry = catalog_entry(name)
    assert entry is not None and entry.unit_price > 0 and entry.currency == "USD"


@pytest.mark.parametrize("configured", ["NVIDIA A10", "NVIDIA-A10", "A10-24GB"])
def test_price_book_wins_over_the_catalog(make_bill, configured):
    settings = Settings(price_book=(PriceEntry(model=configured, unit_price=0.5),))
    frames = {
        "gpus": gpus({"uuid": "GPU-A", "model": "NVIDIA A10"}),
        "gpu_samples": samples([Seg("GPU-A", at(0), at(2), "ml", "p1")]),
        "namespaces": namespaces({"ml": "vision"}),
    }
    bill = make_bill(window(2), frames, settings)
    assert bill.fleet_cost == 1.00
    assert bill.catalog_priced_models == ()
    assert PriceBook(settings).source("NVIDIA A10") == "price_book"


def test_one_model_under_two_spellings_same_price_is_one_price(make_bill):
    settings = Settings(price_book=(
        PriceEntry(model="H100-80GB", unit_price=2.5, effective_from="2026-01-01"),
        PriceEntry(model="A100-80GB", unit_price=1.0, effective_from="2026-01-01"),
        PriceEntry(model="NVIDIA H100 80GB HBM3", unit_price=2.5, effective_from="2026-01-01"),
    ))
    frames = {
        "gpus": gpus({"uuid": "GPU-A", "model": "NVIDIA H100 80GB HBM3"}),
        "gpu_samples": samples([Seg("GPU-A", at(0), at(2), "ml", "p1")]),
        "namespaces": namespaces({"ml": "vision"}),
    }
    bill = make_bill(window(2), frames, settings)
    assert bill.fleet_cost == 2 * 2.5
    assert PriceBook(settings).source("H100-80GB") == "price_book"


def test_one_model_under_two_spellings_two_prices_names_both_entries():
    settings = Settings(price_book=(
        PriceEntry(model="H100-80GB", unit_price=2.5, effective_from="2026-01-01"),
        PriceEntry(model="A100-80GB", unit_price=1.0, effective_from="2026-01-01"),
        PriceEntry(model="NVIDIA H100 80GB HBM3", unit_price=3.1, effective_from="2026-01-01"),
    ))
    with pytest.raises(ConfigError) as caught:
        PriceBook(settings)
    message = str(caught.value)
    assert "\n" not in message
    assert "price_book[0] {model: 'H100-80GB', unit_price: 2.5" in message
    assert "price_book[2] {model: 'NVIDIA H100 80GB HBM3', unit_price: 3.1" in message
    assert "two prices effective 2026-01-01" in message


def test_catalog_is_not_converted_to_another_currency(make_bill):
    settings = Settings(currency="EUR", price_book=(PriceEntry(model="H100-80GB", unit_price=2.0),))
    frames = {
        "gpus": gpus({"uuid": "GPU-A", "model": "NVIDIA A10"}),
        "gpu_samples": samples([Seg("GPU-A", at(0), at(1), "ml", "p1")]),
        "namespaces": namespaces({"ml": "vision"}),
    }
    bill = make_bill(window(1), frames, settings)
    assert bill.unpriced_models == ("NVIDIA A10",)
    assert bill.fleet_cost == 0.0


def _mixed_fleet(tmp_path: Path) -> Path:
    """An H100 held 2 h by vision; an unknown card held 1 h by speech, free the other hour."""
    frames = {
        "gpus": gpus({"uuid": "GPU-H"},
                     {"uuid": "GPU-F", "gpu_index": 1, "model": "NVIDIA Foo 9000"}),
        "gpu_samples": samples([
            Seg("GPU-H", at(0), at(2), "ml", "p1", act=0.5),
            Seg("GPU-F", at(0), at(1), "asr", "p2", act=None),
            Seg("GPU-F", at(1), at(2), act=None),
        ]),
        "namespaces": namespaces({"ml": "vision", "asr": "speech"}),
    }
    return load(tmp_path / "mixed.duckdb", window(2), frames)


def test_unknown_model_is_billed_at_zero_on_an_unpriced_line(make_bill, tmp_path):
    frames = {
        "gpus": gpus({"uuid": "GPU-H"}, {"uuid": "GPU-F", "gpu_index": 1, "model": "NVIDIA Foo 9000"}),
        "gpu_samples": samples([
            Seg("GPU-H", at(0), at(2), "ml", "p1", act=0.5),
            Seg("GPU-F", at(0), at(1), "asr", "p2", act=0.5),
        ]),
        "namespaces": namespaces({"ml": "vision", "asr": "speech"}),
    }
    bill = make_bill(window(2), frames)  # conservation to the cent is checked by the fixture
    lines = by_team(bill)
    assert lines["vision"]["cost"] == 2 * H100 and not lines["vision"]["unpriced"]
    assert lines["speech"]["cost"] == 0.0 and lines["speech"]["unpriced"]
    assert lines["speech"]["card_hours"] == pytest.approx(1.0)
    assert lines["speech"]["unpriced_card_hours"] == pytest.approx(1.0)
    assert lines["unallocated"]["unpriced_card_hours"] == pytest.approx(1.0)
    assert bill.fleet_cost == 2 * H100
    assert bill.unpriced_models == ("NVIDIA Foo 9000",)
    doc = bill.to_dict()
    assert doc["unpriced_models"] == ["NVIDIA Foo 9000"]
    assert {"schema", "period", "fleet_cost", "fleet_card_hours", "lines", "unallocated",
            "unattributed_namespaces", "price_book_version"} <= set(doc)
    assert sum(round(line["cost"] * 100) for line in doc["lines"]) == round(doc["fleet_cost"] * 100)


def _bill_args(path: Path) -> list[str]:
    return ["--warehouse", str(path), "bill", "--start", "2026-11-01T00:00:00Z",
            "--end", "2026-11-01T02:00:00Z"]


def test_cli_warns_once_and_strict_prices_fails(tmp_path):
    path = _mixed_fleet(tmp_path)
    code, out, err = _run([*_bill_args(path), "--format", "json"])
    assert code == 0
    warnings = [line for line in err.splitlines() if line.startswith("gpuledger: warning:")]
    assert len(warnings) == 1 and len(err.splitlines()) == 1
    assert "'NVIDIA Foo 9000'" in warnings[0] and "price_book" in warnings[0]
    doc: dict[str, Any] = json.loads(out)
    assert doc["unpriced_models"] == ["NVIDIA Foo 9000"]
    assert doc["fleet_cost"] == 2 * H100
    code, out, err = _run([*_bill_args(path), "--strict-prices"])
    assert code != 0 and out == ""
    assert err.splitlines() == ["gpuledger: error: price_book: no price for GPU model 'NVIDIA Foo 9000'"]


@pytest.mark.parametrize("command", ["idle", "recommend"])
def test_idle_and_recommend_take_strict_prices(tmp_path, command):
    path = _mixed_fleet(tmp_path)
    args = ["--warehouse", str(path), command, "--start", "2026-11-01T00:00:00Z",
            "--end", "2026-11-01T02:00:00Z", "--format", "json"]
    code, _, err = _run(args)
    assert code == 0 and "'NVIDIA Foo 9000'" in err
    code, _, err = _run([*args, "--strict-prices"])
    assert code != 0 and len(err.splitlines()) == 1 and err.startswith("gpuledger: error: price_book")


def test_activity_unknown_and_newest_sample(tmp_path):
    path = _mixed_fleet(tmp_path)
    code, out, _ = _run([*_bill_args(path), "--format", "json", "--by", "team,model"])
    assert code == 0
    doc = json.loads(out)
    lines = {line["team"]: line for line in doc["lines"]}
    assert lines["speech"]["activity_unknown_card_hours"] == pytest.approx(1.0)
    assert lines["vision"]["activity_unknown_card_hours"] == 0.0
    # The last samples are at 01:59 (one a minute from 00:00, end exclusive).
    assert doc["newest_sample"] == (at(2) - timedelta(minutes=1)).isoformat().replace("+00:00", "Z")
    code, out, _ = _run(_bill_args(path))
    assert code == 0 and "Data as of 2026-11-01T01:59:00Z" in out
