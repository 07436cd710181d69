"""The real Kueue admits suspended GPU Jobs in order against a ClusterQueue of 2 GPUs.

Case: ClusterQueue `twin-gpus` with nominal quota 2 `nvidia.com/gpu` (one flavor, no cohort);
Jobs a (1 GPU), b (1 GPU), c (2 GPUs) created suspended, in that order, with the LocalQueue's
label. Kueue's documented semantics (BestEffortFIFO, no borrowing without a cohort) computed here:
a and b are admitted (1 + 1 <= 2) and unsuspended; c needs 2 while 2 - 1 - 1 = 0 remain, so its
Workload keeps QuotaReserved=False and the Job stays suspended. Waits are watches on Workloads and Jobs.
"""

from __future__ import annotations

from typing import Any

from tools.twin.harness import GPU, SCHEDULER_NAME, Twin

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
QUOTA = 2
WATCH_TIMEOUT_S = 90


def _job(name: str, gpus: int, queue: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": {"suspend": True, "template": {"spec": {
            "restartPolicy": "Never", "schedulerName": SCHEDULER_NAME,
            "containers": [{"name": "main", "image": "registry.invalid/twin:none",
                            "resources": {"limits": {GPU: str(gpus)}}}]}}},
    }


def _condition(workload: dict[str, Any], kind: str) -> tuple[str, str]:
    for cond in workload.get("status", {}).get("conditions", []):
        if cond["type"] == kind:
            return cond["status"], cond.get("message", "")
    return "", ""


def _by_job(workloads: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {w["metadata"]["ownerReferences"][0]["name"]: w for w in workloads.values()
            if w["metadata"].get("ownerReferences")}


def test_kueue_admits_two_one_gpu_jobs_and_holds_the_two_gpu_job(twin: Twin, k8s_namespace: str) -> None:
    from kubernetes import client, watch

    asks = {"a": 1, "b": 1, "c": 2}
    free, expect_admitted = QUOTA, []
    for name in ("a", "b", "c"):  # FIFO against the nominal quota, computed independently
        if asks[name] <= free:
            free -= asks[name]
            expect_admitted.append(name)
    assert expect_admitted == ["a", "b"]
    twin.start_kueue()
    cq, flavor = f"twin-gpus-{k8s_namespace}"[:63], f"twin-default-{k8s_namespace}"[:63]
    with twin.cluster.api_client() as api:
        custom: Any = client.CustomObjectsApi(api)
        batch: Any = client.BatchV1Api(api)
        custom.create_cluster_custom_object(GROUP, VERSION, "resourceflavors",
                                            {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceFlavor",
                                             "metadata": {"name": flavor}, "spec": {}})
        custom.create_cluster_custom_object(GROUP, VERSION, "clusterqueues", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "ClusterQueue", "metadata": {"name": cq},
            "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": [GPU], "flavors": [
                {"name": flavor, "resources": [{"name": GPU, "nominalQuota": QUOTA}]}]}]}})
        try:
            custom.create_namespaced_custom_object(GROUP, VERSION, k8s_namespace, "localqueues", {
                "apiVersion": f"{GROUP}/{VERSION}", "kind": "LocalQueue", "metadata": {"name": "lq"},
                "spec": {"clusterQueue": cq}})
            latest: dict[str, dict[str, Any]] = {}

            def follow(until: Any) -> None:
                """Watch the namespace's Workloads into `latest` until `until()` (or the timeout)."""
                w = watch.Watch()
                for event in w.stream(custom.list_namespaced_custom_object, GROUP, VERSION, k8s_namespace,
                                      "workloads", timeout_seconds=WATCH_TIMEOUT_S):
                    obj = event["object"]
                    latest[obj["metadata"]["name"]] = obj
                    if until():
                        w.stop()

            def admitted(names: tuple[str, ...]) -> bool:
                jobs = _by_job(latest)
                return all(_condition(jobs.get(n, {}), "Admitted")[0] == "True" for n in names)

            def done() -> bool:
                return admitted(("a", "b")) and _condition(_by_job(latest).get("c", {}), "QuotaReserved")[0] == "False"

            # In order, as the case says: Kueue orders by creation time at one-second resolution, so
            # c waits until a and b are admitted before it exists (else a tie may admit c first).
            for name in ("a", "b"):
                batch.create_namespaced_job(k8s_namespace, _job(name, asks[name], "lq"))
            follow(lambda: admitted(("a", "b")))
            batch.create_namespaced_job(k8s_namespace, _job("c", asks["c"], "lq"))
            follow(done)
            jobs = _by_job(latest)
            states = {n: (_condition(wl, "Admitted"), _condition(wl, "QuotaReserved")) for n, wl in jobs.items()}
            assert done(), f"watch ended after {WATCH_TIMEOUT_S}s before the expected state: {states}"
            assert "insufficient unused quota" in _condition(jobs["c"], "QuotaReserved")[1], states
            # Kueue unsuspends an admitted Job in a later reconcile than the one that admits its
            # Workload: follow the Jobs until a and b run (a watch, not a read that races it).
            suspended = {n: batch.read_namespaced_job(n, k8s_namespace).spec.suspend for n in asks}
            jobs_watch = watch.Watch()
            for event in jobs_watch.stream(batch.list_namespaced_job, k8s_namespace,
                                           timeout_seconds=WATCH_TIMEOUT_S):
                suspended[event["object"].metadata.name] = event["object"].spec.suspend
                if not suspended["a"] and not suspended["b"]:
                    jobs_watch.stop()
            assert suspended == {"a": False, "b": False, "c": True}
        finally:
            custom.delete_cluster_custom_object(GROUP, VERSION, "clusterqueues", cq)
            custom.delete_cluster_custom_object(GROUP, VERSION, "resourceflavors", flavor)
