"""One registry type for every plug-in point: named implementations, in order, looked up by name.

Why one type: queue systems, plan kinds (per stage), device sources, advice kinds,
recommendation rules, dashboard pages and CLI commands were each registered in a style of
their own (a dict, a list with `before=`, a tuple, a kind → module map, an if-chain in
disguise), so each new implementation had to learn its point's rules and its error wording.
`Registry[T]` is the one shape (docs/decisions/0154):

- **ordered**: iteration follows registration order (`before=` places one ahead of another:
  a device source ahead of the whole-card fallback); where the implementations are discovered
  as modules of a package, the order is their names', as modules have no other order;
- **strict**: `register` refuses a name twice (a `ValueError`: a programming error, never a
  user's); `get` of an unknown name raises the point's own error class (a constructor argument:
  `InputError`, `PlanError`, ...) in one line that names the known names;
- **lazy where it must be**: with `package`, `get(name)` imports `<package>.<name>` the first
  time the name is asked for and that module registers itself (or exposes `attribute`), so a
  new queue system, plan kind or command is one module and nothing else; `register_lazy(name,
  "module:attribute")` declares a name (in its place in the order) whose implementation is
  imported on first use, so a light caller (the CLI's choices) can list names without paying
  for the heavy module behind them.

Pure Python (importlib, pkgutil, threading): nothing heavy, nothing of ours.
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar, cast

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class _Lazy:
    """A declared name whose implementation is `module`'s `attribute`, imported on first use."""

    module: str
    attribute: str


class Registry(Generic[T]):
    """The named implementations of one plug-in point (module docstring).

    `what` names the point in messages (`queue system`, `plan kind`); `error` is the exception
    class of an unknown name; `missing` says what an unknown name lacks (`no rollout`; default
    `unknown`), so the line reads `plan kind 'x': no rollout (known: mig, quota)`. `package`
    turns on discovery of `<package>.<name>` modules (names starting with `_` are helpers and
    never discovered); `attribute` is what such a module exposes when it does not register
    itself. `key` is the name an implementation carries (a page's path), for `add`.
    """

    def __init__(
        self, what: str, *, error: Callable[[str], Exception], missing: str = "unknown",
        package: str | None = None, attribute: str | None = None, key: Callable[[T], str] | None = None,
    ) -> None:
        if attribute is not None and package is None:
            raise ValueError(f"{what} registry: `attribute` needs a `package` to discover")
        self.what = what
        self.error = error
        self.missing = missing
        self.package = package
        self.attribute = attribute
        self.key = key
        self._entries: dict[str, T | _Lazy] = {}
        self._lock = threading.RLock()

    # Registering -------------------------------------------------------------------------------
    def register(self, name: str, impl: T, *, before: str | None = None) -> T:
        """Make `impl` the implementation of `name` (at the end, or just before `before`);
        returns it, so a module can write `KUEUE = REGISTRY.register("kueue", KueueReader())`."""
        self._put(name, impl, before)
        return impl

    def add(self, impl: T, *, before: str | None = None) -> T:
        """`register` under the name `impl` carries (`key`, given to the constructor)."""
        if self.key is None:
            raise ValueError(f"{self.what} registry: `add` needs a `key`; use register(name, impl)")
        return self.register(self.key(impl), impl, before=before)

    def register_lazy(self, name: str, target: str, *, before: str | None = None) -> None:
        """Declare `name`, implemented by `target` (`"package.module:attribute"`), imported the
        first time the name is asked for (or the registry iterated); its place in the order is
        taken now."""
        module, sep, attribute = target.partition(":")
        if not sep or not module or not attribute:
            raise ValueError(f"{self.what} {name!r}: lazy target {target!r} is not 'module:attribute'")
        self._put(name, _Lazy(module, attribute), before)

    def unregister(self, name: str) -> None:
        """Withdraw `name` (a plug-in taking itself out; tests restoring the built-ins)."""
        with self._lock:
            if name not in self._entries:
                raise self._unknown(name)
            del self._entries[name]

    def _put(self, name: str, entry: T | _Lazy, before: str | None) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"{self.what}: a name must be a non-empty string, not {name!r}")
        with self._lock:
            if name in self._entries:
                raise ValueError(f"{self.what} {name!r} is registered twice")
            if before is None:
                self._entries[name] = entry
                return
            if before not in self._entries:
                raise ValueError(f"{self.what} {name!r}: cannot go before {before!r} (not registered)")
            items = list(self._entries.items())
            at = [n for n, _ in items].index(before)
            self._entries = dict([*items[:at], (name, entry), *items[at:]])

    # Looking up --------------------------------------------------------------------------------
    def get(self, name: str) -> T:
        """The implementation of `name`, importing it if it is lazy or discoverable; the point's
        `error`, in one line naming the known names, when there is none."""
        entry = self._entries.get(name)
        if entry is None and self._discoverable(name):
            self._discover(name)
            entry = self._entries.get(name)
        if entry is None:
            raise self._unknown(name)
        if isinstance(entry, _Lazy):
            return self._resolve(name, entry)
        return entry

    def names(self) -> tuple[str, ...]:
        """Every known name, in order: registered and declared ones, and with `package` the
        modules there (none imported), all by name."""
        if self.package is None:
            return tuple(self._entries)
        return tuple(sorted(set(self._entries) | set(self._modules())))

    def items(self) -> tuple[tuple[str, T], ...]:
        """(name, implementation) in order, importing whatever is lazy or discovered."""
        return tuple((name, self.get(name)) for name in self.names())

    def find(self, accept: Callable[[T], bool]) -> T | None:
        """The first implementation, in order, for which `accept` holds (None: none does)."""
        return next((impl for impl in self if accept(impl)), None)

    def __iter__(self) -> Iterator[T]:
        return (impl for _, impl in self.items())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self.names()

    def __len__(self) -> int:
        return len(self.names())

    def __repr__(self) -> str:
        return f"Registry({self.what!r}: {', '.join(self.names())})"

    # Lazy parts ---------------------------------------------------------------------------------
    def _unknown(self, name: str) -> Exception:
        known = ", ".join(self.names()) or "none"
        return self.error(f"{self.what} {name!r}: {self.missing} (known: {known})")

    def _discoverable(self, name: str) -> bool:
        return self.package is not None and name.isidentifier() and not name.startswith("_")

    def _modules(self) -> list[str]:
        assert self.package is not None
        module = importlib.import_module(self.package)
        return [m.name for m in pkgutil.iter_modules(getattr(module, "__path__", []))
                if not m.name.startswith("_")]

    def _discover(self, name: str) -> None:
        """Import `<package>.<name>`: it registers itself, or exposes `attribute`. Imported
        outside the lock (the module's own `register` takes it)."""
        qualified = f"{self.package}.{name}"
        try:
            module = importlib.import_module(qualified)
        except ModuleNotFoundError as exc:
            if exc.name != qualified:
                raise  # the module exists but needs something missing: not "unknown"
            return
        with self._lock:
            if name not in self._entries and self.attribute is not None and hasattr(module, self.attribute):
                self._entries[name] = cast(T, getattr(module, self.attribute))

    def _resolve(self, name: str, lazy: _Lazy) -> T:
        impl = cast(T, getattr(importlib.import_module(lazy.module), lazy.attribute))
        with self._lock:
            if self._entries.get(name) is lazy:
                self._entries[name] = impl
        return impl
