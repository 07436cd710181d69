"""Record every stored version of chosen objects through a real watch, in etcd order.

The tests use it as an independent witness of the order of writes (was the node cordoned when
its label changed? did a cohort's quota sum ever pass capacity?), rather than trusting the
actuator's own audit records.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from kubernetes import client, watch


class Recorder:
    """Watch a list call from now on; keep the objects (as dicts) whose name is in `names`."""

    def __init__(self, api: client.ApiClient, list_call: Callable[..., Any], names: set[str],
                 *args: Any) -> None:
        self.api = api
        self.list_call = list_call
        self.args = args
        self.names = names
        self.events: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Recorder:
        self._thread.start()
        if not self._ready.wait(15):
            raise AssertionError("watch did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        listing = self.list_call(*self.args)
        listing = listing if isinstance(listing, dict) else self.api.sanitize_for_serialization(listing)
        version = listing["metadata"]["resourceVersion"]
        self._ready.set()
        while not self._stop.is_set():
            stream = watch.Watch()
            for event in stream.stream(self.list_call, *self.args, resource_version=version,
                                       timeout_seconds=1):
                obj = event["object"]
                obj = obj if isinstance(obj, dict) else self.api.sanitize_for_serialization(obj)
                version = obj["metadata"]["resourceVersion"]
                if obj["metadata"]["name"] in self.names:
                    self.events.append(obj)
                if self._stop.is_set():
                    stream.stop()
                    break

    def of(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["metadata"]["name"] == name]
