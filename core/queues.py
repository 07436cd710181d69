"""The queue-system seam's shared ground: system names and the registry each stage keeps.

Why: a queue system (Kueue today, Volcano next) touches three stages that may not import each
other: the collectors read its objects and metrics, the optimizer reads its quotas, the actuator
writes them. So a `QueueBackend` is not one object but one *name* under which each stage
registers its part:

- `gpuledger.collectors.queues.<name>`  a `QueueCollector` (inventory + metrics),
- `gpuledger.optimizer.quota.queues.<name>`   a `QuotaReader` (quota objects → the planning model,
                                         the planned numbers → a whole new object body),
- `gpuledger.actuator.queues.<name>`    a `QuotaWriter` (guarded read-modify-write).

A second queue system is one new module per stage, named after the system: the stage's
`Registry` imports `<package>.<name>` the first time the name is asked for, and that module
registers itself. Nothing else changes (no if-chain to extend).

Pure Python (importlib only): nothing heavy, nothing of ours but `core.errors`.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from typing import Generic, TypeVar

from gpuledger.core.errors import InputError

DEFAULT_QUEUE_SYSTEM = "kueue"
"""The queue system used when nothing names another (the only one shipped today)."""

T = TypeVar("T")


class Registry(Generic[T]):
    """One stage's implementations of the queue seam, by system name.

    `package` is where that stage's implementation modules live (`<package>.<name>`); a module
    calls `register` at import time. `get` imports the module on first use, so registering a
    new system needs no edit to any list.
    """

    def __init__(self, stage: str, package: str) -> None:
        self.stage = stage
        self.package = package
        self._impls: dict[str, T] = {}

    def register(self, name: str, impl: T) -> T:
        """Make `impl` this stage's part of queue system `name` (returns it, for module use)."""
        if name in self._impls and self._impls[name] is not impl:
            raise ValueError(f"{self.stage}: queue system {name!r} is registered twice")
        self._impls[name] = impl
        return impl

    def get(self, name: str = DEFAULT_QUEUE_SYSTEM) -> T:
        """This stage's part of queue system `name`; one-line `InputError` when there is none."""
        if name not in self._impls and name.isidentifier():
            try:
                importlib.import_module(f"{self.package}.{name}")
            except ModuleNotFoundError as exc:
                if exc.name != f"{self.package}.{name}":
                    raise  # the module exists but needs something missing: not "unknown"
        if name not in self._impls:
            raise InputError(
                f"queue system {name!r}: no {self.stage} support (known: {', '.join(self.names())})"
            )
        return self._impls[name]

    def names(self) -> tuple[str, ...]:
        """Every system this stage supports: registered ones and modules in `package`."""
        module = importlib.import_module(self.package)
        found = {m.name for m in pkgutil.iter_modules(getattr(module, "__path__", []))
                 if not m.name.startswith("_") and m.name != "base"}
        return tuple(sorted(found | set(self._impls)))

    def find(self, accept: Callable[[T], bool]) -> T | None:
        """The first supported system's part for which `accept` holds (imports them all)."""
        for name in self.names():
            impl = self.get(name)
            if accept(impl):
                return impl
        return None
