"""The real kube-scheduler places GPU pods on a KWOK node, and says why one does not fit.

Case: one KWOK node advertising 2 `nvidia.com/gpu`; pods a and b ask for 1 GPU each, then pod c
asks for 2. The expected outcome is computed here from the node's capacity, independently of
the scheduler: a and b fit (1 + 1 <= 2) and bind to the node; c then needs 2 more GPUs while
2 - 1 - 1 = 0 are free, so it stays Pending with PodScheduled=False, reason Unschedulable,
"Insufficient nvidia.com/gpu". Every wait is a watch on the pods (no polling of a transient),
bounded by a timeout that fails the test with the last state seen.
"""

from __future__ import annotations

from typing import Any

from tools.twin.harness import GPU, NOT_READY_TAINT, Twin, add_ready_node, gpu_node, gpu_pod

NODE_GPUS = 2
WATCH_TIMEOUT_S = 90


def _scheduled(pod: Any) -> tuple[str, str, str] | None:
    for cond in pod.status.conditions or []:
        if cond.type == "PodScheduled":
            return cond.status, cond.reason or "", cond.message or ""
    return None


def _watch_until(core: Any, namespace: str, done: Any) -> dict[str, Any]:
    """Follow the namespace's pods until `done(latest pods by name)`; the latest state on success."""
    from kubernetes import watch

    latest: dict[str, Any] = {}
    listing = core.list_namespaced_pod(namespace)
    for pod in listing.items:
        latest[pod.metadata.name] = pod
    if done(latest):
        return latest
    w = watch.Watch()
    for event in w.stream(core.list_namespaced_pod, namespace, resource_version=listing.metadata.resource_version,
                          timeout_seconds=WATCH_TIMEOUT_S):
        pod = event["object"]
        latest[pod.metadata.name] = pod
        if done(latest):
            w.stop()
            return latest
    states = {n: (p.spec.node_name, p.status.phase, _scheduled(p)) for n, p in latest.items()}
    raise AssertionError(f"watch ended after {WATCH_TIMEOUT_S}s before the expected state: {states}")


def test_two_one_gpu_pods_bind_and_a_two_gpu_pod_is_unschedulable(
    twin: Twin, k8s_namespace: str
) -> None:
    from kubernetes import client

    node = "twin-gpu-node-0"
    asks = {"a": 1, "b": 1, "c": 2}
    # Independent expectation: first-come placement against the node's capacity.
    free, expect_bound = NODE_GPUS, set()
    for name in ("a", "b"):
        assert asks[name] <= free
        free -= asks[name]
        expect_bound.add(name)
    assert asks["c"] > free  # 2 > 0: c cannot fit
    with twin.cluster.api_client() as api:
        core = client.CoreV1Api(api)
        add_ready_node(api, gpu_node(node, NODE_GPUS))
        try:
            assert NOT_READY_TAINT not in {t.key for t in core.read_node(node).spec.taints or []}
            for name in ("a", "b"):
                core.create_namespaced_pod(k8s_namespace, gpu_pod(name, asks[name]))
            # a and b bound to the node and made Running by KWOK's pod-ready stage.
            first = _watch_until(core, k8s_namespace, lambda pods: all(
                n in pods and pods[n].spec.node_name == node and pods[n].status.phase == "Running"
                for n in expect_bound))
            assert {n for n, p in first.items() if p.spec.node_name == node} == expect_bound
            core.create_namespaced_pod(k8s_namespace, gpu_pod("c", asks["c"]))
            final = _watch_until(core, k8s_namespace, lambda pods: "c" in pods and (
                (_scheduled(pods["c"]) or ("", "", ""))[1] == "Unschedulable"))
            status, reason, message = _scheduled(final["c"]) or ("", "", "")
            assert (status, reason) == ("False", "Unschedulable")
            assert f"Insufficient {GPU}" in message, message
            assert final["c"].spec.node_name is None and final["c"].status.phase == "Pending"
            assert {n for n, p in final.items() if p.spec.node_name == node} == expect_bound
            ready = [c.status for c in core.read_node(node).status.conditions or [] if c.type == "Ready"]
            assert ready == ["True"]  # KWOK's node-initialize stage
        finally:
            core.delete_node(node)  # nodes are cluster-wide: leave the session cluster as found
