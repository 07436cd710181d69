"""An emulator of NVIDIA's MIG Manager that talks to a real kube-apiserver (test tooling).

Why: the actuator changes MIG layouts through the GPU Operator's label protocol, and its tests
need the other side of that protocol to behave like the real controller, including its failure
modes (an invalid layout fails; a node can stay `pending` forever), without a GPU. It writes to
a cluster, so it lives in `tools/` (never installed), not in the product's simulator.

Why a recorded history: `pending` can last a few milliseconds (no delay configured), so a test
that polls the node for it misses it on a fast machine. Every state the emulator writes is
appended to `transitions` (with the time and the resourceVersion the API server gave that
write) before waiters are woken; tests wait on that history (`wait_for_transition`) and assert
on the sequence, never poll for a transient label value.

The protocol (DESIGN.md): the admin sets node label `nvidia.com/mig.config=<name>`, naming an
entry of the mig-parted ConfigMap (`version: v1`, `mig-configs: {name: [{devices: all|[idx],
mig-enabled, mig-devices: {profile: n}}]}`); MIG Manager sets `nvidia.com/mig.config.state` to
`pending`, reconfigures the GPUs, and then sets `success` or `failed`. A change that needs the
host rebooted (MIG mode on some GPUs, mig-parted `WITH_REBOOT`) passes through `rebooting`
first (NVIDIA/mig-parted `cmd/nvidia-mig-manager`: the state takes `pending`, `rebooting`,
`success`, `failed`).

Steps of one reconcile (`_reconcile`), run in its own thread so a slow one never blocks the watch:
1. Label the node `nvidia.com/mig.config.state=pending`.
2. Wait the configured delay (interruptible by `stop()` and by a newer config for the node).
3. If the behaviour says "stay pending forever" for this node or config, stop here.
4. Read the mig-parted ConfigMap, take the named entry, and check every device's layout against
   `core.mig` placement rules for the node's GPU model (`nvidia.com/gpu.product`,
   `nvidia.com/gpu.count`); anything invalid, or an injected failure, → `failed`.
5. With `reboot_s` set: label the node `rebooting` and wait that long (the host restarts).
6. Patch the node's status: `nvidia.com/mig-<profile>` capacity and allocatable to the new
   counts (stale MIG resources removed), `nvidia.com/gpu` to the GPUs left without MIG.
7. Label the node `nvidia.com/mig.config.state=success`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import yaml
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from gpuledger.core.config import KubernetesSettings
from gpuledger.core.errors import ClusterError, InputError
from gpuledger.core.mig import gpu_model, shape_of

log = logging.getLogger(__name__)

CONFIG_LABEL = "nvidia.com/mig.config"
STATE_LABEL = "nvidia.com/mig.config.state"
PRODUCT_LABEL = "nvidia.com/gpu.product"
COUNT_LABEL = "nvidia.com/gpu.count"
GPU_RESOURCE = "nvidia.com/gpu"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
CONFIGMAP_KEY = "config.yaml"

PENDING, REBOOTING, SUCCESS, FAILED = "pending", "rebooting", "success", "failed"
MERGE_PATCH = "application/merge-patch+json"


@dataclass(frozen=True)
class MigBehavior:
    """How the emulator misbehaves; replace `MigManagerEmulator.behavior` at any time.

    `delay_s` is the time spent `pending` before the outcome. A node or config named in
    `fail_*` ends `failed` even when the layout is valid; one named in `pending_forever_*`
    never leaves `pending` (the actuator must time out). `reboot_s`: a valid layout then spends
    that long `rebooting` before `success` (None: no reboot, as on most GPUs).
    """

    delay_s: float = 0.0
    reboot_s: float | None = None
    fail_nodes: frozenset[str] = frozenset()
    fail_configs: frozenset[str] = frozenset()
    pending_forever_nodes: frozenset[str] = frozenset()
    pending_forever_configs: frozenset[str] = frozenset()


@dataclass(frozen=True)
class NodeMigResult:
    """What a mig-parted entry means for one node: per-device shapes and extended resources."""

    devices: tuple[tuple[tuple[str, int], ...] | None, ...]  # None: MIG disabled on that GPU
    resources: dict[str, int]


@dataclass(frozen=True)
class Transition:
    """One state label the emulator wrote: `at` is wall-clock seconds after the write returned,
    `resource_version` the node's version that write produced (to match a watch's events)."""

    node: str
    config: str
    state: str
    at: float
    reason: str = ""
    resource_version: str = ""


def parse_mig_parted(text: str, where: str) -> dict[str, list[dict[str, Any]]]:
    """The `mig-configs` mapping of a mig-parted config document (`version: v1`)."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError(f"{where}: not YAML ({exc.__class__.__name__})") from None
    configs = doc.get("mig-configs") if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or doc.get("version") != "v1" or not isinstance(configs, dict):
        raise InputError(f"{where}: expected `version: v1` and a `mig-configs` mapping")
    return configs


def plan_node(entries: Any, config: str, product: str, gpu_count: int) -> NodeMigResult:
    """Check a mig-parted entry against the node's GPUs; InputError names what is invalid.

    1. Each entry selects `devices: all` or a list of indices below `gpu_count`; a device may be
       selected by one entry only.
    2. An entry with `mig-enabled: true` must name a layout `core.mig` can place on the model.
    3. MIG-enabled devices contribute their profile counts; the others stay whole GPUs.
    """
    if not isinstance(entries, list) or not entries:
        raise InputError(f"mig-parted config {config!r}: expected a non-empty list of device entries")
    chosen: dict[int, dict[str, int] | None] = {}
    for n, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise InputError(f"mig-parted config {config!r} entry {n}: expected a mapping")
        for device in _devices(entry.get("devices"), gpu_count, config, n):
            if device in chosen:
                raise InputError(f"mig-parted config {config!r}: device {device} is selected twice")
            chosen[device] = _layout_counts(entry, config, n) if entry.get("mig-enabled") else None
    model = None
    resources: Counter[str] = Counter()
    devices: list[tuple[tuple[str, int], ...] | None] = []
    for device in range(gpu_count):
        counts = chosen.get(device)
        if counts is None:
            devices.append(None)
            resources[GPU_RESOURCE] += 1
            continue
        model = model or gpu_model(product)
        if not model.profiles:
            raise InputError(f"GPU model {product!r} does not support MIG")
        model.validate(counts)  # raises InputError when the placement rules forbid the layout
        devices.append(shape_of(counts))
        for profile, count in counts.items():
            resources[f"{MIG_RESOURCE_PREFIX}{profile}"] += count
    resources.setdefault(GPU_RESOURCE, 0)
    return NodeMigResult(devices=tuple(devices), resources=dict(resources))


def _devices(selector: Any, gpu_count: int, config: str, n: int) -> Iterable[int]:
    if selector == "all":
        return range(gpu_count)
    if isinstance(selector, list) and all(isinstance(d, int) and not isinstance(d, bool) for d in selector):
        bad = [d for d in selector if not 0 <= d < gpu_count]
        if bad:
            raise InputError(
                f"mig-parted config {config!r} entry {n}: devices {bad} do not exist "
                f"(node has {gpu_count} GPUs)"
            )
        return selector
    raise InputError(f"mig-parted config {config!r} entry {n}: `devices` must be `all` or a list of indices")


def _layout_counts(entry: dict[str, Any], config: str, n: int) -> dict[str, int]:
    raw = entry.get("mig-devices") or {}
    if not isinstance(raw, dict) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in raw.values()
    ):
        raise InputError(f"mig-parted config {config!r} entry {n}: `mig-devices` must map profile → count")
    return {str(k): int(v) for k, v in raw.items() if v}


@dataclass
class MigManagerEmulator:
    """Watches Nodes and plays MIG Manager; `start()`/`stop()` or use as a context manager.

    On first sight a node already labelled `success`/`failed` for its config counts as done
    (as after a restart of the real controller with nothing to change); any later change of
    `nvidia.com/mig.config` triggers a reconcile. `nodes` limits the emulator to those node
    names (the real one runs per node; tests sharing a cluster stay out of each other's way).
    """

    api: client.ApiClient
    settings: KubernetesSettings = field(default_factory=KubernetesSettings)
    behavior: MigBehavior = field(default_factory=MigBehavior)
    nodes: frozenset[str] | None = None
    watch_timeout_s: int = 1
    transitions: list[Transition] = field(default_factory=list, init=False)
    results: dict[str, NodeMigResult] = field(default_factory=dict, init=False)
    errors: dict[str, str] = field(default_factory=dict, init=False)
    _applied: dict[str, str] = field(default_factory=dict, init=False)
    _generation: Counter[str] = field(default_factory=Counter, init=False)
    _stop: threading.Event = field(default_factory=threading.Event, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _threads: list[threading.Thread] = field(default_factory=list, init=False)
    _watcher: threading.Thread | None = field(default=None, init=False)
    _synced: threading.Event = field(default_factory=threading.Event, init=False)
    _recorded: threading.Condition = field(init=False)

    def __post_init__(self) -> None:
        self._recorded = threading.Condition(self._lock)

    # --- lifecycle -------------------------------------------------------------------------

    def start(self, timeout_s: float = 30.0) -> MigManagerEmulator:
        """Start the watch thread; return once the first list of Nodes has been handled."""
        self._stop.clear()
        self._watcher = threading.Thread(target=self._run, name="mig-manager-watch", daemon=True)
        self._watcher.start()
        if not self._synced.wait(timeout_s):
            self.stop()
            raise ClusterError(f"MIG Manager emulator: could not list Nodes within {timeout_s:.0f}s")
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        threads = [self._watcher, *self._threads] if self._watcher else list(self._threads)
        for thread in threads:
            if thread is not None:
                thread.join(timeout_s)
        self._watcher = None
        self._threads.clear()

    def __enter__(self) -> MigManagerEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def history(self, node: str) -> list[Transition]:
        """Every state written for `node`, in order (a copy)."""
        with self._lock:
            return [t for t in self.transitions if t.node == node]

    def mark(self, node: str) -> int:
        """How many states were written for `node` so far: pass it as `after=` to wait only for
        what a change made from now on triggers."""
        return len(self.history(node))

    def wait_for_transition(
        self, node: str, states: Iterable[str] | str, *, after: int = 0, timeout_s: float = 30.0
    ) -> Transition:
        """The first state in `states` written for `node` after its first `after` transitions.

        Waits on the recorded history (woken by each write), so a state that lasted a moment is
        found as surely as one that stays; raises TimeoutError listing what was written.
        """
        wanted = {states} if isinstance(states, str) else set(states)
        deadline = time.monotonic() + timeout_s
        with self._recorded:
            while True:
                mine = [t for t in self.transitions if t.node == node][after:]
                found = next((t for t in mine if t.state in wanted), None)
                if found is not None:
                    return found
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(
                        f"node {node}: no {STATE_LABEL} in {sorted(wanted)} written within {timeout_s}s "
                        f"(written since mark {after}: {[t.state for t in mine]})"
                    )
                self._recorded.wait(left)

    # --- watch loop ------------------------------------------------------------------------

    def _run(self) -> None:
        core = client.CoreV1Api(self.api)
        resource_version: str | None = None
        while not self._stop.is_set():
            try:
                if resource_version is None:
                    listing = core.list_node()
                    for node in listing.items:
                        self._observe(node)
                    resource_version = listing.metadata.resource_version if listing.metadata else None
                    self._synced.set()
                stream = watch.Watch()
                for event in stream.stream(core.list_node, resource_version=resource_version,
                                           timeout_seconds=self.watch_timeout_s,
                                           _request_timeout=self.watch_timeout_s + 5):
                    obj = event["object"]
                    if event["type"] == "ERROR":
                        resource_version = None  # 410 Gone or similar: list again
                        break
                    resource_version = obj.metadata.resource_version if obj.metadata else resource_version
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self._observe(obj)
                    if self._stop.is_set():
                        stream.stop()
                        break
            except ApiException as exc:
                if exc.status == 410:
                    resource_version = None
                    continue
                log.warning("MIG Manager emulator: watch failed: HTTP %s %s", exc.status, exc.reason)
                self._stop.wait(0.5)
            except (HTTPError, OSError) as exc:  # apiserver stopping or restarting
                log.debug("MIG Manager emulator: connection error %s", exc)
                self._stop.wait(0.5)

    def _observe(self, node: client.V1Node) -> None:
        name = _name(node)
        labels = _labels(node)
        config = labels.get(CONFIG_LABEL)
        if not config or (self.nodes is not None and name not in self.nodes):
            return
        with self._lock:
            if name not in self._applied and labels.get(STATE_LABEL) in (SUCCESS, FAILED):
                self._applied[name] = config
                return
            if self._applied.get(name) == config:
                return
            self._applied[name] = config
            self._generation[name] += 1
            generation = self._generation[name]
            thread = threading.Thread(target=self._reconcile, args=(name, config, generation),
                                      name=f"mig-manager-{name}", daemon=True)
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
        thread.start()

    # --- one reconcile ---------------------------------------------------------------------

    def _current(self, name: str, generation: int) -> bool:
        with self._lock:
            return self._generation[name] == generation and not self._stop.is_set()

    def _wait(self, name: str, generation: int, seconds: float) -> bool:
        """Sleep `seconds`; False as soon as a newer config for the node or `stop()` cuts it."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if not self._current(name, generation):
                return False
            self._stop.wait(min(0.05, max(0.0, deadline - time.monotonic())))
        return self._current(name, generation)

    def _reconcile(self, name: str, config: str, generation: int) -> None:
        core = client.CoreV1Api(self.api)
        behavior = self.behavior
        try:
            # 1. pending
            self._set_state(core, name, config, PENDING)
            # 2. delay (a newer config or stop() cuts it short)
            if not self._wait(name, generation, behavior.delay_s):
                return
            # 3. stuck
            if name in behavior.pending_forever_nodes or config in behavior.pending_forever_configs:
                return
            # 4. validate
            node = core.read_node(name)
            try:
                if name in behavior.fail_nodes or config in behavior.fail_configs:
                    raise InputError(f"injected failure for node {name} config {config}")
                result = self._plan(core, node, config)
            except InputError as exc:
                self.errors[name] = str(exc)
                self._set_state(core, name, config, FAILED, reason=str(exc))
                return
            if not self._current(name, generation):
                return
            # 5. reboot
            if behavior.reboot_s is not None:
                self._set_state(core, name, config, REBOOTING)
                if not self._wait(name, generation, behavior.reboot_s):
                    return
                node = core.read_node(name)
            # 6. capacity and allocatable
            self._patch_resources(core, node, result)
            self.results[name] = result
            self.errors.pop(name, None)
            # 7. success
            self._set_state(core, name, config, SUCCESS)
        except (ApiException, HTTPError, OSError) as exc:
            if not self._stop.is_set():
                log.warning("MIG Manager emulator: node %s config %s: %s", name, config, exc)

    def _plan(self, core: client.CoreV1Api, node: client.V1Node, config: str) -> NodeMigResult:
        namespace, cm_name = self.settings.mig_configmap_namespace, self.settings.mig_configmap_name
        where = f"ConfigMap {namespace}/{cm_name}"
        try:
            cm = core.read_namespaced_config_map(cm_name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                raise InputError(f"{where} does not exist") from None
            raise
        data = cm.data or {}
        text = data.get(CONFIGMAP_KEY) or (next(iter(data.values())) if len(data) == 1 else None)
        if text is None:
            raise InputError(f"{where}: expected key {CONFIGMAP_KEY!r}")
        configs = parse_mig_parted(text, where)
        if config not in configs:
            raise InputError(f"{where}: no mig-config named {config!r} (known: {', '.join(sorted(configs))})")
        labels = _labels(node)
        product = labels.get(PRODUCT_LABEL, "")
        count_text = labels.get(COUNT_LABEL)
        if count_text is None or not count_text.isdigit():
            raise InputError(f"node {_name(node)}: label {COUNT_LABEL} missing or not a number")
        return plan_node(configs[config], config, product, int(count_text))

    def _patch_resources(self, core: client.CoreV1Api, node: client.V1Node, result: NodeMigResult) -> None:
        status = node.status
        current = set((status.capacity or {}) if status else {}) | set(
            (status.allocatable or {}) if status else {})
        stale = {k: None for k in current if k.startswith(MIG_RESOURCE_PREFIX) and k not in result.resources}
        values: dict[str, str | None] = {**stale, **{k: str(v) for k, v in result.resources.items()}}
        body = {"status": {"capacity": values, "allocatable": values}}
        core.patch_node_status(_name(node), body, _content_type=MERGE_PATCH)

    def _set_state(
        self, core: client.CoreV1Api, name: str, config: str, state: str, reason: str = ""
    ) -> None:
        written = core.patch_node(name, {"metadata": {"labels": {STATE_LABEL: state}}},
                                  _content_type=MERGE_PATCH)
        version = str(written.metadata.resource_version or "") if written.metadata else ""
        with self._recorded:
            self.transitions.append(Transition(name, config, state, time.time(), reason, version))
            self._recorded.notify_all()


def _name(node: client.V1Node) -> str:
    if node.metadata is None or not node.metadata.name:
        raise InputError("a Node without metadata.name came from the API")
    return str(node.metadata.name)


def _labels(node: client.V1Node) -> dict[str, str]:
    return dict((node.metadata.labels if node.metadata else None) or {})
