"""Every value one Node label took in the API server, seen through a watch started beforehand.

Why: a label that holds a value for a few milliseconds (MIG Manager's `pending`) cannot be
caught by reading the node in a loop; a read sees whatever is stored at that instant. A watch
from the resourceVersion read *before* the change is made delivers every stored version of the
object, in etcd order, however briefly each one lasted. Tests use it as a witness independent
of the code under test (the emulator's own `transitions` say what it meant to write; this says
what the API server stored).

Usage: `with NodeLabelWatch(api, node, label) as seen: <change things>; seen.wait_for(...)`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from types import TracebackType

from kubernetes import client, watch


@dataclass(frozen=True)
class LabelValue:
    """The label's value (None: absent) as of `resource_version`; `at` is when the event came."""

    value: str | None
    resource_version: str
    at: float


class NodeLabelWatch:
    """Record each change of `label` on Node `node`, from the version current at `__enter__`."""

    def __init__(self, api: client.ApiClient, node: str, label: str) -> None:
        self.api = api
        self.node = node
        self.label = label
        self.values: list[LabelValue] = []
        self.error: str | None = None
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> NodeLabelWatch:
        core = client.CoreV1Api(self.api)
        meta = core.read_node(self.node).metadata
        if meta is None:
            raise AssertionError(f"node {self.node}: the API returned no metadata")
        version = str(meta.resource_version)
        self.values.append(LabelValue((meta.labels or {}).get(self.label), version, time.time()))
        self._thread = threading.Thread(target=self._run, args=(version,), daemon=True,
                                        name=f"label-watch-{self.node}")
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def sequence(self) -> list[str | None]:
        """The label's values in stored order, the value before the watch first."""
        with self._changed:
            return [v.value for v in self.values]

    def wait_for(self, values: Iterable[str] | str, *, after: int = 0, timeout_s: float = 30.0) -> LabelValue:
        """The first recorded value in `values` at index `after` or later (index 0 is the value
        read at `__enter__`); raises TimeoutError (or the watch's own error) otherwise."""
        wanted = {values} if isinstance(values, str) else set(values)
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                found = next((v for v in self.values[after:] if v.value in wanted), None)
                if found is not None:
                    return found
                if self.error is not None:
                    raise AssertionError(f"watch on node {self.node} failed: {self.error}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(
                        f"node {self.node}: {self.label} never became one of {sorted(wanted)} within "
                        f"{timeout_s}s (values seen: {[v.value for v in self.values]})"
                    )
                self._changed.wait(left)

    def _run(self, version: str) -> None:
        core = client.CoreV1Api(self.api)
        selector = f"metadata.name={self.node}"
        try:
            while not self._stop.is_set():
                stream = watch.Watch()
                for event in stream.stream(core.list_node, field_selector=selector, resource_version=version,
                                           timeout_seconds=1, _request_timeout=10):
                    if event["type"] == "ERROR":
                        raise RuntimeError(f"watch error event: {event['raw_object']}")
                    obj = event["object"]
                    version = str(obj.metadata.resource_version)
                    self._record((obj.metadata.labels or {}).get(self.label), version)
                    if self._stop.is_set():
                        stream.stop()
                        break
        except Exception as exc:  # the waiter reports it instead of timing out silently
            with self._changed:
                self.error = f"{exc.__class__.__name__}: {exc}"
                self._changed.notify_all()

    def _record(self, value: str | None, version: str) -> None:
        with self._changed:
            if value != self.values[-1].value:
                self.values.append(LabelValue(value, version, time.time()))
                self._changed.notify_all()
