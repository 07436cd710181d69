"""Replay a recorded window of GPU workloads on the twin: the real Kueue, kube-scheduler and Job controller.

Input (`Window`): ClusterQueues (nominal GPUs, cohort, borrowing/lending limits, preemption policy),
KWOK nodes (GPUs each) and workloads (arrival minute, GPUs, ClusterQueue, priority, run minutes).
Steps of `replay()`:
1. Cluster objects: the ResourceFlavors with their KWOK nodes (tools/twin/flavors.py; a window
   without flavors gets one flavor, no nodeLabels, whole GPUs), the ClusterQueues (resourceGroups
   over the flavors), one LocalQueue per ClusterQueue (same name) in `namespace`, a
   WorkloadPriorityClass per distinct priority, the nodes Ready (`not-ready` taint lifted). Watch
   until every ClusterQueue and LocalQueue reports Active.
2. Start the `record.Recorder` watches (Workloads, Pods), then the clock: Job i is created at wall
   `t0 + arrival_i * seconds_per_minute`, suspended, labelled with its LocalQueue (and priority
   class); Kueue admits it by unsuspending it. Its pod carries KWOK's
   `pod-complete.stage.kwok.x-k8s.io/delay` = run minutes x seconds per minute: `timed_stages()`
   gives KWOK's "fast" Stages with that delay added to pod-complete, so the pod Succeeds that long
   after it runs, the Job controller completes the Job and Kueue releases its quota.
3. Wait (on the watch) until every Job's Workload is Finished, or the window's end plus a margin.
4. `summarize` the watched events per queue (record.py); delete the cluster-scoped objects.

The clock is COMPRESSED, so seconds_per_minute must be generous against the control loops' latency
(about a second per hop on a loaded machine): results are read as ORDER and counts from the watch;
minutes are wall-derived and carry that latency.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import yaml

from tools.twin.flavors import (
    Flavor,
    FlavorQuota,
    default_flavor,
    flavor_node,
    node_names,
    resource_flavor,
    resource_groups,
)
from tools.twin.harness import GPU, SCHEDULER_NAME, add_ready_node, fast_stages
from tools.twin.record import GROUP, VERSION, JobFacts, QueueOutcome, Recorder, Seen, summarize
from tools.twin_build.builder import TwinBuildError

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

    from tools.twin.harness import Twin
    from tools.twin_build.versions import Layout

RUN_TIME_ANNOTATION = "pod-complete.stage.kwok.x-k8s.io/delay"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
MARGIN_MIN = 10.0


@dataclass(frozen=True)
class QueueSpec:
    """A ClusterQueue (and its LocalQueue of the same name): `quotas` per flavor and resource in
    resourceGroups order, or, when empty, `nominal_gpus` (and the limits) of the window's one
    flavor. `nominal_gpus` is also what `summarize` counts borrowing admissions against."""

    name: str
    nominal_gpus: int
    cohort: str | None = None
    borrowing_limit: int | None = None
    lending_limit: int | None = None
    reclaim_within_cohort: str = "Never"
    within_cluster_queue: str = "Never"
    quotas: tuple[FlavorQuota, ...] = ()
    weight: float | None = None
    """`spec.fairSharing.weight` (None: not set, Kueue's 1); it orders the cohort's admissions only
    where the twin's Kueue runs with fair sharing (`Twin.start_kueue(fair_sharing=True)`)."""

    def flavor_quotas(self, flavor: str) -> tuple[FlavorQuota, ...]:
        """`quotas`, or the one-flavor quota of `nominal_gpus` in `flavor`."""
        return self.quotas or (FlavorQuota(flavor, GPU, self.nominal_gpus, self.borrowing_limit,
                                           self.lending_limit),)


@dataclass(frozen=True)
class WorkloadSpec:
    """One Job of the window: arrives at `arrival_min`, asks `gpus` of `resource` (whole GPUs or a
    MIG profile), runs `run_min` once admitted. `flavor` pins it (nodeSelector = that flavor's
    nodeLabels, as a pod recorded on that flavor's nodes); None lets Kueue pick the flavor."""

    name: str
    arrival_min: float
    gpus: int
    queue: str
    run_min: float
    priority: int = 0
    resource: str = GPU
    flavor: str | None = None


@dataclass(frozen=True)
class Window:
    """Queues, nodes and workloads. Without `flavors`, one flavor (no nodeLabels) holds a KWOK
    node per entry of `nodes` (whole GPUs each); with them, `nodes` is unused."""

    queues: tuple[QueueSpec, ...]
    nodes: tuple[int, ...]
    workloads: tuple[WorkloadSpec, ...]
    flavors: tuple[Flavor, ...] = ()

    def flavors_for(self, namespace: str) -> tuple[Flavor, ...]:
        return self.flavors or (default_flavor(f"twin-gpu-{namespace}"[:63], self.nodes),)

    def check(self) -> None:
        """One-line errors for a window the twin cannot replay."""
        queues = {q.name: q for q in self.queues}
        flavors = {f.name for f in self.flavors}
        for q in self.queues:
            unknown = sorted({x.flavor for x in q.quotas} - flavors)
            if unknown:
                raise TwinBuildError(f"twin replay: queue {q.name} names unknown flavor(s) "
                                     f"{', '.join(unknown)}")
        for w in self.workloads:
            if w.queue not in queues:
                raise TwinBuildError(f"twin replay: workload {w.name} names unknown queue {w.queue!r}")
            if w.flavor is not None and w.flavor not in flavors:
                raise TwinBuildError(f"twin replay: workload {w.name} names unknown flavor {w.flavor!r}")
            covered = {x.resource for x in queues[w.queue].flavor_quotas("")}
            if w.resource not in covered:
                raise TwinBuildError(f"twin replay: queue {w.queue} has no quota of {w.resource} "
                                     f"(workload {w.name})")
            if w.gpus <= 0 or w.run_min <= 0 or w.arrival_min < 0:
                raise TwinBuildError(f"twin replay: workload {w.name} needs gpus > 0, run_min > 0, "
                                     "arrival_min >= 0")
        if len({w.name for w in self.workloads}) != len(self.workloads):
            raise TwinBuildError("twin replay: workload names must be unique")


@dataclass
class ReplayResult:
    per_queue: dict[str, QueueOutcome]
    events: list[Seen]
    seconds_per_minute: float
    t0: float
    finished: bool
    jobs: dict[str, JobFacts] = field(default_factory=dict)
    end: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)

    def order(self, what: str) -> list[str]:
        """Jobs in the order the watch saw `what` happen to them (e.g. "admitted")."""
        return [e.job for e in self.events if e.what == what]

    def jobs_with(self, what: str) -> set[str]:
        return {e.job for e in self.events if e.what == what}

    def minute(self, seen: Seen) -> float:
        return (seen.at - self.t0) / self.seconds_per_minute


def timed_stages(layout: Layout) -> list[str]:
    """KWOK's "fast" Stages, pod-complete delayed by the pod's `RUN_TIME_ANNOTATION` (no jitter)."""
    out = []
    for text in fast_stages(layout):
        stage = yaml.safe_load(text)
        if stage["metadata"]["name"] != "pod-complete":
            out.append(text)
            continue
        stage["spec"]["delay"] = {"durationMilliseconds": 0, "durationFrom": {
            "expressionFrom": f'.metadata.annotations["{RUN_TIME_ANNOTATION}"]'}}
        out.append(yaml.safe_dump(stage, sort_keys=False))
    return out


def cluster_queue(q: QueueSpec, flavor: str) -> dict[str, Any]:
    """The ClusterQueue of `q` (`flavor`: the window's one flavor when `q` lists no quotas)."""
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": resource_groups(q.flavor_quotas(flavor)),
        "preemption": {"reclaimWithinCohort": q.reclaim_within_cohort,
                       "withinClusterQueue": q.within_cluster_queue},
    }
    if q.cohort:
        spec["cohortName"] = q.cohort
    if q.weight is not None:
        spec["fairSharing"] = {"weight": format(q.weight, "g")}
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ClusterQueue", "metadata": {"name": q.name},
            "spec": spec}


def priority_class(value: int) -> str:
    """The WorkloadPriorityClass of a priority value (names cannot hold a minus sign: m5 is -5)."""
    return f"twin-priority-{value}" if value >= 0 else f"twin-priority-m{-value}"


def job_manifest(w: WorkloadSpec, seconds_per_minute: float,
                 node_selector: dict[str, str] | None = None) -> dict[str, Any]:
    """A suspended batch Job of one pod asking `w.gpus` of `w.resource`, in its LocalQueue, running
    `w.run_min`; `node_selector`: the pinned flavor's nodeLabels."""
    labels = {QUEUE_LABEL: w.queue, PRIORITY_LABEL: priority_class(w.priority)}
    run_ms = round(w.run_min * seconds_per_minute * 1000)
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never", "schedulerName": SCHEDULER_NAME, "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "main", "image": "registry.invalid/twin:none",
                        "resources": {"limits": {w.resource: str(w.gpus)}}}]}
    if node_selector:
        pod_spec["nodeSelector"] = dict(node_selector)
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": w.name, "labels": labels},
        "spec": {"suspend": True, "parallelism": 1, "completions": 1, "backoffLimit": 0, "template": {
            "metadata": {"annotations": {RUN_TIME_ANNOTATION: f"{run_ms}ms"}}, "spec": pod_spec}},
    }


def _wait_active(custom: Any, namespace: str, window: Window, timeout_s: float) -> None:
    """Watch ClusterQueues, then LocalQueues, until each of the window's has condition Active=True."""
    from kubernetes import watch

    names = {q.name for q in window.queues}
    for plural, list_fn, args in (
        ("clusterqueues", custom.list_cluster_custom_object, (GROUP, VERSION, "clusterqueues")),
        ("localqueues", custom.list_namespaced_custom_object, (GROUP, VERSION, namespace, "localqueues")),
    ):
        active: set[str] = set()
        w = watch.Watch()
        for event in w.stream(list_fn, *args, timeout_seconds=int(timeout_s)):
            obj = event["object"]
            conditions = obj.get("status", {}).get("conditions", [])
            if any(c["type"] == "Active" and c["status"] == "True" for c in conditions):
                active.add(obj["metadata"]["name"])
            if names <= active:
                w.stop()
        if not names <= active:
            raise TwinBuildError(f"twin replay: {plural} not Active after {timeout_s:.0f}s: "
                                 f"{sorted(names - active)}")


def _create_objects(api: ApiClient, namespace: str, window: Window, flavors: tuple[Flavor, ...]) -> None:
    from kubernetes import client

    custom: Any = client.CustomObjectsApi(api)
    for flavor in flavors:
        custom.create_cluster_custom_object(GROUP, VERSION, "resourceflavors", resource_flavor(flavor))
    for value in sorted({w.priority for w in window.workloads}):
        custom.create_cluster_custom_object(GROUP, VERSION, "workloadpriorityclasses", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "WorkloadPriorityClass",
            "metadata": {"name": priority_class(value)}, "value": value})
    for q in window.queues:
        custom.create_cluster_custom_object(GROUP, VERSION, "clusterqueues",
                                            cluster_queue(q, flavors[0].name))
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "localqueues", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "LocalQueue", "metadata": {"name": q.name},
            "spec": {"clusterQueue": q.name}})
    for name, flavor, resources in node_names(namespace, flavors):
        add_ready_node(api, flavor_node(name, flavor, resources))


def _delete_objects(api: ApiClient, namespace: str, window: Window, flavors: tuple[Flavor, ...]) -> None:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    custom: Any = client.CustomObjectsApi(api)
    core: Any = client.CoreV1Api(api)
    cluster_objects = [("clusterqueues", q.name) for q in window.queues]
    priorities = {w.priority for w in window.workloads}
    cluster_objects += [("workloadpriorityclasses", priority_class(v)) for v in priorities]
    cluster_objects += [("resourceflavors", f.name) for f in flavors]
    for plural, name in cluster_objects:
        with contextlib.suppress(ApiException):
            custom.delete_cluster_custom_object(GROUP, VERSION, plural, name)
    for node, _, _ in node_names(namespace, flavors):
        with contextlib.suppress(ApiException):
            core.delete_node(node)


def _settle(create: Callable[[WorkloadSpec], JobFacts], recorder: Recorder, first: list[WorkloadSpec],
            timeout_s: float) -> dict[str, JobFacts]:
    """Create `first` and wait (on the watch) until each was admitted or found pending."""
    created = {w.name: create(w) for w in first}
    names = set(created)
    seen = ("admitted", "pending")
    if not recorder.wait_until(lambda events: names <= {e.job for e in events if e.what in seen}, timeout_s):
        raise TwinBuildError(f"twin replay: the {len(names)} workloads of minute 0 were not all admitted "
                             f"or refused within {timeout_s:.0f}s")
    return created


def replay(twin: Twin, window: Window, namespace: str, *, seconds_per_minute: float = 6.0,
           ready_timeout_s: float = 120.0, end_min: float | None = None,
           settle_at_zero: bool = False) -> ReplayResult:
    """Steps 1-4 of the module docstring; Kueue and the Job controller must be running in `twin`.
    `end_min`: stop the clock there even if Workloads are still pending or running (a window cut
    out of a longer record); default: when every Workload finished. `settle_at_zero`: create the
    workloads arriving at minute 0 BEFORE the clock starts and wait until Kueue has admitted or
    refused each (a window cut from a record opens with many already running: creating them on
    the clock would count the control loops' backlog as pending); they count as created at 0."""
    from kubernetes import client

    window.check()
    flavors = window.flavors_for(namespace)
    selectors = {f.name: dict(f.node_labels) for f in flavors}
    workloads = sorted(window.workloads, key=lambda w: (w.arrival_min, w.name))
    horizon = max(w.arrival_min for w in workloads) + sum(w.run_min for w in workloads) + MARGIN_MIN
    if end_min is not None:
        horizon = min(horizon, end_min)
    timings: dict[str, float] = {}
    with twin.cluster.api_client() as api:
        batch: Any = client.BatchV1Api(api)
        t = time.monotonic()
        try:
            _create_objects(api, namespace, window, flavors)
            _wait_active(client.CustomObjectsApi(api), namespace, window, ready_timeout_s)
            timings["setup_s"] = round(time.monotonic() - t, 2)
            recorder = Recorder(api, namespace).start()
            try:
                def create(w: WorkloadSpec) -> JobFacts:
                    pin = selectors.get(w.flavor) if w.flavor else None
                    batch.create_namespaced_job(namespace, job_manifest(w, seconds_per_minute, pin))
                    return JobFacts(w.queue, w.gpus, time.monotonic())

                first = [w for w in workloads if w.arrival_min <= 0] if settle_at_zero else []
                created = _settle(create, recorder, first, ready_timeout_s) if first else {}
                t0 = time.monotonic()
                created = {name: JobFacts(f.queue, f.gpus, t0) for name, f in created.items()}
                for w in workloads[len(created):]:
                    delay = t0 + w.arrival_min * seconds_per_minute - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)  # the compressed clock: arrivals as recorded
                    created[w.name] = create(w)
                names = set(created)
                finished = recorder.wait_until(
                    lambda events: names <= {e.job for e in events if e.what == "finished"},
                    max(0.0, t0 + horizon * seconds_per_minute - time.monotonic()))
                end = time.monotonic()
            finally:
                recorder.stop()
            if recorder.errors:
                raise TwinBuildError(f"twin replay: a watch failed: {recorder.errors[0]}")
        finally:
            _delete_objects(api, namespace, window, flavors)
    timings["replay_s"] = round(end - t0, 2)
    per_queue = summarize(recorder.events, created, {q.name: q.nominal_gpus for q in window.queues},
                          t0=t0, end=end, seconds_per_minute=seconds_per_minute)
    return ReplayResult(per_queue, list(recorder.events), seconds_per_minute, t0, finished, created, end,
                        timings)
