"""Start kube-scheduler and KWOK (optionally kube-controller-manager, Kueue) against a LocalCluster.

Steps of `Twin.start()`:
1. Write one kubeconfig per component (the cluster's admin token: the twin measures scheduling,
   not RBAC) into `workdir`.
2. kube-scheduler: leader election off, serving on a free loopback port; wait for its /healthz.
3. KWOK: manages only nodes annotated `kwok.x-k8s.io/node: fake`, with KWOK's default "fast" node
   and pod Stages (a node is Ready at once; a pod bound to it is Running at once; a Job's pod
   completes at once); wait for its /healthz.
Every process is started by `tools.k8s_testenv.processes` (own process group, dies with its
parent, stopped on exit), so a failing test leaves nothing running.

`gpu_node()` and `gpu_pod()` build the objects the smoke uses: a KWOK node advertising
`nvidia.com/gpu` the way the device plugin does (capacity = allocatable), a pod requesting GPUs
as limits (extended resources cannot be overcommitted, so requests = limits).
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import requests
from urllib3.exceptions import InsecureRequestWarning

from tools.k8s_testenv import processes
from tools.k8s_testenv.cluster import LocalCluster, free_ports, log_tail
from tools.twin_build.builder import TwinBuildError, is_cached
from tools.twin_build.versions import KWOK_VERSION, PARTS, Layout

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

KWOK_ANNOTATION = "kwok.x-k8s.io/node"
GPU = "nvidia.com/gpu"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"


def missing_parts(layout: Layout, names: tuple[str, ...]) -> list[str]:
    """The named parts whose cached build is absent."""
    return [n for n in names if not is_cached(layout, PARTS[n])]


FAIR_SHARING_STRATEGIES = ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]
"""Kueue's default pair for `fairSharing.preemptionStrategies`, which its validation requires."""


@dataclass
class Twin:
    """kube-scheduler + KWOK against `cluster`, logs and kubeconfig under `workdir`."""

    cluster: LocalCluster
    layout: Layout
    workdir: Path
    ready_timeout_s: float = 120.0
    #: KWOK Stage documents (YAML/JSON text); None: KWOK's default "fast" Stages from the build.
    stages: list[str] | None = None
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    def log(self, name: str) -> Path:
        return self.workdir / f"{name}.log"

    def start(self) -> Twin:
        missing = missing_parts(self.layout, ("kube-scheduler", "kwok"))
        if missing:
            raise TwinBuildError(f"twin: {', '.join(missing)} not built; "
                                 "run `python -m tools.twin_build build`")
        self.workdir.mkdir(parents=True, exist_ok=True)
        kubeconfig = self.workdir / "kubeconfig"
        shutil.copyfile(self.cluster.kubeconfig, kubeconfig)
        sched_port, kwok_port = free_ports(2)
        t = time.monotonic()
        scheduler_config = self.workdir / "kube-scheduler.yaml"
        scheduler_config.write_text(json.dumps({  # JSON is YAML; the scheduler reads either
            "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"kubeconfig": str(kubeconfig)},
            "leaderElection": {"leaderElect": False},
            "profiles": [{"schedulerName": SCHEDULER_NAME}],
        }))
        self._spawn("kube-scheduler", [
            str(self.layout.binary(PARTS["kube-scheduler"])),
            f"--config={scheduler_config}",
            "--bind-address=127.0.0.1",
            f"--secure-port={sched_port}",
            f"--cert-dir={self.workdir / 'scheduler-certs'}",
            "--v=2",
        ], f"https://127.0.0.1:{sched_port}/healthz")
        self.timings["kube-scheduler_s"] = round(time.monotonic() - t, 2)
        t = time.monotonic()
        config = self.workdir / "kwok.yaml"
        stages = self.stages if self.stages is not None else fast_stages(self.layout)
        config.write_text("\n---\n".join(stages))
        self._spawn("kwok", [
            str(self.layout.binary(PARTS["kwok"])),
            f"--kubeconfig={kubeconfig}",
            f"--config={config}",
            f"--manage-nodes-with-annotation-selector={KWOK_ANNOTATION}=fake",
            "--node-ip=10.0.0.1",
            f"--server-address=127.0.0.1:{kwok_port}",
        ], f"http://127.0.0.1:{kwok_port}/healthz")
        self.timings["kwok_s"] = round(time.monotonic() - t, 2)
        return self

    def start_kueue(self, *, fair_sharing: bool = False) -> None:
        """Start Kueue's controller manager: webhooks served but never registered, jobs come suspended.
        `fair_sharing`: the Configuration's `fairSharing` (both preemption strategies, Kueue's
        default pair): a cohort's admissions go to the ClusterQueue whose dominant resource share
        after admission, divided by its `fairSharing.weight`, is lowest (scheduler
        fair_sharing_iterator.go); without it, oldest first.

        Kueue v0.17.0 with internal cert management off reads its metrics serving cert from the
        hard-coded /etc/kueue/metrics/certs (cmd/kueue/main.go) and, with it on, blocks until it can
        inject a CA into webhook configurations and CRD conversion stanzas the twin does not have.
        So: certs off, one self-signed cert for the webhook server, and Kueue runs in a private
        mount namespace where a tmpfs /etc holds only that cert (root only; the twin is test tooling).
        The visibility server (also a hard-coded cert path) is off.
        """
        if missing_parts(self.layout, ("kueue",)):
            raise TwinBuildError("twin: kueue not built; run `python -m tools.twin_build build kueue`")
        certs = self.workdir / "kueue-certs"
        certs.mkdir(parents=True, exist_ok=True)
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
                        "/CN=127.0.0.1", "-keyout", str(certs / "tls.key"), "-out", str(certs / "tls.crt")],
                       check=True, capture_output=True)
        health, webhook = free_ports(2)
        config = self.workdir / "kueue.json"
        config.write_text(json.dumps({
            "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
            "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"}, "metrics": {"bindAddress": "0"},
            "webhook": {"port": webhook, "host": "127.0.0.1", "certDir": str(certs)},
            "leaderElection": {"leaderElect": False}, "internalCertManagement": {"enable": False},
            "integrations": {"frameworks": ["batch/job"]},
            **({"fairSharing": {"preemptionStrategies": FAIR_SHARING_STRATEGIES}} if fair_sharing else {}),
        }))
        kueue = [str(self.layout.binary(PARTS["kueue"])), f"--config={config}",
                 f"--kubeconfig={self.workdir / 'kubeconfig'}", "--feature-gates=VisibilityOnDemand=false"]
        script = (f"mount -t tmpfs tmpfs /etc && mkdir -p /etc/kueue/metrics/certs && "
                  f"cp {certs}/tls.crt {certs}/tls.key /etc/kueue/metrics/certs/ && exec {shlex.join(kueue)}")
        t = time.monotonic()
        self._spawn("kueue", ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                    f"http://127.0.0.1:{health}/readyz")
        self.timings["kueue_s"] = round(time.monotonic() - t, 2)

    def start_job_controller(self) -> None:
        """kube-controller-manager running only its Job controller (decision 0225): it creates the pods
        of a Job that Kueue unsuspends, deletes them when Kueue suspends it again (preemption), and
        marks the Job Complete once KWOK finishes its pod, which is what releases the quota in Kueue."""
        if missing_parts(self.layout, ("kube-controller-manager",)):
            raise TwinBuildError("twin: kube-controller-manager not built; "
                                 "run `python -m tools.twin_build build kube-controller-manager`")
        [port] = free_ports(1)
        t = time.monotonic()
        self._spawn("kube-controller-manager", [
            str(self.layout.binary(PARTS["kube-controller-manager"])),
            f"--kubeconfig={self.workdir / 'kubeconfig'}",
            "--controllers=job",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={self.workdir / 'kcm-certs'}",
            "--v=1",
        ], f"https://127.0.0.1:{port}/healthz")
        self.timings["kube-controller-manager_s"] = round(time.monotonic() - t, 2)

    def stop(self) -> None:
        for name in list(self.procs)[::-1]:
            processes.stop(self.procs.pop(name))

    def __enter__(self) -> Twin:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _spawn(self, name: str, argv: list[str], health_url: str) -> None:
        proc = processes.spawn(argv, self.log(name))
        self.procs[name] = proc
        deadline = time.monotonic() + self.ready_timeout_s
        last = "no answer yet"
        while time.monotonic() < deadline:  # start-up only: the process's own health endpoint
            if proc.poll() is not None:
                raise TwinBuildError(f"twin: {name} exited with {proc.returncode} while starting: "
                                     f"{log_tail(self.log(name))} (log: {self.log(name)})")
            try:
                with warnings.catch_warnings():  # the component's self-signed serving cert
                    warnings.simplefilter("ignore", InsecureRequestWarning)
                    answer = requests.get(health_url, timeout=2, verify=False)
                if answer.status_code == 200:
                    return
                last = f"HTTP {answer.status_code}"
            except requests.RequestException as exc:
                last = type(exc).__name__
            time.sleep(0.2)
        raise TwinBuildError(f"twin: {name} not healthy after {self.ready_timeout_s:.0f}s ({last}); "
                             f"log: {self.log(name)}")


def fast_stages(layout: Layout) -> list[str]:
    """KWOK's default "fast" node and pod Stages, as copied from its module by the build."""
    return [p.read_text() for p in sorted(layout.kwok_stages(KWOK_VERSION).glob("*.yaml"))]


def add_ready_node(api: ApiClient, node: dict[str, Any], timeout_s: int = 90) -> None:
    """Create a KWOK node, watch until KWOK reports it Ready, then lift the `not-ready` taint.

    The apiserver's TaintNodesByCondition admission taints every new node
    `node.kubernetes.io/not-ready:NoSchedule`; in a cluster, kube-controller-manager's node
    lifecycle controller lifts it once the node is Ready. The twin does not run that controller
    yet (it would also need KWOK's lease heartbeats, decision 0225), so this does that one step.
    """
    from kubernetes import client, watch

    core: Any = client.CoreV1Api(api)  # plain dicts in, as the API takes them
    name = node["metadata"]["name"]
    created = core.create_node(node)
    w = watch.Watch()
    ready = False
    for event in w.stream(core.list_node, field_selector=f"metadata.name={name}",
                          resource_version=created.metadata.resource_version, timeout_seconds=timeout_s):
        conditions = event["object"].status.conditions or []
        if any(c.type == "Ready" and c.status == "True" for c in conditions):
            ready = True
            w.stop()
    if not ready:
        raise TwinBuildError(f"twin: KWOK did not mark node {name} Ready within {timeout_s}s")
    current = core.read_node(name)
    taints = [t for t in current.spec.taints or [] if t.key != NOT_READY_TAINT]
    core.patch_node(name, {"spec": {"taints": [api.sanitize_for_serialization(t) for t in taints] or None}})


SCHEDULER_NAME = "gpuledger-twin"
"""The twin's scheduler profile: it places only pods that name it (`spec.schedulerName`), so on a
cluster shared with other tests (or a real one) it never touches pods that are not the twin's."""


def gpu_node(name: str, gpus: int) -> dict[str, Any]:
    """A KWOK node advertising `gpus` whole GPUs, as the NVIDIA device plugin would."""
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110", GPU: str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "annotations": {KWOK_ANNOTATION: "fake"},
                     "labels": {"type": "kwok", "kubernetes.io/hostname": name}},
        "status": {"capacity": resources, "allocatable": resources},
    }


def gpu_pod(name: str, gpus: int, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A pod asking for `gpus` whole GPUs (an extended resource: limits, which set the requests)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "schedulerName": SCHEDULER_NAME,
            "containers": [{"name": "main", "image": "registry.invalid/twin:none",
                            "resources": {"limits": {GPU: str(gpus)}}}],
            "terminationGracePeriodSeconds": 0,
        },
    }
