"""`gpuledger recommend --kind ...` on a seeded warehouse file (the CLI, end to end).

Seeded 6 hours:
- time-sliced pool `ts-a`, one card: 1 holder for 1 h (activity 0.30), 2 for 1 h (0.60), 3 for
  4 h (0.62): step +0.30 then +0.02 < 10% of 0.30, so the knee is 2; the ReplicaSet-owned pods
  are inference; it runs 2.5 per card on average: `overcommit_past_knee`, 1:2;
- MIG pool `mig-a` (A100-SXM4-40GB): node `m1` holds one 4g.20gb (free 3 compute slices, one
  2g fits, 1 unusable: 1/3 >= 0.3 with 3/7 free), node `m2` {3g.20gb, 2g.10gb} (2 free, a 2g
  fits: 0). The smallest profile in use is 2g.10gb. Only m1 is rebuilt, in the Saturday window;
- the three MIG workloads right-size to 1g.5gb, 2g.10gb and 3g.20gb: the K=3 catalog is exactly
  those, coverage 1.0 of workloads and of GPU-hours; with K=1 coverage falls below 1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from tests.analytics.builders import Seg, at, gpus, load, mig_instances, namespaces, pods, samples, window

A100 = "A100-SXM4-40GB"


def _frames() -> dict:
    ts = [Seg("GPU-T", at(0), at(1), "serve", "a-0", act=0.30, vgpu="0", node="t1"),
          *(Seg("GPU-T", at(1), at(2), "serve", f"a-{i}", act=0.60, vgpu=str(i), node="t1") for i in range(2)),
          *(Seg("GPU-T", at(2), at(6), "serve", f"a-{i}", act=0.62, vgpu=str(i), node="t1") for i in range(3))]
    mig = [Seg("GPU-M1", at(0), at(6), "ml", "small", act=0.1, fb=3000, gpu_i_id=1, profile="4g.20gb", node="m1"),
           Seg("GPU-M2", at(0), at(6), "ml", "mid", act=0.6, fb=15000, gpu_i_id=1, profile="3g.20gb", node="m2"),
           Seg("GPU-M2", at(0), at(6), "ml", "two", act=0.5, fb=8000, gpu_i_id=2, profile="2g.10gb", node="m2")]
    return {
        "gpus": gpus({"uuid": "GPU-T", "node": "t1", "pool": "ts-a", "sharing_mode": "timeslice", "replicas": 4},
                     {"uuid": "GPU-M1", "node": "m1", "pool": "mig-a", "sharing_mode": "mig", "model": A100,
                      "memory_mib": 40960.0},
                     {"uuid": "GPU-M2", "node": "m2", "pool": "mig-a", "sharing_mode": "mig", "model": A100,
                      "memory_mib": 40960.0}),
        "namespaces": namespaces({"serve": "web", "ml": "research"}),
        "pods": pods(*({"namespace": "serve", "pod": f"a-{i}", "node": "t1", "owner_kind": "ReplicaSet",
                        "owner_name": "chat-5d8f9c7b6"} for i in range(3)),
                     *({"namespace": "ml", "pod": p, "node": n} for p, n in (("small", "m1"), ("mid", "m2"),
                                                                              ("two", "m2")))),
        "mig_instances": mig_instances(("GPU-M1", 1, "4g.20gb", at(0), at(6)), ("GPU-M2", 1, "3g.20gb", at(0), at(6)),
                                       ("GPU-M2", 2, "2g.10gb", at(0), at(6))),
        "gpu_samples": samples([*ts, *mig]),
    }


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return load(tmp_path_factory.mktemp("advice") / "a.duckdb", window(6), _frames())


def _run(warehouse: Path, tmp: Path, *args: str, config: str = "", start: datetime | None = None,
         end: datetime | None = None) -> dict:
    cfg = tmp / "cfg.yaml"
    cfg.write_text(config or "advice:\n  maintenance_windows:\n    - {pool: 'mig-*', weekly: ['sat 01:00-05:00']}\n")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    out = subprocess.run(
        [sys.executable, "-m", "gpuledger", "recommend", "--warehouse", str(warehouse), "--config", str(cfg),
         "--start", (start or at(0)).isoformat(), "--end", (end or at(6)).isoformat(), *args, "-o", "json"],
        capture_output=True, text=True, env=env, check=False)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_all_kinds_on_the_seeded_fleet(warehouse: Path, tmp_path: Path) -> None:
    doc = _run(warehouse, tmp_path, "--kind", "profile-catalog", "--kind", "fragmentation", "--kind", "overcommit")
    (model,) = doc["profile-catalog"]["models"]
    assert model["profiles"] == ["1g.5gb", "2g.10gb", "3g.20gb"]
    assert model["coverage"] == 1.0 and model["coverage_gpu_hours"] == 1.0
    kinds = {(r["kind"], r["scope"]) for r in doc["recommendations"]}
    assert ("overcommit_past_knee", "ts-a (inference)") in kinds
    (pool,) = doc["overcommit"]["pools"]
    assert (pool["knee"], pool["recommended"], pool["running"]) == (2, 2, 2.5)
    rebuilds = [r for r in doc["recommendations"] if r["kind"] == "fragmentation_rebuild"]
    assert [r["scope"] for r in rebuilds] == ["m1"]
    assert "next window Sat 2026-11-07 01:00-05:00 UTC" in rebuilds[0]["reason"]
    assert doc["fragmentation"]["smallest_profile"] == {A100: "2g.10gb"}


def test_top_cuts_the_listed_advice_to_the_largest_rows(warehouse: Path, tmp_path: Path) -> None:
    """`--top N` shows the first N rows worth acting on, in the same order; the total is still
    the whole list's (as `recommend`'s per-workload list does)."""
    kinds = ("--kind", "profile-catalog", "--kind", "fragmentation", "--kind", "overcommit")
    every = _run(warehouse, tmp_path, *kinds)
    assert len(every["recommendations"]) >= 2  # else the cut would cut nothing
    top = _run(warehouse, tmp_path, *kinds, "--top", "1")
    assert top["recommendations"] == every["recommendations"][:1]
    assert top["monthly_saving"] == every["monthly_saving"]


def test_smaller_catalog_covers_less(warehouse: Path, tmp_path: Path) -> None:
    doc = _run(warehouse, tmp_path, "--kind", "profile-catalog", config="advice: {catalog_size: 1}\n")
    (model,) = doc["profile-catalog"]["models"]
    assert len(model["profiles"]) == 1 and model["coverage"] < 1.0
    assert {u["needs"] for u in model["uncovered"]} <= {"1g.5gb", "2g.10gb", "3g.20gb"}


PRICED = ("price_book:\n  - {model: A100-SXM4-40GB, unit_price: 1.3, effective_from: 2026-01-01}\n"
          "advice:\n  maintenance_windows:\n    - {pool: 'mig-*', weekly: ['sat 01:00-05:00']}\n")


def test_a_rebuild_has_one_saving_the_mig_plans(warehouse: Path, tmp_path: Path) -> None:
    """Issue 32: the advice priced m1's rebuild at its unusable slice (1/7 x 1.30 x 730 = 135.57 a
    month) while the MIG plan over the same warehouse frees no GPU: two savings for one action.
    The rebuild is now not priced and names the plan; the plan's saving is GPUs freed x price."""
    doc = _run(warehouse, tmp_path, "--kind", "fragmentation", config=PRICED)
    (rebuild,) = [r for r in doc["recommendations"] if r["kind"] == "fragmentation_rebuild"]
    assert rebuild["scope"] == "m1" and rebuild["monthly_saving"] is None
    assert "gpuledger optimize mig" in rebuild["reason"] and "(1 of 3)" in rebuild["reason"]
    assert doc["monthly_saving"] == 0.0  # the listed total leaves the unpriced row out (0213)

    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]), COLUMNS="200")
    base = [sys.executable, "-m", "gpuledger", "--warehouse", str(warehouse), "--config", str(tmp_path / "cfg.yaml")]
    table = subprocess.run([*base, "recommend", "--kind", "fragmentation", "--start", at(0).isoformat(),
                            "--end", at(6).isoformat()], capture_output=True, text=True, env=env, check=True)
    row = next(line for line in table.stdout.splitlines() if line.startswith("fragmentation_rebuild"))
    assert row.split()[2] == "-", row  # shown "-", never a money figure of its own
    assert "1 MIG rebuild listed not priced" in table.stdout and "`gpuledger optimize mig`" in table.stdout

    planned = subprocess.run([*base, "optimize", "mig", "--no-save", "-o", "json"],
                             capture_output=True, text=True, env=env, check=True)
    effect = json.loads(planned.stdout)["effect"]
    # the two MIG cards (GPU-M1 on m1, GPU-M2 on m2) hold instances: both in use before
    assert effect["gpus_used_before"] == 2
    freed = effect["gpus_used_before"] - effect["gpus_used_after"]
    assert effect["gpus_freed"] == freed == 0  # demand keeps both cards: the rebuild saves nothing
    assert effect["monthly_cost_saving"] == pytest.approx(round(freed * 1.3 * 730, 2), abs=0.005)
