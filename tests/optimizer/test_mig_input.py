"""Fleet and demand files: valid ones parse, bad ones get one line naming what is wrong.

Cases:
- the shipped examples parse: counts, lists, busy pods, `whole`/`empty`, dcgm model names;
- bad fleet: unknown GPU model, unknown profile, impossible current layout (7g + 1g),
  more busy instances than the layout has, a pod on a whole GPU that names a profile,
  repeated GPU index, repeated node, not YAML;
- bad demand: unknown profile, negative count, a workload bigger than the card
  ("infeasible demand"), demand for a model the fleet lacks ("infeasible demand");
- strict files: an unknown key at every level (`maintenence`, `evictible`, `profils`, a
  workload's `memori_mib`, a GPU's `layuot`, the top level) is refused with a did-you-mean, a
  key written twice is refused, and so are a billion-GPU count, a NaN memory and a bool index;
- a 4,000-GPU fleet listed GPU by GPU reads in seconds (it took minutes);
- workloads map to the smallest profile holding their peak memory and p95 compute
  (fewest compute slices first), or to a whole card.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from gpuledger.core.config import Settings
from gpuledger.core.errors import InputError
from gpuledger.core.mig import gpu_model
from gpuledger.optimizer.mig.inputs import (
    demand_from_dict,
    fleet_from_dict,
    load_demand,
    load_fleet,
    smallest_profile,
)
from gpuledger.optimizer.mig.planner import MigOptions, plan_mig

REPO = Path(__file__).resolve().parents[2]


def test_examples_parse():
    fleet = load_fleet(REPO / "examples/whatif-fleet.yaml")
    assert [n.name for n in fleet.nodes] == ["infer-a", "infer-b", "infer-c", "a100-pool"]
    a = fleet.nodes[0]
    assert a.gpus[0].config == (("1g.10gb", 7),)
    assert [b.pod for b in a.gpus[0].busy] == ["chat-7b-0", "chat-7b-1"]
    assert a.gpus[1].pinned and not a.gpus[0].pinned
    assert fleet.nodes[2].gpus[0].model == "H100-80GB" and not fleet.nodes[2].in_maintenance_window
    pool = fleet.nodes[3]
    assert pool.gpus[0].config is None and pool.gpus[3].config == ()
    demand = load_demand(REPO / "examples/whatif-demand.yaml")
    h100 = demand.for_model("H100-80GB")
    # 6 + 3 given, plus the workloads: 4 embedders -> 1g.20gb, 2 llama -> 3g.40gb
    assert dict(h100.profiles) == {"1g.10gb": 6, "1g.20gb": 4, "3g.40gb": 5}
    assert demand.for_model("A100-80GB").whole == 2


def node(layout, **extra):
    return {"nodes": [{"name": "n", "model": "H100-80GB", "gpus": [{"index": 0, "layout": layout, **extra}]}]}


@pytest.mark.parametrize(("data", "message"), [
    ({"nodes": [{"name": "n", "model": "V100", "gpus": 1}]}, "unknown GPU model 'V100'"),
    (node({"5g.50gb": 1}), "MIG profile '5g.50gb' does not exist on H100-80GB"),
    (node({"7g.80gb": 1, "1g.10gb": 1}), "impossible on a H100-80GB GPU"),
    (node({"4g.40gb": 2}), "impossible on a H100-80GB GPU"),
    (node({"1g.10gb": 1}, busy=[{"pod": "a/p", "profile": "1g.10gb"}, {"pod": "a/q", "profile": "1g.10gb"}]),
     "2 busy 1g.10gb instances but the layout has 1"),
    (node("whole", busy=[{"pod": "a/p", "profile": "1g.10gb"}]), "MIG disabled"),
    (node({"1g.10gb": -1}), "non-negative integer"),
    ({"nodes": [{"name": "n", "model": "H100-80GB", "gpus": [{"index": 0}, {"index": 0}]}]}, "repeated index"),
    ({"nodes": [{"name": "n", "model": "H100-80GB"}, {"name": "n", "model": "H100-80GB"}]}, "appears twice"),
])
def test_bad_fleet(data, message):
    with pytest.raises(InputError, match=message) as info:
        fleet_from_dict(data, "fleet.yaml")
    assert "\n" not in str(info.value) and "fleet.yaml" in str(info.value)


def test_unreadable_files(tmp_path):
    bad = tmp_path / "f.yaml"
    bad.write_text("nodes: [unclosed")
    with pytest.raises(InputError, match="not valid YAML"):
        load_fleet(bad)
    with pytest.raises(InputError, match="cannot read the fleet file"):
        load_fleet(tmp_path / "missing.yaml")
    bad.write_text("demand: {}")
    with pytest.raises(InputError, match="list 'demand'"):
        load_demand(bad)


@pytest.mark.parametrize(("item", "message"), [
    ({"model": "H100-80GB", "profiles": {"1g.5gb": 1}}, "'1g.5gb' does not exist on H100-80GB"),
    ({"model": "H100-80GB", "profiles": {"1g.10gb": -2}}, "non-negative integer"),
    ({"model": "H100-80GB", "workloads": [{"memory_mib": 200_000, "compute": 0.1}]},
     "needs 200000 MiB but a H100-80GB has .* infeasible demand"),
    ({"model": "H100-80GB", "workloads": [{"memory_mib": 1000, "compute": 1.5}]}, r"in \[0, 1\]"),
    ({"model": "TPU"}, "unknown GPU model"),
])
def test_bad_demand(item, message):
    with pytest.raises(InputError, match=message):
        demand_from_dict({"demand": [item]}, "demand.yaml")


def test_demand_for_missing_model_is_infeasible():
    fleet = fleet_from_dict({"nodes": [{"name": "n", "model": "H100-80GB", "gpus": 2}]})
    demand = demand_from_dict({"demand": [{"model": "A100-80GB", "profiles": {"1g.10gb": 1}}]})
    with pytest.raises(InputError, match=r"infeasible demand: .* no A100-80GB GPUs"):
        plan_mig(fleet, demand, MigOptions(time_limit_s=2), Settings(), datetime(2026, 11, 1, tzinfo=UTC))


@pytest.mark.parametrize(("memory", "compute", "expected"), [
    (5_000, 0.05, "1g.10gb"),       # fits the smallest
    (15_000, 0.05, "1g.20gb"),      # memory needs 2 slices, compute needs 1: 1g.20gb, not 2g
    (15_000, 0.20, "2g.20gb"),      # 0.2 > 1/7 needs 2 compute slices
    (30_000, 0.10, "3g.40gb"),
    (40_000, 0.50, "4g.40gb"),
    (60_000, 0.30, None),           # no profile holds 60 GB except the full card
])
def test_workload_maps_to_smallest_profile(memory, compute, expected):
    assert smallest_profile(gpu_model("A100-80GB"), memory, compute, "w") == expected


@pytest.mark.parametrize(("text", "message"), [
    ("nodes:\n  - {name: n, model: H100-80GB, gpus: 1, maintenence: false}\n",
     r"node n: unknown key 'maintenence' \(did you mean 'maintenance'\?\)"),
    ("nodes:\n  - name: n\n    model: H100-80GB\n    gpus:\n      - index: 0\n        layout: whole\n"
     "        busy: [{pod: a/p, evictible: false}]\n",
     r"busy\[0\]: unknown key 'evictible' \(did you mean 'evictable'\?\)"),
    ("nodes:\n  - name: n\n    model: H100-80GB\n    gpus: [{index: 0, layuot: whole}]\n",
     r"gpus\[0\]: unknown key 'layuot' \(did you mean 'layout'\?\)"),
    ("nodse: []\nnodes:\n  - {name: n, model: H100-80GB, gpus: 1}\n", r"unknown key 'nodse'"),
    ("nodes:\n  - {name: n, model: H100-80GB, gpus: 1, maintenance: true, maintenance: false}\n",
     r"line 2 not valid YAML \(duplicate key 'maintenance'\)"),
    ("nodes:\n  - {name: n, model: H100-80GB, gpus: 1000000000}\n", r"'gpus' must be a non-negative integer"),
    ("nodes:\n  - name: n\n    model: H100-80GB\n    gpus: [{index: true}]\n", r"repeated index True"),
])
def test_strict_fleet_file(tmp_path, text, message):
    path = tmp_path / "fleet.yaml"
    path.write_text(text)
    with pytest.raises(InputError, match=message) as info:
        load_fleet(path)
    assert "\n" not in str(info.value) and str(path) in str(info.value)


@pytest.mark.parametrize(("text", "message"), [
    ("demand:\n  - {model: H100-80GB, profils: {1g.10gb: 3}}\n",
     r"demand\[0\]: unknown key 'profils' \(did you mean 'profiles'\?\)"),
    ("demand:\n  - model: H100-80GB\n    workloads: [{memori_mib: 1000, compute: 0.1}]\n",
     r"workloads\[0\]: unknown key 'memori_mib' \(did you mean 'memory_mib'\?\)"),
    ("demand:\n  - {model: H100-80GB, profiles: {1g.10gb: 1, 1g.10gb: 2}}\n", r"duplicate key '1g.10gb'"),
    ("demand:\n  - model: H100-80GB\n    workloads: [{memory_mib: .nan, compute: 0.1}]\n",
     r"'memory_mib' must be a positive number"),
    ("demand:\n  - {model: H100-80GB, whole: 10000000000}\n", r"'whole' must be a non-negative integer"),
    ("demand: [{model: H100-80GB}]\nextra: 1\n", r"unknown key 'extra'"),
])
def test_strict_demand_file(tmp_path, text, message):
    path = tmp_path / "demand.yaml"
    path.write_text(text)
    with pytest.raises(InputError, match=message) as info:
        load_demand(path)
    assert "\n" not in str(info.value)


def test_large_listed_fleet_reads_in_seconds(tmp_path):
    import time

    import yaml

    layouts = [{"1g.10gb": 7}, {"3g.40gb": 1, "4g.40gb": 1}, {"2g.20gb": 3, "1g.10gb": 1}, "whole"]
    nodes = [
        {"name": f"n{n}", "model": "H100-80GB",
         "gpus": [{"index": i, "layout": layouts[(n + i) % 4]} for i in range(8)]}
        for n in range(500)
    ]
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump({"nodes": nodes}))
    started = time.perf_counter()
    fleet = load_fleet(path)
    assert len(fleet.gpus) == 4000
    assert time.perf_counter() - started < 15  # took over a minute when shapes were regenerated per GPU
