"""The `bill`, `idle` and `recommend` commands, and conservation on random fleets.

Cases:
- `gpuledger bill --format json` prints the documented stable JSON (period, currency,
  fleet_cost, lines[] with team, card_hours, cost, idle_card_hours, idle_cost, ...) and its
  lines sum to fleet_cost; `--format csv` and the table print the same totals (each command
  runs in a child process, as a user runs it); a bad `--by` and a missing window are one-line
  errors with exit code 2;
- `gpuledger idle` and `gpuledger recommend --format json` run on the same warehouse;
- 12 random small fleets (seeded): mixed sharing modes, random holders, gaps and activity,
  random redistribution policy and share basis; every bill sums to its fleet cost to the cent,
  card-hours to the fleet's, and cards x hours equals the fleet card-hours.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from gpuledger.analytics.billing.money import apportion_cents, to_cents
from gpuledger.cli import main
from gpuledger.core.config import IdleSettings, Settings, SharingSettings
from tests.analytics.builders import Seg, at, gpus, load, mig_instances, namespaces, samples, window


@pytest.fixture
def warehouse(tmp_path):
    frames = {
        "gpus": gpus({"uuid": "GPU-1"}, {"uuid": "GPU-2", "gpu_index": 1}),
        "gpu_samples": samples([
            Seg("GPU-1", at(0), at(2), "ml", "p1", act=0.01, fb=5000),
            Seg("GPU-2", at(0), at(1), "scratch", "p2"),
        ]),
        "namespaces": namespaces({"ml": "vision", "scratch": None}),
    }
    return load(tmp_path / "cli.duckdb", window(2), frames)


def _run(argv: list[str], _capture: object = None) -> tuple[int, str, str]:
    """The real command line, in a child process (as a user runs it)."""
    done = subprocess.run(
        [sys.executable, "-m", "gpuledger", *argv], capture_output=True, text=True, check=False,
        cwd=Path(__file__).resolve().parents[2], timeout=300,
    )
    return done.returncode, done.stdout, done.stderr


def test_bill_json_is_the_documented_contract(warehouse):
    code, out, _ = _run(["--warehouse", str(warehouse), "bill", "--start", "2026-11-01T00:00:00Z",
                         "--end", "2026-11-01T02:00:00Z", "--format", "json"])
    assert code == 0
    doc = json.loads(out)
    assert doc["period"] == "2026-11-01T00:00:00Z/2026-11-01T02:00:00Z"
    assert doc["currency"] == "USD"
    assert doc["fleet_cost"] == 12.00
    assert doc["unattributed_namespaces"] == ["scratch"]
    for line in doc["lines"]:
        assert {"team", "card_hours", "cost", "idle_card_hours", "idle_cost", "list_cost",
                "sharing_discount", "redistributed_cost"} <= set(line)
    teams = {line["team"]: line for line in doc["lines"]}
    assert teams["vision"]["cost"] == 6.00 and teams["vision"]["idle_card_hours"] == 2.0
    assert teams["unattributed"]["card_hours"] == 1.0
    assert teams["unallocated"]["cost"] == 3.00
    assert sum(to_cents(line["cost"]) for line in doc["lines"]) == to_cents(doc["fleet_cost"])


def test_bill_csv_table_and_errors(warehouse):
    base = ["--warehouse", str(warehouse), "bill", "--start", "2026-11-01T00:00:00Z",
            "--end", "2026-11-01T02:00:00Z"]
    code, out, _ = _run([*base, "--format", "csv", "--by", "team,model"])
    assert code == 0
    header, *rows = out.strip().splitlines()
    assert header.startswith("team,model,card_hours")
    assert sum(float(r.split(",")[header.split(",").index("cost")]) for r in rows) == pytest.approx(12.0)
    code, out, _ = _run(base)
    assert code == 0 and "Fleet: 4.000 GPU-hours, 12.00 USD" in out and "scratch" in out


def test_bill_errors_are_one_line(warehouse, capsys):
    base = ["--warehouse", str(warehouse), "bill", "--start", "2026-11-01T00:00:00Z",
            "--end", "2026-11-01T02:00:00Z"]
    assert main([*base, "--by", "team,colour"]) == 2
    err = capsys.readouterr().err
    assert "unknown dimension 'colour'" in err and len(err.strip().splitlines()) == 1
    # No window is the last complete month now (issue 16); half a window is still an error.
    assert main(["--warehouse", str(warehouse), "bill", "--start", "2026-11-01T00:00:00Z"]) == 2
    assert "--end" in capsys.readouterr().err


def test_idle_and_recommend_commands(warehouse):
    span = ["--start", "2026-11-01T00:00:00Z", "--end", "2026-11-01T02:00:00Z"]
    code, out, _ = _run(["--warehouse", str(warehouse), "idle", *span, "--format", "json"])
    assert code == 0
    workloads = json.loads(out)["workloads"]  # one row per workload (a bare pod is its own)
    assert [(w["workload_kind"], w["workload"]) for w in workloads] == [("Pod", "p1")]
    code, out, _ = _run(["--warehouse", str(warehouse), "recommend", *span, "--format", "json"])
    assert code == 0
    doc = json.loads(out)
    assert doc["recommendations"][0]["pod"] == "p1"
    assert doc["monthly_saving"] > 0


def test_apportion_cents_keeps_totals():
    values = [1 / 3, 1 / 3, 1 / 3]
    assert apportion_cents(values) == [34, 33, 33]
    assert sum(apportion_cents([0.005] * 7)) == to_cents(0.035)
    assert apportion_cents([2.5, -2.5]) == [250, -250]


def _random_fleet(rng: random.Random):
    cards, segs, instances = [], [], []
    namespaces_ = {"a": "alpha", "b": "beta", "c": None}
    hours = 3
    for i in range(rng.randint(2, 5)):
        mode = rng.choice(["exclusive", "mig", "timeslice", "vgpu"])
        uuid = f"GPU-{i}"
        cards.append({"uuid": uuid, "gpu_index": i, "sharing_mode": mode,
                      "replicas": 3 if mode == "timeslice" else None})
        devices: list[dict] = []
        if mode == "mig":
            layout = rng.choice([[(1, "3g.40gb"), (2, "3g.40gb")], [(0, "7g.80gb")],
                                 [(1, "4g.40gb"), (2, "3g.40gb")], [(7, "1g.10gb"), (3, "2g.20gb")]])
            devices = [{"gpu_i_id": g, "profile": p} for g, p in layout]
            instances += [(uuid, g, p, at(0), at(hours)) for g, p in layout]
        elif mode in ("timeslice", "vgpu"):
            devices = [{"vgpu": str(r)} for r in range(rng.randint(1, 3))]
        else:
            devices = [{}]
        for d in devices:
            t = 0
            while t < hours * 60:
                length = rng.randint(5, 90)
                ns = rng.choice(["a", "b", "c", None])
                if rng.random() < 0.15:   # a scrape gap
                    t += length
                    continue
                if ns is None and mode in ("timeslice", "vgpu"):
                    t += length
                    continue
                end = min(t + length, hours * 60)
                segs.append(Seg(uuid, at(0, t), at(0, end), ns, f"{ns}-{t}" if ns else None,
                                act=rng.choice([0.0, 0.02, 0.3, 0.9]), fb=rng.choice([100, 9000]), **d))
                t = end
    frames = {"gpus": gpus(*cards), "gpu_samples": samples(segs), "namespaces": namespaces(namespaces_)}
    if instances:
        frames["mig_instances"] = mig_instances(*instances)
    return frames, len(cards), hours


@pytest.mark.parametrize("seed", range(12))
def test_conservation_on_random_fleets(make_bill, seed):
    rng = random.Random(seed)
    frames, cards, hours = _random_fleet(rng)
    settings = Settings(
        idle=IdleSettings(unallocated_redistribution=rng.choice(["none", "proportional", "even"])),
        sharing=SharingSettings(
            mig_share_basis=rng.choice(["compute", "memory", "max_normalized"]),
            pool_billing_basis={"default": rng.choice(["allocation", "utilization"])},
        ),
    )
    by = rng.choice([("team",), ("team", "model", "sharing_mode"), ("team", "namespace", "day")])
    bill = make_bill(window(hours), frames, settings, by=by)   # conservation asserted inside
    assert bill.fleet_card_hours == pytest.approx(cards * hours)
    assert bill.fleet_cost == pytest.approx(cards * hours * 3.0, abs=0.005)
    assert (bill.lines["card_hours"] >= -1e-9).all()


def _largest_remainder_reference(values: list[float], total: float | None = None) -> list[int]:
    """The largest-remainder method written out plainly (the pure-Python apportionment the
    bill used before decision 0132), the independent computation `apportion_cents` must equal."""
    import math

    target = to_cents(sum(values) if total is None else total)
    scaled = [round(v * 100, 6) for v in values]
    floors = [math.floor(s + 1e-7) for s in scaled]
    missing = target - sum(floors)
    order = sorted(range(len(values)), key=lambda i: (-(scaled[i] - floors[i]), i))
    out = list(floors)
    for k in range(abs(missing)):
        if missing > 0:
            out[order[k % len(order)]] += 1
        else:
            out[order[-1 - (k % len(order))]] -= 1
    return out


def test_apportion_cents_equals_the_plain_largest_remainder():
    import random

    rng = random.Random(20)
    for _ in range(2000):
        values = [
            rng.choice([0.0, -0.0, rng.randint(-500, 500) / 200, rng.uniform(-1e4, 1e5),
                        rng.randint(0, 10**6) / 100 + rng.choice([0.0, 1e-9, -1e-9, 5e-8])])
            for _ in range(rng.choice([1, 2, 3, 7, 60]))
        ]
        total = None if rng.random() < 0.5 else sum(values) + rng.choice([0.0, 0.01, -0.03, 1.0, -2.5, 100.0])
        assert apportion_cents(values, total) == _largest_remainder_reference(values, total), (values, total)
