"""MIG geometry, generated from NVIDIA's placement rules (never a hand-written list of layouts).

The facts live in `core/data/mig_profiles.yaml` (a copy of the team's reference table): for each
profile id, the memory slices it occupies and the memory slices it may start at; for each GPU
model, the profiles it offers with their compute slices (of 7) and per-GPU maximum.

A *placement* is a profile at a start slice; a *layout* is a set of placements on one GPU that
(1) start where the profile may start, (2) do not overlap in memory slices, (3) use at most 7
compute slices, (4) respect each profile's per-GPU maximum. The optimizer works on layouts as
profile-count vectors ("shapes"); `shapes()` gives every shape that has a valid placement.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

import yaml

from gpuledger.core.errors import InputError

MEMORY_SLICES = 8
COMPUTE_SLICES = 7


@dataclass(frozen=True, slots=True)
class Profile:
    """A GPU-instance profile of one GPU model, e.g. `3g.40gb` on H100-80GB."""

    name: str
    id: int
    compute: int
    memory: int
    max_count: int
    memory_mib: int | None
    starts: tuple[int, ...]

    @property
    def media_extensions(self) -> bool:
        return self.name.endswith("+me")

    @property
    def resource_name(self) -> str:
        """The Kubernetes extended resource (mixed strategy), e.g. `nvidia.com/mig-3g.40gb`."""
        return f"nvidia.com/mig-{self.name}"


@dataclass(frozen=True, slots=True)
class Placement:
    profile: str
    start: int


Layout = tuple[Placement, ...]
Shape = tuple[tuple[str, int], ...]
"""A layout's profile counts, sorted by profile name: what mig-parted's `mig-devices` says."""


def shape_of(layout: Layout | Counter[str] | dict[str, int]) -> Shape:
    if isinstance(layout, tuple):
        counts: Counter[str] = Counter(p.profile for p in layout)
    else:
        counts = Counter({k: v for k, v in layout.items() if v})
    return tuple(sorted(counts.items()))


@dataclass(frozen=True)
class GpuModel:
    """One GPU model's MIG facts and the layouts its placement rules allow."""

    name: str
    memory_mib: int | None
    pci_device_ids: tuple[str, ...]
    profiles: dict[str, Profile] = field(hash=False)

    def profile(self, name: str) -> Profile:
        try:
            return self.profiles[name]
        except KeyError:
            known = ", ".join(self.profiles)
            raise InputError(
                f"MIG profile {name!r} does not exist on {self.name} (known: {known})"
            ) from None

    def share(self, profile: str, basis: str = "compute") -> float:
        """Fraction of the card a profile represents: compute slices/7 or memory slices/8."""
        p = self.profile(profile)
        if basis == "memory":
            return p.memory / MEMORY_SLICES
        return p.compute / COMPUTE_SLICES

    def layouts(self, *, media_extensions: bool = False) -> tuple[Layout, ...]:
        """Every non-empty valid placement set (see module docstring for the rules)."""
        return _layouts(self.name, media_extensions)

    def maximal_layouts(
        self, *, profiles: frozenset[str] | None = None, media_extensions: bool = False
    ) -> tuple[Layout, ...]:
        """Valid layouts to which no further profile (from `profiles`) can be added."""
        allowed = profiles or frozenset(
            n for n, p in self.profiles.items() if media_extensions or not p.media_extensions
        )
        candidates = [
            lay for lay in self.layouts(media_extensions=media_extensions)
            if all(p.profile in allowed for p in lay)
        ]
        return tuple(
            lay for lay in candidates
            if not any(
                self._can_add(lay, Placement(name, start))
                for name in allowed
                for start in self.profiles[name].starts
            )
        )

    def shapes(self, *, media_extensions: bool = False) -> tuple[Shape, ...]:
        """Distinct profile-count vectors that have at least one valid placement."""
        return tuple(sorted({shape_of(lay) for lay in self.layouts(media_extensions=media_extensions)}))

    def place(self, counts: dict[str, int] | Shape) -> Layout:
        """A valid placement for the given profile counts, or InputError if none exists."""
        want = shape_of(dict(counts))
        for lay in self.layouts(media_extensions=True):
            if shape_of(lay) == want:
                return lay
        text = ", ".join(f"{n}: {c}" for n, c in want) or "(empty)"
        raise InputError(f"MIG layout {{{text}}} cannot be placed on a {self.name} GPU")

    def validate(self, counts: dict[str, int] | Shape) -> Layout:
        """Check profile names and counts against the placement rules; return a placement."""
        for name, count in dict(counts).items():
            self.profile(name)
            if count < 0:
                raise InputError(f"MIG profile {name!r}: count {count} is negative")
        return self.place(counts) if any(c for _, c in dict(counts).items()) else ()

    def placement(self, counts: dict[str, int] | Shape) -> Layout:
        """Same answer as `validate`, from an index built once per model (for callers that
        check thousands of layouts, e.g. the optimizer)."""
        for name, count in dict(counts).items():
            self.profile(name)
            if count < 0:
                raise InputError(f"MIG profile {name!r}: count {count} is negative")
        want = shape_of(dict(counts))
        if not want:
            return ()
        found = _shape_index(self.name).get(want)
        if found is None:
            return self.place(counts)  # raises the one-line InputError
        return found

    def placeable(self, counts: dict[str, int] | Shape) -> bool:
        """Whether the profile counts have a valid placement on one card (unknown profile
        names: False). Why: capacity asks this for every card and profile; no error path."""
        want = shape_of(dict(counts))
        if any(name not in self.profiles for name, _ in want):
            return False
        return not want or want in _shape_index(self.name)

    def _can_add(self, layout: Layout, new: Placement) -> bool:
        return _valid(self, (*layout, new))


def _occupied(model: GpuModel, placement: Placement) -> range:
    size = model.profiles[placement.profile].memory
    return range(placement.start, placement.start + size)


def _valid(model: GpuModel, layout: Layout) -> bool:
    used: set[int] = set()
    compute = 0
    counts: Counter[str] = Counter()
    media = 0
    for placement in layout:
        profile = model.profiles[placement.profile]
        if placement.start not in profile.starts:
            return False
        slots = set(_occupied(model, placement))
        if max(slots) >= MEMORY_SLICES or used & slots:
            return False
        used |= slots
        compute += profile.compute
        counts[profile.name] += 1
        media += profile.media_extensions
    return (
        compute <= COMPUTE_SLICES
        and media <= 1
        and all(counts[n] <= model.profiles[n].max_count for n in counts)
    )


@cache
def _layouts(model_name: str, media_extensions: bool) -> tuple[Layout, ...]:
    """Depth-first over memory slices: at each free slice, leave it or start a profile there."""
    model = catalog()[model_name]
    names = sorted(
        n for n, p in model.profiles.items() if media_extensions or not p.media_extensions
    )
    found: list[Layout] = []

    def walk(slot: int, layout: Layout) -> None:
        if slot >= MEMORY_SLICES:
            if layout:
                found.append(layout)
            return
        walk(slot + 1, layout)
        for name in names:
            placement = Placement(name, slot)
            candidate = (*layout, placement)
            if _valid(model, candidate):
                walk(slot + model.profiles[name].memory, candidate)

    walk(0, ())
    return tuple(found)


@cache
def _shape_index(model_name: str) -> dict[Shape, Layout]:
    """The first placement (in `layouts()` order, as `place` finds it) of each placeable shape."""
    index: dict[Shape, Layout] = {}
    for lay in _layouts(model_name, True):
        index.setdefault(shape_of(lay), lay)
    return index


def _load_raw() -> dict[str, Any]:
    text = resources.files("gpuledger.core").joinpath("data/mig_profiles.yaml").read_text()
    data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise InputError("core/data/mig_profiles.yaml: expected a mapping")
    return data


@cache
def catalog() -> dict[str, GpuModel]:
    """All GPU models with MIG facts, keyed by canonical name (e.g. `H100-80GB`)."""
    raw = _load_raw()
    starts = {int(k): tuple(v) for k, v in raw["starts"].items()}
    sizes = {int(k): int(v) for k, v in raw["sizes"].items()}
    models: dict[str, GpuModel] = {}
    for name, spec in raw["models"].items():
        profiles = {}
        for p in spec["profiles"]:
            pid = int(p["id"])
            if sizes[pid] != int(p["m"]):
                raise InputError(f"mig_profiles.yaml: {name} {p['name']}: m disagrees with sizes")
            profiles[p["name"]] = Profile(
                name=p["name"], id=pid, compute=int(p["c"]), memory=int(p["m"]),
                max_count=int(p["max"]), memory_mib=p.get("mib"), starts=starts[pid],
            )
        models[name] = GpuModel(
            name=name, memory_mib=spec.get("memory_mib"),
            pci_device_ids=tuple(spec.get("pci_device_ids", ())), profiles=profiles,
        )
    return models


def gpu_model(name: str) -> GpuModel:
    """Look up a model by canonical or dcgm-exporter `modelName` (e.g. `NVIDIA H100 80GB HBM3`)."""
    canonical = canonical_model(name)
    models = catalog()
    if canonical not in models:
        raise InputError(f"GPU model {name!r} has no MIG facts (known: {', '.join(models)})")
    return models[canonical]


_TOKEN = r"(?<![A-Z0-9])"
"""A model token starts a word: `GH200` and `GB200` are other products, not H200 / B200."""
_MODEL_PATTERNS: tuple[tuple[str, str], ...] = (
    (_TOKEN + r"H200(?![0-9])", "H200-141GB"),
    (_TOKEN + r"B200(?![0-9])", "B200-180GB"),
    # H100 NVL (94 GB) and the 94/96 GB SXM parts have other MIG profiles: not H100-80GB.
    (_TOKEN + r"H100(?![0-9])(?!.*\bNVL\b)(?!.*\b9[46]\s*GB)", "H100-80GB"),
    (_TOKEN + r"A100(?![0-9]).*80\s*GB?", "A100-80GB"),
    (_TOKEN + r"A100(?![0-9])", "A100-SXM4-40GB"),
)


@cache  # a pure function of the name, called for every card of every DRA snapshot
def canonical_model(name: str) -> str:
    """Map a `modelName` / GFD `nvidia.com/gpu.product` value to our canonical model name.

    `NVIDIA A100-SXM4-80GB`, `NVIDIA-A100-80GB-PCIe` and `A100-80GB` all become `A100-80GB`;
    names we do not know are returned unchanged (a whole-GPU-only card is still billable).
    The patterns are anchored at the start of a model token, so `NVIDIA GH200 96GB HBM3` and
    `NVIDIA GB200` (other products, with other MIG facts) stay unchanged.
    """
    if name in catalog():
        return name
    for pattern, canonical in _MODEL_PATTERNS:
        if re.search(pattern, name, flags=re.IGNORECASE):
            return canonical
    return name


PROFILE_GB_TOLERANCE = 2
"""How far a reported profile's GB figure may be from the catalog's (see `canonical_profile`)."""


def canonical_profile(model_name: str | None, profile: str) -> str:
    """A reported `GPU_I_PROFILE` as the catalog names it for the card's model.

    Some drivers report a profile's memory rounded from MiB (`7g.79gb` on an A100 80GB, whose
    configured profile is `7g.80gb`). A name the model's catalog lacks maps to the catalog
    profile with the same compute slices (and the same media-extension flag) whose GB figure is
    nearest, within `PROFILE_GB_TOLERANCE`; anything else (unknown model, no such profile, a
    name that does not parse) is returned unchanged, so the share (compute slices / 7) is
    still read from the name.
    """
    models = catalog()
    model = models.get(canonical_model(model_name)) if model_name else None
    if model is None or profile in model.profiles:
        return profile
    try:
        compute, gb = parse_profile_name(profile)
    except InputError:
        return profile
    me = profile.endswith("+me")
    candidates = []
    for p in model.profiles.values():
        if p.compute == compute and p.media_extensions == me:
            distance = abs(parse_profile_name(p.name)[1] - gb)
            if distance <= PROFILE_GB_TOLERANCE:
                candidates.append((distance, p.name))
    return min(candidates)[1] if candidates else profile


def parse_profile_name(name: str) -> tuple[int, int]:
    """`3g.40gb` → (3 compute slices, 40 GB); accepts the `nvidia.com/mig-` prefix."""
    match = re.fullmatch(r"(?:nvidia\.com/mig-)?(\d)g\.(\d+)gb(?:\+me)?", name)
    if not match:
        raise InputError(f"MIG profile {name!r}: expected <g>g.<mem>gb, e.g. 3g.40gb")
    return int(match.group(1)), int(match.group(2))
