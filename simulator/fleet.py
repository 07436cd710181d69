"""The fleet spec: what hardware, pools, tenants and workload mix the simulator builds.

A spec is plain data (a YAML file, validated with pydantic) so a test, the demo and a user's
what-if all describe fleets the same way. Validation happens once, here: MIG configs are
checked against the placement rules of `core.mig` (never a hand-written list of layouts),
vGPU splits against the card, workload mixes against the known classes. A bad file gets one
`InputError` line naming the file and the key.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from gpuledger.core.errors import InputError
from gpuledger.core.mig import gpu_model
from gpuledger.core.yamlfile import load_yaml_file
from gpuledger.simulator.field import FieldEffects

WorkloadClass = Literal["training", "inference", "notebook", "batch_eval", "small_job"]
WORKLOAD_CLASSES: tuple[WorkloadClass, ...] = (
    "training", "inference", "notebook", "batch_eval", "small_job",
)
SharingMode = Literal["exclusive", "mig", "timeslice", "vgpu"]

MODEL_FACTS: dict[str, dict[str, Any]] = {
    # modelName as dcgm-exporter reports it, GFD product label, board power (idle, max) in W.
    "H100-80GB": {"model_name": "NVIDIA H100 80GB HBM3", "product": "NVIDIA-H100-80GB-HBM3",
                  "family": "hopper", "idle_w": 70.0, "max_w": 700.0},
    "H200-141GB": {"model_name": "NVIDIA H200", "product": "NVIDIA-H200",
                   "family": "hopper", "idle_w": 75.0, "max_w": 700.0},
    "A100-80GB": {"model_name": "NVIDIA A100-SXM4-80GB", "product": "NVIDIA-A100-SXM4-80GB",
                  "family": "ampere", "idle_w": 55.0, "max_w": 400.0},
    "A100-SXM4-40GB": {"model_name": "NVIDIA A100-SXM4-40GB", "product": "NVIDIA-A100-SXM4-40GB",
                       "family": "ampere", "idle_w": 50.0, "max_w": 400.0},
}
"""The card models the simulator can build (their MIG facts come from `core.mig`)."""


def _only_training() -> dict[WorkloadClass, float]:
    return {"training": 1.0}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PoolSpec(_Model):
    """A node pool: identical nodes with one card model and one sharing mode."""

    name: str = Field(pattern=r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
    model: str
    nodes: int = Field(ge=1, le=10_000)
    gpus_per_node: int | None = Field(default=None, ge=1, le=16)
    sharing: SharingMode = "exclusive"
    replicas: int = Field(default=4, ge=2, le=64, description="time-slicing replicas per card")
    mig_configs: dict[str, dict[str, int]] = Field(
        default_factory=dict,
        description="mig-parted config name -> {profile: count per GPU}; nodes take them in turn",
    )
    vgpu_splits: tuple[tuple[float, ...], ...] = Field(
        default=((0.5, 0.5), (0.25, 0.25, 0.5), (0.3, 0.3, 0.4)),
        description="HAMi vGPU: how cards are cut into declared fractions; cards take them in turn",
    )
    workloads: dict[WorkloadClass, float] = Field(default_factory=_only_training)
    free_fraction: float = Field(
        default=0.05, ge=0, le=1, description="share of device groups nobody uses all window",
    )
    queue_system: Literal["kueue", "volcano"] = Field(
        default="kueue", description="who queues the pool's pods (simulator.volcano)")

    @field_validator("model")
    @classmethod
    def _model(cls, value: str) -> str:
        if value not in MODEL_FACTS:
            raise ValueError(f"unknown GPU model {value!r} (known: {', '.join(MODEL_FACTS)})")
        return value

    @field_validator("workloads")
    @classmethod
    def _workloads(cls, value: dict[str, float]) -> dict[str, float]:
        if any(w < 0 for w in value.values()) or sum(value.values()) <= 0:
            raise ValueError("weights must be >= 0 and not all zero")
        return value

    @field_validator("vgpu_splits")
    @classmethod
    def _splits(cls, value: tuple[tuple[float, ...], ...]) -> tuple[tuple[float, ...], ...]:
        for split in value:
            if not split or any(not 0 < f <= 1 for f in split) or sum(split) > 1 + 1e-9:
                raise ValueError(f"split {list(split)}: fractions in (0, 1] summing to at most 1")
            if any(abs(f * 100 - round(f * 100)) > 1e-9 for f in split):
                raise ValueError(f"split {list(split)}: fractions must be whole percent (gpucores)")
        return value

    @model_validator(mode="after")
    def _mig(self) -> PoolSpec:
        if self.sharing == "mig":
            if not self.mig_configs:
                raise ValueError("a mig pool needs mig_configs")
            model = gpu_model(self.model)
            for name, counts in self.mig_configs.items():
                try:
                    model.validate(counts)
                except InputError as exc:
                    raise ValueError(f"mig_configs.{name}: {exc}") from None
                if not any(counts.values()):
                    raise ValueError(f"mig_configs.{name}: no instances")
        elif self.mig_configs:
            raise ValueError("mig_configs is only for sharing: mig")
        return self


class TeamSpec(_Model):
    name: str = Field(pattern=r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
    weight: float = Field(default=1.0, gt=0)


class ExporterSpec(_Model):
    """How the simulated dcgm-exporter behaves."""

    virtual_gpus: bool = Field(
        default=True,
        description="--kubernetes-virtual-gpus: one series per sharing pod with a `vgpu` label",
    )


class ScenarioSpec(_Model):
    """Optional disturbances for analytics tests (all off by default)."""

    scrape_gaps: float = Field(
        default=0.0, ge=0, le=0.5, description="fraction of node x 10-minute blocks not scraped",
    )
    mig_reconfigure: bool = Field(
        default=False,
        description="the first MIG node switches to its pool's next config at minute 30 of the "
        "hour nearest the window's middle",
    )


class FleetSpec(_Model):
    """A whole fleet: pools of nodes, tenants, exporter behaviour and scenario knobs."""

    cluster: str = "demo"
    driver_version: str = "550.90.07"
    gpus_per_node: int = Field(default=8, ge=1, le=16)
    pools: tuple[PoolSpec, ...]
    teams: tuple[TeamSpec, ...] = Field(default_factory=lambda: tuple(_default_teams()))
    unlabeled_namespaces: tuple[str, ...] = ("sandbox", "hackathon", "legacy-serving")
    unlabeled_fraction: float = Field(default=0.06, ge=0, le=1)
    inference_models: tuple[str, ...] = (
        "meta-llama/Llama-3.1-70B-Instruct", "meta-llama/Llama-3.1-8B-Instruct",
        "mistralai/Mistral-7B-Instruct-v0.3", "Qwen/Qwen2.5-32B-Instruct",
    )
    exporter: ExporterSpec = ExporterSpec()
    scenario: ScenarioSpec = ScenarioSpec()
    field: FieldEffects = FieldEffects()
    """Field mode (`simulator.field`): what real fleets do to telemetry; all off by default."""

    @model_validator(mode="after")
    def _unique(self) -> FleetSpec:
        for what, names in (
            ("pools", [p.name for p in self.pools]),
            ("teams", [t.name for t in self.teams]),
        ):
            dupes = sorted({n for n in names if names.count(n) > 1})
            if dupes:
                raise ValueError(f"{what}: duplicate names {', '.join(dupes)}")
        if not self.pools:
            raise ValueError("pools: at least one pool")
        if not self.teams:
            raise ValueError("teams: at least one team")
        return self

    def pool_gpus_per_node(self, pool: PoolSpec) -> int:
        return pool.gpus_per_node or self.gpus_per_node

    @property
    def gpu_count(self) -> int:
        return sum(p.nodes * self.pool_gpus_per_node(p) for p in self.pools)

    # Construction ---------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | Path) -> FleetSpec:
        """Read and validate a YAML fleet file; any problem is one `InputError` line."""
        file = Path(path)
        data = load_yaml_file(file, what="fleet spec")
        if not isinstance(data, dict):
            raise InputError(f"{file}: expected a mapping with a `pools` key at the top level")
        return cls.parse(data, source=str(file))

    @classmethod
    def parse(cls, data: dict[str, Any], source: str = "fleet spec") -> FleetSpec:
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            key = ".".join(str(p) for p in first["loc"]) or "(top level)"
            more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
            raise InputError(f"{source}: {key}: {first['msg']}{more}") from None

    @classmethod
    def default(cls, gpus: int = 256, gpus_per_node: int = 8, **overrides: Any) -> FleetSpec:
        """The demo fleet scaled to `gpus` cards (a multiple of `gpus_per_node`).

        Five pools share the nodes by fixed proportions (largest remainder, at least one node
        each while there are enough nodes): H100 training, A100 MIG, A100-40GB time-sliced,
        H100 HAMi vGPU, H200 inference.
        """
        if gpus <= 0 or gpus % gpus_per_node:
            raise InputError(f"default fleet: gpus={gpus} must be a positive multiple of {gpus_per_node}")
        nodes = gpus // gpus_per_node
        templates = _default_pools()
        counts = _apportion(nodes, [t[0] for t in templates])
        pools = [
            {**template, "nodes": n} for (_, template), n in zip(templates, counts, strict=True) if n
        ]
        return cls.parse({"gpus_per_node": gpus_per_node, "pools": pools, **overrides},
                         source="default fleet")

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False)


def _default_teams() -> list[TeamSpec]:
    weights = {
        "nlp": 3.0, "vision": 2.0, "speech": 1.0, "recsys": 2.0, "search": 1.5, "ads": 1.5,
        "robotics": 1.0, "research": 2.5, "platform": 0.5, "fraud": 0.7, "genai": 3.0,
        "biology": 0.8,
    }
    return [TeamSpec(name=n, weight=w) for n, w in weights.items()]


def _default_pools() -> list[tuple[float, dict[str, Any]]]:
    """(proportion, pool) in the order nodes are handed out when there are few."""
    return [
        (0.40, {"name": "h100-train", "model": "H100-80GB", "sharing": "exclusive", "queue_system": "volcano",
                "workloads": {"training": 0.65, "batch_eval": 0.2, "notebook": 0.15}}),
        (0.15, {"name": "a100-mig", "model": "A100-80GB", "sharing": "mig",
                "mig_configs": {
                    "all-balanced": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
                    "all-3g.40gb": {"3g.40gb": 2},
                    "all-1g.10gb": {"1g.10gb": 7},
                },
                "workloads": {"small_job": 0.6, "notebook": 0.25, "inference": 0.15}}),
        (0.15, {"name": "a100-ts", "model": "A100-SXM4-40GB", "sharing": "timeslice",
                "replicas": 4, "workloads": {"notebook": 0.6, "small_job": 0.4}}),
        (0.15, {"name": "h100-vgpu", "model": "H100-80GB", "sharing": "vgpu",
                "workloads": {"inference": 0.5, "notebook": 0.3, "small_job": 0.2}}),
        (0.15, {"name": "h200-infer", "model": "H200-141GB", "sharing": "exclusive",
                "workloads": {"inference": 0.8, "batch_eval": 0.2}}),
    ]


def _apportion(total: int, weights: Sequence[float]) -> list[int]:
    """Split `total` by weights (largest remainder), one each first while there are enough."""
    n = len(weights)
    if total < n:
        return [1] * total + [0] * (n - total)
    base = [1] * n
    rest = total - n
    quotas = [w / sum(weights) * total - 1 for w in weights]
    floors = [max(0, int(q)) for q in quotas]
    while sum(floors) > rest:
        floors[floors.index(max(floors))] -= 1
    order = sorted(range(n), key=lambda i: (-(quotas[i] - floors[i]), i))
    for i in order[: rest - sum(floors)]:
        floors[i] += 1
    return [b + f for b, f in zip(base, floors, strict=True)]
