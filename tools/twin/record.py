"""What a replay saw: Workload and Pod events from WATCHES, turned into simulated minutes.

`Recorder` runs one watch per kind (Kueue Workloads, Pods) in the replay's namespace, each in its
own thread, and appends a `Seen` for every transition that matters, stamped with the moment the
event arrived (`time.monotonic()`), in arrival order:
- Workload: `pending` (QuotaReserved=False: Kueue tried and the quota did not fit), `admitted`
  (Admitted turned True), `preempted` (Evicted turned True with reason Preempted), `finished`.
- Pod: `bound` (spec.nodeName first set: the scheduler's binding), `succeeded` (phase Succeeded).
A watch that ends (its server-side timeout) resumes from the last resourceVersion; nothing is read
by polling. `wait_until(predicate)` blocks on a condition variable the watch threads notify.

`summarize` turns the events into per-queue figures in UNCOMPRESSED minutes (wall seconds since the
replay's clock started / seconds per simulated minute; events before the clock count at 0):
pending GPU-minutes (GPUs x time created or preempted and not (re)admitted), wait p50/p95
(created to first admission; numpy's linear quantile, as the product's wait analytics use),
preemptions, admissions and borrowing admissions (the queue's admitted GPUs, counted from the
watch, above its nominal quota once this one is in).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
WATCH_CHUNK_S = 20


@dataclass(frozen=True)
class Seen:
    """One transition, as a watch delivered it: `what` happened to Job `job` at monotonic `at`."""

    what: str
    job: str
    at: float
    detail: str = ""


@dataclass
class Recorder:
    """Watches Workloads and Pods of `namespace` until `stop()`; `events` in arrival order."""

    api: Any
    namespace: str
    events: list[Seen] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _state: dict[tuple[str, str], str] = field(default_factory=dict)

    def start(self) -> Recorder:
        """Start both watches; returns once each has listed (so no later event is missed)."""
        ready = [threading.Event(), threading.Event()]
        for target, flag in zip((self._workloads, self._pods), ready, strict=True):
            thread = threading.Thread(target=self._guard, args=(target, flag), daemon=True)
            thread.start()
            self._threads.append(thread)
        for flag in ready:
            flag.wait(60)
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(WATCH_CHUNK_S + 5)

    def wait_until(self, predicate: Callable[[list[Seen]], bool], timeout_s: float) -> bool:
        """Block until `predicate(events)` holds (re-checked on each new event) or the timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: bool(self.errors) or predicate(self.events), timeout_s)

    def _add(self, what: str, job: str, detail: str = "") -> None:
        with self._cond:
            self.events.append(Seen(what, job, time.monotonic(), detail))
            self._cond.notify_all()

    def _guard(self, target: Callable[[threading.Event], None], ready: threading.Event) -> None:
        try:
            target(ready)
        except Exception as exc:  # a watch that dies must fail the replay, not hang it
            with self._cond:
                self.errors.append(f"{target.__name__}: {type(exc).__name__}: {exc}")
                self._cond.notify_all()
            ready.set()

    def _follow(self, list_fn: Callable[..., Any], args: tuple[Any, ...], on_object: Callable[[Any], None],
                ready: threading.Event) -> None:
        from kubernetes import watch

        listing = list_fn(*args)
        items = listing["items"] if isinstance(listing, dict) else listing.items
        for obj in items:
            on_object(obj)
        version = (listing["metadata"]["resourceVersion"] if isinstance(listing, dict)
                   else listing.metadata.resource_version)
        ready.set()
        while not self._stop.is_set():
            w = watch.Watch()
            for event in w.stream(list_fn, *args, resource_version=version, timeout_seconds=WATCH_CHUNK_S,
                                  allow_watch_bookmarks=True):
                obj = event["object"]
                # BOOKMARK objects arrive as plain dicts, typed kinds (Pods) as client models.
                meta = obj["metadata"] if isinstance(obj, dict) else obj.metadata
                version = meta["resourceVersion"] if isinstance(meta, dict) else meta.resource_version
                if event["type"] != "BOOKMARK":
                    on_object(obj)
                if self._stop.is_set():
                    w.stop()

    def _workloads(self, ready: threading.Event) -> None:
        from kubernetes import client

        custom: Any = client.CustomObjectsApi(self.api)
        self._follow(custom.list_namespaced_custom_object, (GROUP, VERSION, self.namespace, "workloads"),
                     self._on_workload, ready)

    def _pods(self, ready: threading.Event) -> None:
        from kubernetes import client

        core: Any = client.CoreV1Api(self.api)
        self._follow(core.list_namespaced_pod, (self.namespace,), self._on_pod, ready)

    def _transition(self, key: tuple[str, str], value: str) -> bool:
        """True when `key` changes to `value` (each transition recorded once)."""
        if self._state.get(key) == value:
            return False
        self._state[key] = value
        return True

    def _on_workload(self, obj: dict[str, Any]) -> None:
        owners = obj["metadata"].get("ownerReferences") or []
        if not owners:
            return
        job = owners[0]["name"]
        conditions = {c["type"]: c for c in obj.get("status", {}).get("conditions", [])}
        for kind, what in (("QuotaReserved", "pending"), ("Admitted", "admitted"), ("Evicted", "preempted"),
                           ("Finished", "finished")):
            cond = conditions.get(kind)
            status = cond["status"] if cond else ""
            if not self._transition((job, kind), status) or not cond:
                continue
            if what == "pending" and status == "False":
                self._add("pending", job, cond.get("message", ""))
            elif what == "preempted" and status == "True" and cond.get("reason") == "Preempted":
                self._add("preempted", job, cond.get("message", ""))
            elif what in ("admitted", "finished") and status == "True":
                self._add(what, job)

    def _on_pod(self, pod: Any) -> None:
        job = (pod.metadata.labels or {}).get("batch.kubernetes.io/job-name")
        if not job:
            return
        if pod.spec.node_name and self._transition((pod.metadata.name, "bound"), "yes"):
            self._add("bound", job, pod.spec.node_name)
        if pod.status.phase == "Succeeded" and self._transition((pod.metadata.name, "phase"), "Succeeded"):
            self._add("succeeded", job)


@dataclass(frozen=True)
class QueueOutcome:
    """One ClusterQueue's figures over the window, in uncompressed minutes."""

    pending_gpu_minutes: float
    wait_p50_min: float | None
    wait_p95_min: float | None
    preemptions: int
    admissions: int
    borrowing_admissions: int


@dataclass(frozen=True)
class JobFacts:
    """What `summarize` needs to know of one replayed Job."""

    queue: str
    gpus: int
    created_at: float


def summarize(events: Iterable[Seen], jobs: dict[str, JobFacts], nominal: dict[str, int], *,
              t0: float, end: float, seconds_per_minute: float) -> dict[str, QueueOutcome]:
    """Per-queue outcome of a replay (module docstring); `end` closes still-pending intervals."""
    def minutes(at: float) -> float:  # a Job settled before the clock (replay's settle_at_zero) counts from 0
        return max(0.0, at - t0) / seconds_per_minute

    pending_since = {name: f.created_at for name, f in jobs.items()}
    first_admission: dict[str, float] = {}
    running: dict[str, set[str]] = {q: set() for q in nominal}
    pending_min = dict.fromkeys(nominal, 0.0)
    counts = {q: {"preemptions": 0, "admissions": 0, "borrowing": 0} for q in nominal}
    for seen in events:
        facts = jobs.get(seen.job)
        if facts is None:
            continue
        q = facts.queue
        if seen.what == "admitted":
            since = pending_since.pop(seen.job, None)
            if since is not None:
                pending_min[q] += facts.gpus * (minutes(seen.at) - minutes(since))
            first_admission.setdefault(seen.job, seen.at)
            running[q].add(seen.job)
            counts[q]["admissions"] += 1
            if sum(jobs[j].gpus for j in running[q]) > nominal[q]:
                counts[q]["borrowing"] += 1
        elif seen.what in ("preempted", "finished"):
            running[q].discard(seen.job)
            if seen.what == "preempted":
                counts[q]["preemptions"] += 1
                pending_since[seen.job] = seen.at
    for job, since in pending_since.items():
        pending_min[jobs[job].queue] += jobs[job].gpus * (minutes(end) - minutes(since))
    out = {}
    for q in nominal:
        waits = [minutes(first_admission[j]) - minutes(f.created_at) for j, f in jobs.items()
                 if f.queue == q and j in first_admission]
        out[q] = QueueOutcome(
            pending_gpu_minutes=round(pending_min[q], 2),
            wait_p50_min=round(float(np.quantile(waits, 0.5)), 2) if waits else None,
            wait_p95_min=round(float(np.quantile(waits, 0.95)), 2) if waits else None,
            preemptions=counts[q]["preemptions"], admissions=counts[q]["admissions"],
            borrowing_admissions=counts[q]["borrowing"])
    return out
