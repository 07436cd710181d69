"""Shape arithmetic the MIG optimizer needs, all derived from `core.mig`'s placement rules.

- `target_shapes`: the count-maximal shapes built from a set of profiles. A shape that is a
  sub-multiset of another valid shape is never worth choosing (the larger one serves the same
  demand on the same GPU with fewer stranded slices), so the solver only considers these.
- `AddTable`: for each shape and profile, the shape after adding one instance (or None when no
  valid placement exists); first-fit baselines walk it instead of re-checking placements.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache

from gpuledger.core.mig import COMPUTE_SLICES, MEMORY_SLICES, Shape, gpu_model
from gpuledger.optimizer.mig.inputs import Config


def compute_slices(model: str, config: Config) -> int:
    """Compute slices held by instances (a whole card holds all 7)."""
    if config is None:
        return COMPUTE_SLICES
    profiles = gpu_model(model).profiles
    return sum(profiles[p].compute * n for p, n in config)


def memory_slices(model: str, config: Config) -> int:
    if config is None:
        return MEMORY_SLICES
    profiles = gpu_model(model).profiles
    return sum(profiles[p].memory * n for p, n in config)


def stranded_slices(model: str, config: Config) -> int:
    """Compute slices of a MIG-enabled card that no instance holds (0 for whole/empty cards:
    an empty card is not in use, a whole card has nothing stranded)."""
    if not config:
        return 0
    return COMPUTE_SLICES - compute_slices(model, config)


def is_used(config: Config) -> bool:
    """A MIG-enabled card with instances is in use; whole cards count only when serving demand."""
    return bool(config)


def count(config: Config, profile: str) -> int:
    if not config:
        return 0
    for name, n in config:
        if name == profile:
            return n
    return 0


@cache
def valid_shapes(model: str, profiles: frozenset[str]) -> frozenset[Shape]:
    """Every non-empty shape over `profiles` that has a valid placement on `model`."""
    media = any(gpu_model(model).profiles[p].media_extensions for p in profiles)
    return frozenset(
        s for s in gpu_model(model).shapes(media_extensions=media)
        if all(name in profiles for name, _ in s)
    )


def _dominates(big: Shape, small: Shape) -> bool:
    b = dict(big)
    return big != small and all(b.get(name, 0) >= n for name, n in small)


@cache
def target_shapes(model: str, profiles: frozenset[str]) -> tuple[Shape, ...]:
    """Count-maximal valid shapes over `profiles` (sorted, deterministic)."""
    shapes = valid_shapes(model, profiles)
    return tuple(sorted(s for s in shapes if not any(_dominates(o, s) for o in shapes)))


class AddTable:
    """Shape transitions by adding one instance, for one model and profile set."""

    def __init__(self, model: str, profiles: Iterable[str]) -> None:
        self.model = model
        self.profiles = frozenset(profiles)
        shapes = valid_shapes(model, self.profiles) | {()}
        self._next: dict[tuple[Shape, str], Shape] = {}
        for shape in shapes:
            for p in self.profiles:
                counts = dict(shape)
                counts[p] = counts.get(p, 0) + 1
                grown: Shape = tuple(sorted(counts.items()))
                if grown in shapes:
                    self._next[(shape, p)] = grown
        self.shapes = shapes

    def add(self, shape: Shape, profile: str) -> Shape | None:
        return self._next.get((shape, profile))

    def accepting(self, profile: str) -> list[Shape]:
        """Shapes that still have room for one more `profile`."""
        return [s for (s, p) in self._next if p == profile]
