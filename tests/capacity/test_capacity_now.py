"""Capacity now, by shape (analytics.capacity.now, .headroom).

Cases:
- a fleet of fragmented MIG cards: each card lists exactly the profiles that still fit beside
  its instances, checked against a placement search written here from the shared
  `mig-profiles.yaml` (starts, sizes, compute slices, per-card maximum), not from `core.mig`;
- node resources: free = allocatable - requests, per shape (whole GPU, MIG instance,
  time-slice replica), zero and negative free left out;
- queue headroom: free nominal, what the cohort lends (lending limits respected, others'
  borrowing subtracted), the borrowing limit, and who borrows.
"""

from __future__ import annotations

import pytest
import yaml

from gpuledger.analytics.capacity.headroom import QueueQuota, headroom
from gpuledger.analytics.capacity.now import CardState, NodeState, capacity_now, placeable_profiles
from tests.shared_folder import shared_file


def _shared_profiles() -> dict:
    return yaml.safe_load(shared_file("mig-profiles.yaml").read_text())


FACTS = _shared_profiles()


def fits(model: str, counts: dict[str, int]) -> bool:
    """Independent placement search: give every instance a start so that starts are allowed,
    memory slices (8) never overlap, compute (7) and per-profile maxima hold."""
    profiles = {p["name"]: p for p in FACTS["models"][model]["profiles"]}
    if any(n > profiles[name]["max"] for name, n in counts.items()):
        return False
    if sum(profiles[name]["c"] * n for name, n in counts.items()) > 7:
        return False
    items = sorted((name for name, n in counts.items() for _ in range(n)),
                   key=lambda name: -profiles[name]["m"])

    def assign(i: int, used: frozenset[int]) -> bool:
        if i == len(items):
            return True
        p = profiles[items[i]]
        for start in FACTS["starts"][p["id"]]:
            slots = frozenset(range(start, start + p["m"]))
            if max(slots) < 8 and not slots & used and assign(i + 1, used | slots):
                return True
        return False

    return assign(0, frozenset())


def expected_placeable(model: str, counts: dict[str, int]) -> set[str]:
    names = [p["name"] for p in FACTS["models"][model]["profiles"] if not p["name"].endswith("+me")]
    return {n for n in names if fits(model, {**counts, n: counts.get(n, 0) + 1})}


FRAGMENTED = {
    "a-1": ("A100-80GB", {"1g.10gb": 1, "2g.20gb": 1, "3g.40gb": 1}),
    "a-2": ("A100-80GB", {"3g.40gb": 1}),
    "a-3": ("A100-80GB", {"1g.10gb": 4}),
    "a-4": ("A100-80GB", {"2g.20gb": 3}),
    "a-5": ("A100-80GB", {"7g.80gb": 1}),
    "a-6": ("A100-80GB", {}),
    "a-7": ("A100-80GB", {"1g.20gb": 2, "1g.10gb": 3}),
    "h-1": ("H100-80GB", {"4g.40gb": 1, "1g.10gb": 1}),
    "h-2": ("H100-80GB", {"1g.20gb": 1, "2g.20gb": 1, "1g.10gb": 2}),
}


@pytest.mark.parametrize("uuid", sorted(FRAGMENTED))
def test_each_card_lists_exactly_the_profiles_that_fit(uuid: str) -> None:
    model, counts = FRAGMENTED[uuid]
    assert set(placeable_profiles(model, counts)) == expected_placeable(model, counts)


def test_fleet_rows_count_the_cards_where_each_profile_fits() -> None:
    cards = [CardState("west", f"node-{u}", "train", model, u, counts)
             for u, (model, counts) in FRAGMENTED.items()]
    rows = {(r.model, r.shape): r for r in capacity_now([], cards)}
    for model in ("A100-80GB", "H100-80GB"):
        for p in FACTS["models"][model]["profiles"]:
            if p["name"].endswith("+me"):
                continue
            where = sorted(f"node-{u}" for u, (m, c) in FRAGMENTED.items()
                           if m == model and p["name"] in expected_placeable(m, c))
            row = rows.get((model, "mig " + p["name"]))
            if not where:
                assert row is None, (model, p["name"])
                continue
            assert row is not None and row.placeable == len(where) and list(row.nodes) == where
    # the sanity of the fixture itself: it really is fragmented somewhere
    assert not expected_placeable("A100-80GB", {"7g.80gb": 1})
    assert "3g.40gb" not in expected_placeable("A100-80GB", {"1g.10gb": 1, "2g.20gb": 1, "3g.40gb": 1})


def test_node_resources_free_is_allocatable_minus_requests() -> None:
    nodes = [
        NodeState("west", "n1", "train", "A100-80GB", "exclusive", {"nvidia.com/gpu": 8, "cpu": 64},
                  {"nvidia.com/gpu": 5}),
        NodeState("west", "n2", "train", "A100-80GB", "exclusive", {"nvidia.com/gpu": 8},
                  {"nvidia.com/gpu": 8}),
        NodeState("west", "n3", "train", "A100-80GB", "mig",
                  {"nvidia.com/mig-3g.40gb": 2, "nvidia.com/mig-1g.10gb": 1},
                  {"nvidia.com/mig-3g.40gb": 1, "nvidia.com/mig-1g.10gb": 1}),
        NodeState("west", "n4", "infer", "L4", "timeslice", {"nvidia.com/gpu": 4 * 4},
                  {"nvidia.com/gpu": 3}),
    ]
    rows = {(r.pool, r.shape): r for r in capacity_now(nodes)}
    assert rows[("train", "whole GPU")].ready == 8 - 5 and rows[("train", "whole GPU")].nodes == ("n1",)
    assert rows[("train", "mig 3g.40gb")].ready == 2 - 1
    assert ("train", "mig 1g.10gb") not in rows
    assert rows[("infer", "time-slice replica")].ready == 16 - 3
    assert all(r.shape != "cpu" for r in rows.values())


def test_queue_headroom_nominal_borrowable_lendable() -> None:
    gpu = "nvidia.com/gpu"
    rows = {h.cluster_queue: h for h in headroom([
        QueueQuota("west", "research", "lab", "a100", gpu, nominal=8, borrowing_limit=3, used=8),
        QueueQuota("west", "nlp", "lab", "a100", gpu, nominal=6, lending_limit=4, used=1),
        QueueQuota("west", "vision", "lab", "a100", gpu, nominal=4, used=6),
        QueueQuota("west", "solo", None, "a100", gpu, nominal=2, used=0),
    ])}
    # nlp lends nominal - max(used, guarantee 6-4=2) = 4; vision lends 0 and borrows 2.
    assert rows["research"].free == 0
    assert rows["research"].borrowable == min(3, 4 - 2)
    assert rows["research"].borrowers == ("vision",)
    assert rows["nlp"].free == 6 - 1 and rows["nlp"].lendable == 4
    # vision already borrows 2 (no limit): the pool is research's 0 + nlp's 4, minus nothing else
    assert rows["vision"].borrowable == 4
    assert rows["solo"].borrowable == 0 and rows["solo"].free == 2 and rows["solo"].lendable == 2


def test_hami_memory_and_cores_are_per_card_never_summed() -> None:
    """Two half-free HAMi cards of 40960 MiB: 40960-20480 and 40960-24576 MiB left, 100-60 and
    100-50 % cores. A pod takes both from ONE card, so `ready` is the larger card's (20480 MiB,
    50 %), not the sum (36864 MiB, 90 %), and `per_card` lists each card's, most first."""
    from gpuledger.analytics.capacity.now import hami_left

    devices = [*hami_left("west", "h1", "share", "A100-40GB", memory_mib=40960, used_mib=20480,
                          used_cores=60, card="GPU-a"),
               *hami_left("west", "h2", "share", "A100-40GB", memory_mib=40960, used_mib=24576,
                          used_cores=50, card="GPU-b")]
    rows = {r.shape: r for r in capacity_now([], [], devices)}
    mem, cores = rows["hami gpumem MiB"], rows["hami gpucores %"]
    assert mem.ready == 40960 - 20480 and mem.ready != (40960 - 20480) + (40960 - 24576)
    assert mem.per_card == (("h1/GPU-a", 40960 - 20480), ("h2/GPU-b", 40960 - 24576))
    assert cores.ready == 100 - 50
    assert cores.per_card == (("h2/GPU-b", 100 - 50), ("h1/GPU-a", 100 - 60))
    assert mem.nodes == ("h1", "h2")


def test_request_and_node_shapes_share_one_name() -> None:
    """What a request asks and what a node offers are named by one rule (`node_shape`,
    `request_need`), so the suggestion's match cannot miss a HAMi or MIG row by spelling."""
    from gpuledger.analytics.capacity.now import node_shape, request_need

    hami = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 20000, "nvidia.com/gpucores": 30}
    assert request_need(hami) == (node_shape("nvidia.com/gpumem", "vgpu"), 20000)
    assert request_need({"nvidia.com/gpucores": 30}) == (node_shape("nvidia.com/gpucores", "vgpu"), 30)
    assert request_need({"nvidia.com/mig-3g.40gb": 1}) == (node_shape("nvidia.com/mig-3g.40gb", "mig"), 1)
    assert request_need({"nvidia.com/gpu": 2}) == (node_shape("nvidia.com/gpu", "exclusive"), 2)
    assert request_need({"cpu": 4}) is None
