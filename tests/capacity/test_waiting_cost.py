"""The cost of waiting and the suggestion that fits now (analytics.waiting.cost, .suggest).

Cases:
- GPU-hours waiting per team and queue = size x hours waited (a 3g instance at 3/7 of a card),
  with the share of waits a layout change or a suggestion could serve;
- wait p50/p95 per shape over ended and running waits; the usual wait is the p50 of ended ones
  only (none ended: unknown);
- suggestions: another LocalQueue whose (other) ClusterQueue admits it (quota), a larger MIG
  profile ready now, the full-card profile for a whole GPU, the same shape in another cluster,
  another pool for a workload pinned to a pool (an unpinned one: none); none for a request that
  can never run.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from gpuledger.analytics.capacity.headroom import Headroom
from gpuledger.analytics.capacity.now import ShapeFree
from gpuledger.analytics.waiting.cost import by_queue, by_shape, typical_wait
from gpuledger.analytics.waiting.suggest import suggest
from gpuledger.analytics.waiting.why import FRAGMENTED, NEVER, NO_CAPACITY, QUOTA, Pending, Verdict

NOW = datetime(2026, 12, 2, 12, tzinfo=UTC)
H = timedelta(hours=1)


def pod(name: str, requests: dict[str, float], created_h: float, last_seen_h: float = 0.0,
        queue: str = "research") -> Pending:
    return Pending("Pod", "nlp", name, "kube-scheduler", queue=queue, requests=requests,
                   created_at=NOW - created_h * H, last_seen=NOW - last_seen_h * H)


def test_gpu_hours_and_share_servable_per_team_and_queue() -> None:
    a = pod("a", {"nvidia.com/gpu": 2}, 3)
    b = pod("b", {"nvidia.com/mig-3g.40gb": 1}, 1)
    verdicts = {("Pod", "nlp", "a"): Verdict("Pod", "nlp", "a", NO_CAPACITY, "", "nvidia.com/gpu"),
                ("Pod", "nlp", "b"): Verdict("Pod", "nlp", "b", FRAGMENTED, "", "nvidia.com/mig-3g.40gb")}
    [row] = by_queue([a, b], verdicts, set(), {"nlp": "nlp-team"}, NOW)
    assert (row.team, row.queue, row.waiting) == ("nlp-team", "research", 2)
    assert abs(row.gpu_hours_waiting - (2 * 3 + 3 / 7 * 1)) < 1e-9
    assert row.servable_elsewhere == 1 and row.servable_share == 0.5


def test_wait_quantiles_per_shape_and_the_usual_wait_of_ended_ones() -> None:
    running = pod("run", {"nvidia.com/gpu": 1}, 3)
    ended = [pod("e1", {"nvidia.com/gpu": 1}, 10, last_seen_h=6), pod("e2", {"nvidia.com/gpu": 1}, 5, 3)]
    waiting = {("Pod", "nlp", "run")}
    [shape] = by_shape([running, *ended], NOW)
    waits = sorted([3.0, 4.0, 2.0])
    assert shape.shape == "nvidia.com/gpu" and shape.waits == 3
    assert shape.p50_hours == waits[1]
    assert abs(shape.p95_hours - (waits[1] + 0.9 * (waits[2] - waits[1]))) < 1e-9  # linear, 0.95*(3-1)
    assert typical_wait([running, *ended], waiting, "nvidia.com/gpu", NOW) == (4.0 + 2.0) / 2
    assert typical_wait([running], waiting, "nvidia.com/gpu", NOW) is None


def _row(cluster: str, shape: str, ready: float, model: str = "A100-80GB") -> ShapeFree:
    return ShapeFree(cluster, "train", model, shape, ready, 0, (f"{cluster}-node",))


def test_suggestions_that_fit_now() -> None:
    quota = pod("q", {"nvidia.com/gpu": 2}, 1)
    room = [Headroom("west", "spare-cq", None, "a100", "nvidia.com/gpu", 4, 1, 3, 0, 4, ()),
            Headroom("west", "research-cq", None, "a100", "nvidia.com/gpu", 8, 0, 8, 0, 8, ()),
            Headroom("west", "tight-cq", None, "a100", "nvidia.com/gpu", 4, 3, 1, 0, 4, ())]
    lqs = {("nlp", "research"): "research-cq", ("nlp", "also-research"): "research-cq",
           ("nlp", "tight"): "tight-cq", ("nlp", "spare"): "spare-cq"}
    tip = suggest(quota, Verdict("Pod", "nlp", "q", QUOTA, "", None), [], room, lqs, here="west")
    assert tip is not None and tip.change == "kueue.x-k8s.io/queue-name: research → spare"

    mig = pod("m", {"nvidia.com/mig-3g.40gb": 1}, 1)
    rows = [_row("west", "mig 1g.10gb", 5), _row("west", "mig 7g.80gb", 1), _row("west", "mig 4g.40gb", 1)]
    tip = suggest(mig, Verdict("Pod", "nlp", "m", FRAGMENTED, "", None), rows, [], {}, here="west")
    assert tip is not None and tip.change == "nvidia.com/mig-3g.40gb: 1 → nvidia.com/mig-4g.40gb: 1"

    whole = pod("w", {"nvidia.com/gpu": 1}, 1)
    tip = suggest(whole, Verdict("Pod", "nlp", "w", NO_CAPACITY, "", None), rows, [], {}, here="west")
    assert tip is not None and tip.change == "nvidia.com/gpu: 1 → nvidia.com/mig-7g.80gb: 1"

    two = pod("t", {"nvidia.com/gpu": 2}, 1)
    east = [_row("west", "whole GPU", 1), _row("east", "whole GPU", 2)]
    tip = suggest(two, Verdict("Pod", "nlp", "t", NO_CAPACITY, "", None), east, [], {}, here="west")
    assert tip is not None and tip.change == "submit to cluster east"

    assert suggest(two, Verdict("Pod", "nlp", "t", NEVER, "", None), east, [], {}, here="west") is None

    pools = [ShapeFree("west", "train", "A100-80GB", "whole GPU", 0, 0, ()),
             ShapeFree("west", "infer", "A100-80GB", "whole GPU", 4, 0, ("i-1",))]
    pinned = Pending("Pod", "nlp", "p", "kube-scheduler", requests={"nvidia.com/gpu": 2},
                     node_selector={"gpuledger.io/pool": "train"})
    tip = suggest(pinned, Verdict("Pod", "nlp", "p", NO_CAPACITY, "", None), pools, [], {}, here="west")
    assert tip is not None and tip.change == "nodeSelector gpuledger.io/pool: train → infer"
    free = Pending("Pod", "nlp", "f", "kube-scheduler", requests={"nvidia.com/gpu": 2})
    assert suggest(free, Verdict("Pod", "nlp", "f", NO_CAPACITY, "", None), pools, [], {}, here="west") is None


def test_a_shortage_the_inventory_no_longer_has_says_so() -> None:
    """The scheduler's `Insufficient` predates a node that now has room: the class stays what the
    status says, and the detail says how much of the request's shape is free now on the nodes
    the pod may use (a node it can land on has room for all of it)."""
    from gpuledger.analytics.capacity.now import NodeState
    from gpuledger.analytics.waiting.why import Context, classify, free_by_shape

    msg = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
    p = Pending("Pod", "nlp", "late", "kube-scheduler", requests={"nvidia.com/gpu": 2},
                event_message=msg, node_selector={"pool": "a"})
    labels = {"n1": {"pool": "a"}, "n2": {"pool": "b"}}

    def fleet(n1_running: float) -> Context:
        nodes = [NodeState("c", "n1", "a", "H100-80GB", "exclusive", {"nvidia.com/gpu": 8},
                           {"nvidia.com/gpu": n1_running}),
                 NodeState("c", "n2", "b", "H100-80GB", "exclusive", {"nvidia.com/gpu": 8})]
        return Context(node_labels=labels, free=free_by_shape(nodes))

    v = classify(p, fleet(5))
    assert v.reason == NO_CAPACITY and "now 3 × whole GPU free on matching nodes" in v.detail
    assert "free on matching nodes" not in classify(p, fleet(7)).detail


def test_the_note_counts_only_the_shape_the_request_asks() -> None:
    """One whole GPU free, and a time-sliced node with 8 free replicas and a HAMi node with 60
    free vGPU slots (all `nvidia.com/gpu` to the node): a whole-GPU request's note counts the
    one whole GPU (not 1 + 8 + 60 = 69); a request of 2 whole GPUs gets no note at all, though
    69 `nvidia.com/gpu` are free."""
    from gpuledger.analytics.capacity.now import NodeState
    from gpuledger.analytics.waiting.why import Context, classify, free_by_shape

    nodes = [NodeState("c", "whole", "train", "H100-80GB", "exclusive", {"nvidia.com/gpu": 8},
                       {"nvidia.com/gpu": 7}),
             NodeState("c", "ts", "infer", "A100-SXM4-40GB", "timeslice", {"nvidia.com/gpu": 8}),
             NodeState("c", "hami", "vgpu", "H100-80GB", "vgpu", {"nvidia.com/gpu": 60})]
    ctx = Context(free=free_by_shape(nodes))
    msg = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
    one = Pending("Pod", "nlp", "one", "kube-scheduler", requests={"nvidia.com/gpu": 1}, event_message=msg)
    detail = classify(one, ctx).detail
    assert "[now 1 × whole GPU free on matching nodes" in detail and "69" not in detail
    two = Pending("Pod", "nlp", "two", "kube-scheduler", requests={"nvidia.com/gpu": 2}, event_message=msg)
    assert "free on matching nodes" not in classify(two, ctx).detail


def test_a_pending_hami_request_gets_a_suggestion_when_one_card_has_room() -> None:
    """A HAMi pod pinned to pool `small` asks 20000 MiB and 30 % cores of one card. Pool `big`
    has a card with 40960-20480 = 20480 MiB and 100-60 = 40 % left: it fits there, and the
    suggestion names that card. Two cards with 16384 MiB each (32768 in all) hold no 20000 MiB
    pod; nor does a card with the memory but 100-80 = 20 % cores while the cores are on another."""
    from gpuledger.analytics.capacity.now import capacity_now, hami_left

    asked = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 20000, "nvidia.com/gpucores": 30}
    p = Pending("Pod", "nlp", "h", "kube-scheduler", requests=asked,
                node_selector={"gpuledger.io/pool": "small"})
    v = Verdict("Pod", "nlp", "h", NO_CAPACITY, "", "nvidia.com/gpu")

    def tip(*cards: tuple[str, float, float]) -> str | None:
        devices = [d for uuid, used_mib, used_cores in cards
                   for d in hami_left("west", f"n-{uuid}", "big", "A100-40GB", memory_mib=40960,
                                      used_mib=used_mib, used_cores=used_cores, card=uuid)]
        found = suggest(p, v, capacity_now([], [], devices), [], {}, here="west")
        return None if found is None else f"{found.change} | {found.where}"

    assert tip(("GPU-a", 20480, 60), ("GPU-b", 40960 - 16384, 0)) == (
        "nodeSelector gpuledger.io/pool: small → big | fits now on n-GPU-a/GPU-a (cluster west, pool big)")
    assert tip(("GPU-a", 40960 - 16384, 0), ("GPU-b", 40960 - 16384, 0)) is None
    assert tip(("GPU-a", 20480, 80), ("GPU-b", 40960 - 100, 0)) is None
