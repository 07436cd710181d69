"""The Kubernetes API collector against the real kube-apiserver with the simulator's objects.

Truth is the manifests the simulator produced (read directly, not through the collector).

Cases:
- nodes: pool, canonical model, GPU count, sharing mode, MIG config label, capacity JSON;
- namespaces: team from the `team` label, NULL where the simulator leaves a namespace unlabeled;
- pods: only those requesting GPU resources, with their requests summed over containers,
  node, queue label and controller owner;
- HAMi: a HAMi-only simulated fleet loaded beside it: its HAMi nodes (register annotation, no gpumem capacity) and pods
  (allocation annotation) read back give exactly the simulator's own `vgpu_allocations` of the
  pods alive at the snapshot (card, MiB, cores, HAMi's card total) and `vgpu` cards and nodes;
- Kueue v1beta2 ClusterQueues, LocalQueues, ResourceFlavors (cohort from the spec);
- one snapshot lists Events, Kueue Workloads and ClusterQueues and Volcano PodGroups once each
  (the pending, preemption and queue readers share one listing, `collectors.statuses`), counted
  on the real client's calls;
- pagination: pages of 3 give exactly the same frames as one big page;
- an expired continue token (HTTP 410 Gone) restarts the list, and the result is still complete
  and duplicate-free; a token that keeps expiring fails with a clear, bounded error;
- the pipeline loads the snapshot and, with the API reachable, takes teams from it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from gpuledger.collectors.kubernetes import KubernetesCollector, paginate
from gpuledger.core.config import Settings
from gpuledger.core.errors import TemporaryClusterError
from gpuledger.core.window import Window

pytestmark = pytest.mark.k8s
AT = datetime(2026, 3, 1, 6, tzinfo=UTC)


@pytest.fixture(scope="module")
def manifests() -> list[dict[str, Any]]:
    from gpuledger.simulator.engine import Simulation
    from gpuledger.simulator.fleet import FleetSpec

    sim = Simulation(FleetSpec.default(gpus=16), Window(AT - timedelta(hours=6), AT), seed=7)
    return [*sim.kube_manifests(), *sim.kueue_manifests()]


@pytest.fixture(scope="module")
def hami_sim(cluster: Any) -> Any:
    """A HAMi-only fleet (the default fleet's vGPU pool, 8 cards) loaded beside the default one
    (the 16-card default fleet has no vGPU node)."""
    from gpuledger.simulator.engine import Simulation
    from gpuledger.simulator.field import FieldEffects
    from tests.field.harness import hami_fleet
    from tools.kube_loader import load_manifests

    sim = Simulation(hami_fleet(8, FieldEffects.none()), Window(AT - timedelta(hours=6), AT), seed=7)
    with cluster.api_client() as api:
        load_manifests(api, sim.kube_manifests())
    return sim


@pytest.fixture(scope="module")
def cluster(k8s_cluster: Any, manifests: list[dict[str, Any]]) -> Any:
    from tools.kube_loader import load_manifests

    with k8s_cluster.api_client() as api:
        load_manifests(api, manifests)
    return k8s_cluster


@pytest.fixture
def collector(cluster: Any) -> Iterator[KubernetesCollector]:
    col = KubernetesCollector.from_kubeconfig(str(cluster.kubeconfig), Settings(), now=lambda: AT)
    try:
        yield col
    finally:
        col.api.close()


def _of(manifests: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [m for m in manifests if m["kind"] == kind]


def test_nodes_and_namespaces(collector: KubernetesCollector, manifests: list[dict[str, Any]]) -> None:
    nodes = {r["node"]: r for r in collector.nodes(AT).to_dicts()}
    for m in _of(manifests, "Node"):
        labels = m["metadata"]["labels"]
        row = nodes[m["metadata"]["name"]]
        assert row["pool"] == labels["gpuledger.io/pool"]
        assert row["gpu_count"] == int(labels["nvidia.com/gpu.count"])
        assert row["mig_config"] == labels["nvidia.com/mig.config"]
        has_mig = any(k.startswith("nvidia.com/mig-") for k in m["status"]["capacity"])
        assert (row["sharing_mode"] == "mig") == has_mig
        assert json.loads(row["labels"]) == labels
    namespaces = {r["namespace"]: r["team"] for r in collector.namespaces(AT).to_dicts()}
    for m in _of(manifests, "Namespace"):
        assert namespaces[m["metadata"]["name"]] == (m["metadata"].get("labels") or {}).get("team")
    assert any(t is None for n, t in namespaces.items() if n in {m["metadata"]["name"] for m in _of(manifests, "Namespace")})


def test_gpu_pods(collector: KubernetesCollector, manifests: list[dict[str, Any]]) -> None:
    pods = {(r["namespace"], r["pod"]): r for r in collector.pods(AT).to_dicts()}
    expected = 0
    for m in _of(manifests, "Pod"):
        want: dict[str, float] = {}
        for c in m["spec"]["containers"]:
            for name, amount in (c.get("resources", {}).get("requests") or {}).items():
                if name.startswith("nvidia.com/"):
                    want[name] = want.get(name, 0) + float(amount)
        key = (m["metadata"]["namespace"], m["metadata"]["name"])
        if not want:
            assert key not in pods
            continue
        expected += 1
        row = pods[key]
        assert json.loads(row["gpu_requests"]) == want
        assert row["node"] == m["spec"].get("nodeName")
        assert row["queue"] == m["metadata"].get("labels", {}).get("kueue.x-k8s.io/queue-name")
        assert row["owner_kind"] == m["metadata"]["ownerReferences"][0]["kind"]
    assert expected > 0


def test_hami_cards_and_allocations(collector: KubernetesCollector, hami_sim: Any) -> None:
    import polars as pl

    manifests = hami_sim.kube_manifests()
    frames = collector.snapshot()
    last = AT - hami_sim.window.step  # the step the manifests show
    truth = hami_sim.inventory()["vgpu_allocations"].filter(
        (pl.col("start_ts") <= last) & (pl.col("end_ts") > last))
    columns = ["uuid", "namespace", "pod", "container_index", "source", "mem_mib", "cores_pct", "card_mem_mib"]
    assert truth.height > 0, "HAMi pods at the snapshot"
    got = frames["vgpu_allocations"]
    assert sorted(got.select(columns).rows()) == sorted(truth.select(columns).rows())
    assert set(got["end_ts"].to_list()) == {AT}
    hami_nodes = {m["metadata"]["name"] for m in _of(manifests, "Node")
                  if "hami.io/node-nvidia-register" in m["metadata"].get("annotations", {})}
    assert hami_nodes and not any("nvidia.com/gpumem" in m["status"]["capacity"]
                                  for m in _of(manifests, "Node"))
    modes = dict(frames["nodes"].select("node", "sharing_mode").rows())
    assert {n for n, mode in modes.items() if mode == "vgpu"} == hami_nodes  # the 16 cards: none
    cards = frames["gpus"].filter(pl.col("sharing_mode") == "vgpu")
    assert set(cards["node"].to_list()) == hami_nodes
    assert set(truth["uuid"].to_list()) <= set(cards["uuid"].to_list())


def test_kueue_objects(collector: KubernetesCollector, manifests: list[dict[str, Any]]) -> None:
    queues = collector.queues(AT)
    got = {(r["kind"], r["namespace"], r["name"]) for r in queues.to_dicts()}
    for kind in ("ClusterQueue", "LocalQueue", "ResourceFlavor"):
        for m in _of(manifests, kind):
            assert (kind, m["metadata"].get("namespace", ""), m["metadata"]["name"]) in got
    cq = {r["name"]: r for r in queues.to_dicts() if r["kind"] == "ClusterQueue"}
    for m in _of(manifests, "ClusterQueue"):
        assert cq[m["metadata"]["name"]]["cohort"] == m["spec"].get("cohortName")


def test_one_snapshot_lists_each_status_kind_once(collector: KubernetesCollector) -> None:
    """Counted on the real client: every first page (no `_continue`) of a list call is one list."""
    first_pages: list[str] = []

    def counted(call: Any, name: Any) -> Any:
        def through(*args: Any, **kwargs: Any) -> Any:
            if "_continue" not in kwargs:
                first_pages.append(name(kwargs))
            return call(*args, **kwargs)
        return through

    core, custom = collector.core, collector.custom
    core.list_event_for_all_namespaces = counted(core.list_event_for_all_namespaces, lambda _: "events")
    custom.list_cluster_custom_object = counted(custom.list_cluster_custom_object, lambda kw: kw["plural"])
    frames = collector.snapshot()
    assert "pending_workloads" in frames and "preemptions" in frames
    for plural in ("events", "workloads", "podgroups", "clusterqueues"):
        assert first_pages.count(plural) == 1, (plural, first_pages)


def test_small_pages_equal_one_page(cluster: Any) -> None:
    settings = Settings()
    big = KubernetesCollector.from_kubeconfig(str(cluster.kubeconfig), settings, now=lambda: AT)
    small = KubernetesCollector.from_kubeconfig(str(cluster.kubeconfig), settings, page_size=3, now=lambda: AT)
    try:
        for name in ("nodes", "namespaces", "pods", "queues"):
            a = getattr(big, name)(AT).sort(pl_key(name))
            b = getattr(small, name)(AT).sort(pl_key(name))
            assert a.equals(b), name
    finally:
        big.api.close()
        small.api.close()


def pl_key(name: str) -> list[str]:
    return {"nodes": ["node"], "namespaces": ["namespace"], "pods": ["namespace", "pod"],
            "queues": ["kind", "namespace", "name"]}[name]


def test_expired_continue_relists(cluster: Any, collector: KubernetesCollector) -> None:
    """The apiserver answers 410 Gone when a continue token's revision was compacted away. This
    test environment's watch cache keeps serving old tokens from its snapshots (checked: an aged
    token after an etcd compaction still lists), so the 410 cannot be provoked here; the first
    continue call is answered with the apiserver's 410 (as the client raises it) and every other
    call is real."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    core = client.CoreV1Api(collector.api)
    expected = {i["metadata"]["name"] for i in json.loads(core.list_namespace(_preload_content=False).data)["items"]}
    calls: list[str] = []

    def lister(**kwargs: Any) -> Any:
        calls.append("continue" if kwargs.get("_continue") else "first")
        if kwargs.get("_continue") and calls.count("continue") == 1:
            gone = ApiException(status=410, reason="Gone")
            gone.body = json.dumps({"kind": "Status", "status": "Failure", "reason": "Expired", "code": 410,
                                    "message": "The provided continue parameter is too old to display a "
                                               "consistent list result."})
            raise gone
        return core.list_namespace(**kwargs)

    items = list(paginate(lister, "namespaces", page_size=2))
    assert calls[:3] == ["first", "continue", "first"]  # the 410 restarted the list from scratch
    names = [i["metadata"]["name"] for i in items]
    assert len(names) == len(set(names)) == len(expected) and set(names) == expected


def test_persistent_expiry_fails_clearly(collector: KubernetesCollector) -> None:
    from kubernetes.client.exceptions import ApiException

    def always_gone(**kwargs: Any) -> Any:
        if kwargs.get("_continue"):
            raise ApiException(status=410, reason="Gone")
        from kubernetes import client

        return client.CoreV1Api(collector.api).list_namespace(**kwargs)

    with pytest.raises(TemporaryClusterError, match="continue token expired 4 times"):
        list(paginate(always_gone, "namespaces", page_size=1))


@pytest.mark.prometheus
def test_collect_command_with_cluster_and_prometheus(cluster: Any, manifests: list[dict[str, Any]],
                                                     metrics_servers: Any, tmp_path: Any,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from gpuledger.cli import main
    from gpuledger.simulator.engine import Simulation
    from gpuledger.simulator.fleet import FleetSpec
    from gpuledger.warehouse import Warehouse

    window = Window(AT - timedelta(hours=6), AT)
    sim = Simulation(FleetSpec.default(gpus=16), window, seed=7)
    history = tmp_path / "fleet.om"
    sim.write_openmetrics(history)
    server = metrics_servers.prometheus(history)
    path = tmp_path / "w.duckdb"
    code = main(["--warehouse", str(path), "collect", "--prometheus", server.url,
                 "--start", window.start.isoformat(), "--end", window.end.isoformat(), "--step", "60s",
                 "--kubeconfig", str(cluster.kubeconfig)])
    assert code == 0, capsys.readouterr().err
    with Warehouse.open(path, read_only=True) as wh:
        assert wh.watermark("kubernetes") is not None
        assert wh.watermark("prometheus.gpu_samples") == window.end
        nodes = {r[0]: r for r in wh.query("SELECT node, pool, model, gpu_count, mig_config FROM nodes").rows()}
        for m in [m for m in manifests if m["kind"] == "Node"]:
            labels = m["metadata"]["labels"]
            _, pool, model, count, mig = nodes[m["metadata"]["name"]]
            assert (pool, count, mig) == (labels["gpuledger.io/pool"], int(labels["nvidia.com/gpu.count"]),
                                          labels["nvidia.com/mig.config"])
            assert model is not None  # from the metrics and from GFD labels, merged
        teams = dict(wh.query("SELECT namespace, team FROM namespaces").rows())
        for m in [m for m in manifests if m["kind"] == "Namespace"]:
            assert teams[m["metadata"]["name"]] == (m["metadata"].get("labels") or {}).get("team")
        cqs = wh.scalar("SELECT count(*) FROM queues WHERE kind = 'ClusterQueue'")
        assert cqs >= len([m for m in manifests if m["kind"] == "ClusterQueue"])
        assert wh.count("gpu_samples") == sum(f["gpu_samples"].height for _, f in sim.batches())
