"""The settings model: loaded once by the CLI, then handed down (never read from globals).

Every section has defaults that make `gpuledger demo` work with no file at all. A bad file gets
one line naming the file, the key path and what was expected (`ConfigError`).
"""

from __future__ import annotations

import difflib
import os
import re
import typing
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from gpuledger.core.activity import ActivitySource
from gpuledger.core.config_advice import AdviceSettings
from gpuledger.core.config_budgets import FinanceSettings
from gpuledger.core.config_lake import LakeSettings
from gpuledger.core.config_plans import QuotaPlanSettings
from gpuledger.core.config_queues import QueueSettings
from gpuledger.core.config_retention import RetentionSettings
from gpuledger.core.config_warehouse import WarehouseSettings
from gpuledger.core.errors import ConfigError, InputError
from gpuledger.core.window import parse_duration
from gpuledger.core.yamlfile import load_yaml_file

MAX_UNIT_PRICE = 1_000_000.0
"""Per card-hour. Prices, budgets and counts have ceilings far above any real fleet, because
a value like 1e20 is not a typo anyone means and makes cent arithmetic and solvers run away."""
MAX_MONEY = 1e12
MAX_GPUS = 1_000_000
MAX_SOLVER_S = 3600.0

SharingMode = Literal["exclusive", "mig", "timeslice", "vgpu", "dra"]
SHARING_MODES: tuple[SharingMode, ...] = ("exclusive", "mig", "timeslice", "vgpu", "dra")
_DEFAULT_DISCOUNTS: dict[SharingMode, float] = {
    "exclusive": 1.0, "mig": 0.9, "timeslice": 0.8, "vgpu": 0.85,
}


class _Section(BaseModel):
    """Unknown keys are refused (with a did-you-mean) and NaN/Inf never pass as a number."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        """`unit_price: true` is a slip, not the price 1: only bool fields take true/false."""
        if info.field_name is None:
            return value
        annotation = cls.model_fields[info.field_name].annotation
        if isinstance(value, bool) and not _takes_bool(annotation):
            raise ValueError(f"expected a value, not {str(value).lower()}")
        if isinstance(value, dict) and typing.get_origin(annotation) is dict:
            item = typing.get_args(annotation)[1]
            if not _takes_bool(item) and any(isinstance(v, bool) for v in value.values()):
                raise ValueError("expected values, not true/false")
        return value


def _takes_bool(annotation: Any) -> bool:
    return annotation is bool or bool in typing.get_args(annotation)


class PrometheusSettings(_Section):
    url: str | None = None
    auth_header: SecretStr | None = Field(
        default=None, description="Full Authorization header value; never logged."
    )
    verify_tls: bool = True
    timeout_s: float = Field(default=30.0, gt=0, le=3600)
    deadline_s: float = Field(
        default=600.0, gt=0, le=86_400,
        description="whole-request deadline of one engine request, retries and body included "
        "(timeout_s is per socket read: a server trickling bytes never trips it)")
    max_response_mb: float = Field(
        default=256.0, gt=0, le=16_384,
        description="largest answer body read (decoded MB); refused while streaming, never "
        "buffered past it (a chunk's answers stay far below: collect_sizing.CHUNK_ROWS)")
    max_concurrency: int = Field(default=4, ge=1, le=64)
    retries: int = Field(default=3, ge=0, le=10)
    step: str = "60s"
    max_points_per_query: int = Field(default=11_000, ge=100, le=11_000)
    max_samples_per_query: int = Field(
        default=2_000_000, ge=1_000, description="series x points per query; shards by node below it"
    )
    chunk: str = Field(default="1d", description="load batch: one transaction and watermark per chunk")
    pod_labels: Literal["auto", "direct", "exported"] = Field(
        default="auto",
        description="which labels name the workload: `exported_pod`/... (ServiceMonitor with "
        "honorLabels false) or `pod`/...; auto prefers exported_* per series when present",
    )
    replica_labels: tuple[str, ...] = Field(
        default=("replica", "prometheus_replica"), max_length=8,
        description="labels that tell HA Prometheus replicas apart behind a query layer: series "
        "differing only in them are merged, never double counted (docs/decisions/0053)",
    )
    gap_retry_horizon: str = Field(
        default="6h", description="how long a span the engine answered without any GPU sample "
        "is read again by later collects (three times the CronJob's 2-hour lookback); older "
        "holes only by a --start below them (docs/decisions/0182)")
    read_path: Literal["auto", "query_range", "remote_read", "export"] = Field(
        default="auto", description="how raw DCGM series are read: auto probes VictoriaMetrics "
        "export, then Prometheus remote read, else query_range (docs/decisions/0124)")

    @field_validator("step", "chunk", "gap_retry_horizon")
    @classmethod
    def _step(cls, value: str) -> str:
        try:
            parse_duration(value)
        except InputError as exc:
            raise ValueError(str(exc)) from None
        return value


class KubernetesSettings(_Section):
    kubeconfig: str | None = None
    context: str | None = None
    mig_configmap_namespace: str = "gpu-operator"
    mig_configmap_name: str = "default-mig-parted-config"


class PriceEntry(_Section):
    """Unit price of one card-hour of a GPU model, effective from a UTC date (inclusive)."""

    model: str
    unit_price: float = Field(
        gt=0, le=MAX_UNIT_PRICE,
        description="per card-hour; bounded so whole-cent apportioning stays a small loop",
    )
    effective_from: date = date(2000, 1, 1)
    currency: str | None = None


class FallbackRule(_Section):
    """Map namespaces without the team label: regex on the namespace → team (may use \\1)."""

    namespace_regex: str
    team: str

    @field_validator("namespace_regex")
    @classmethod
    def _regex(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a valid regular expression: {exc}") from None
        return value


class TeamSettings(_Section):
    label_key: str = "team"
    fallback: tuple[FallbackRule, ...] = ()
    budgets: dict[str, Annotated[float, Field(ge=0, le=MAX_MONEY)]] = Field(default_factory=dict)
    guaranteed_gpus: dict[str, Annotated[int, Field(ge=0, le=MAX_GPUS)]] = Field(default_factory=dict)


class SharingSettings(_Section):
    """Discount factor per sharing mode (<1 rewards sharing) and how a MIG share is counted."""

    discounts: dict[SharingMode, float] = Field(
        default_factory=lambda: dict(_DEFAULT_DISCOUNTS)
    )
    mig_share_basis: Literal["compute", "memory", "max_normalized"] = "compute"
    billing_basis: Literal["allocation", "utilization"] = "allocation"
    pool_billing_basis: dict[str, Literal["allocation", "utilization"]] = Field(
        default_factory=dict
    )

    @field_validator("discounts")
    @classmethod
    def _discounts(cls, value: dict[str, float]) -> dict[str, float]:
        for mode, factor in value.items():
            if not 0 < factor <= 1:
                raise ValueError(f"{mode}: discount factor {factor} must be in (0, 1]")
        return value


class IdleSettings(_Section):
    threshold: float = Field(default=0.05, ge=0, le=1)
    min_minutes: int = Field(default=30, ge=1, le=44_640)
    unallocated_redistribution: Literal["none", "proportional", "even"] = "none"
    gap_tolerance_s: float = Field(
        default=3600, gt=0, le=3600,
        description="A scrape gap up to this long does not end an allocation or an idle run.",
    )
    held_fb_mib: float = Field(
        default=1024, ge=0, le=10_000_000,
        description="Idle time is 'held idle' when framebuffer use averages at least this much.",
    )
    activity: ActivitySource = Field(
        default="gr_engine_active",
        description="Which DCGM field says how busy a card is: GR_ENGINE_ACTIVE (else GPU_UTIL "
        "where the exporter has no profiling fields), or GPU_UTIL only (core.activity). Like "
        "every idle rule, a change after a roll-up is caught by the rules fingerprint (core.rules).",
    )


class RoleBinding(_Section):
    """Grant a role to a user or a proxy group; `lead` needs the team it leads."""

    subject: str
    kind: Literal["user", "group"] = "user"
    role: Literal["admin", "lead", "viewer"]
    team: str | None = None

    @field_validator("team")
    @classmethod
    def _team(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("team must not be empty")
        return value

    @model_validator(mode="after")
    def _lead_names_team(self) -> RoleBinding:
        """A lead binding without `team` granted nothing and said nothing (issue 31): refused."""
        if self.role == "lead" and self.team is None:
            raise ValueError(f"role lead for {self.kind} {self.subject!r} needs `team`: the team it leads")
        return self


class AccessSettings(_Section):
    proxy_addresses: tuple[str, ...] = ("127.0.0.1",)
    user_header: str = "X-Forwarded-User"
    groups_header: str = "X-Forwarded-Groups"
    roles: tuple[RoleBinding, ...] = ()


class PlanSettings(_Section):
    expire_after_hours: float = Field(default=72, gt=0, le=24 * 366)
    max_gpus_changed_per_node: int = Field(default=8, ge=0, le=MAX_GPUS)
    max_gpus_changed_per_plan: int | None = Field(default=None, ge=0, le=MAX_GPUS)
    solver_time_limit_s: float = Field(
        default=30, gt=0, le=MAX_SOLVER_S,
        description="wall-clock bound of an optimize command: reading inputs and solving",
    )
    state_timeout_s: float = Field(default=900, gt=0, le=86_400)
    nodes_in_parallel: int = Field(default=1, ge=1, le=1000)
    spare_instances: bool = False  # MIG plans may fill a used card with instances nobody asked for
    quota: QuotaPlanSettings = QuotaPlanSettings()


class ReportSettings(_Section):
    out_dir: str = "gpuledger-reports"  # not "reports": that is the package folder in a checkout
    issuer: str = "gpuledger"
    billing_account: str = "gpu-fleet"
    billing_account_name: str = "GPU fleet"
    host_provider: str = "On-premises"
    paper: Literal["A4", "Letter"] = Field(
        default="A4", description="page size of the PDF statements (every element is laid out inside it)")
    pdf_processes: int = Field(
        default=2, ge=1, le=32,
        description="processes that lay out a report's PDF statements at once: the report's own and "
        "N - 1 more, each about 80 MiB (no more than the CPUs the report may use; 1: the report's "
        "own alone; docs/decisions/0257)",
    )
    adjustment_lookback_months: int = Field(default=3, ge=0, le=36)
    focus_formats: tuple[Literal["parquet", "csv"], ...] = Field(
        default=("parquet",), min_length=1,
        description="the FOCUS export's files: `parquet` (typed, compressed; the default) and `csv` on "
        "request (docs/decisions/0193)",
    )
    schedule_grace_hours: float = Field(default=6.0, ge=0, le=24 * 31)
    schedule_backfill_months: int = Field(default=1, ge=1, le=36)
    signing_key: SecretStr | None = Field(
        default=None,
        description="HMAC key that signs issued statements, so a changed file is detected; "
        "write `${GPULEDGER_REPORT_KEY}` to keep it out of the file. Never logged.",
    )
    min_coverage: float = Field(
        default=0.9, gt=0, le=1,
        description="Share of a month's hours that must have samples before the month can be "
        "finalized: a month with a collection outage is refused, not locked half-billed.",
    )


class Settings(_Section):
    """Everything a gpuledger command may need, with demo-friendly defaults."""

    currency: str = "USD"
    prometheus: PrometheusSettings = PrometheusSettings()
    kubernetes: KubernetesSettings = KubernetesSettings()
    price_book: tuple[PriceEntry, ...] = (
        PriceEntry(model="H200-141GB", unit_price=3.80),
        PriceEntry(model="H100-80GB", unit_price=3.00),
        PriceEntry(model="A100-80GB", unit_price=1.90),
        PriceEntry(model="A100-SXM4-40GB", unit_price=1.30),
        PriceEntry(model="B200-180GB", unit_price=5.50),
    )
    teams: TeamSettings = TeamSettings()
    sharing: SharingSettings = SharingSettings()
    idle: IdleSettings = IdleSettings()
    access: AccessSettings = AccessSettings()
    plans: PlanSettings = PlanSettings()
    reports: ReportSettings = ReportSettings()
    queues: QueueSettings = QueueSettings()
    advice: AdviceSettings = AdviceSettings()
    finance: FinanceSettings = FinanceSettings()
    lake: LakeSettings = LakeSettings()
    retention: RetentionSettings = RetentionSettings()
    warehouse: WarehouseSettings = WarehouseSettings()
    source: str | None = Field(default=None, exclude=True)

    def price_book_version(self) -> str:
        """A short stable hash of the price book, recorded in reports and bills."""
        import hashlib

        text = "|".join(
            f"{p.model}:{p.unit_price}:{p.effective_from}:{p.currency or self.currency}"
            for p in sorted(self.price_book, key=lambda p: (p.model, p.effective_from))
        )
        return hashlib.sha256(text.encode()).hexdigest()[:12]


_ENV_REF = re.compile(r"\$\{([A-Z_][A-Z0-9_]*)\}")


def _expand_env(value: Any, path: Path) -> Any:
    """Replace `${NAME}` in string values with the environment value (secrets stay out of files)."""
    if isinstance(value, dict):
        return {k: _expand_env(v, path) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand_env(v, path) for v in value]
    if not isinstance(value, str):
        return value

    def sub(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in os.environ:
            raise ConfigError(f"{path}: references ${{{name}}} but that variable is not set")
        return os.environ[name]

    return _ENV_REF.sub(sub, value)


def _describe(error: dict[str, Any]) -> str:
    location = ".".join(str(part) for part in error["loc"]) or "(top level)"
    message = " ".join(str(error["msg"]).split())
    if error.get("type") == "extra_forbidden":
        known = _fields_at(tuple(error["loc"][:-1]))
        guess = difflib.get_close_matches(str(error["loc"][-1]), known, n=1)
        if guess:
            message += f" (did you mean {guess[0]!r}?)"
        elif known:
            message += f" (expected one of {', '.join(sorted(known))})"
    return f"{location}: {message}"


def _fields_at(loc: tuple[Any, ...]) -> list[str]:
    """The keys a section at `loc` accepts: walk the model, skipping list indexes and map keys."""
    model: Any = Settings
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part)
        if field is None:
            return []
        inner = [a for a in typing.get_args(field.annotation) if isinstance(a, type)] or [field.annotation]
        sections = [a for a in inner if isinstance(a, type) and issubclass(a, BaseModel)]
        if not sections:
            return []
        model = sections[0]
    return [name for name in model.model_fields if name != "source"]


def load_settings(path: Path | None) -> Settings:
    """Load and validate a YAML settings file; `None` gives the embedded defaults."""
    if path is None:
        return Settings()
    data = load_yaml_file(path, what="config", error=ConfigError) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of sections at the top level")
    data = _expand_env(data, path)
    try:
        settings = Settings.model_validate({**data, "source": str(path)})
    except ValidationError as exc:
        # a misspelt key explains the 'field required' beside it, so it is named first
        first = min(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise ConfigError(f"{path}: {_describe(dict(first))}{more}") from None
    return settings


def utcnow() -> datetime:
    """The one clock the code reads (tests pass explicit times instead)."""
    return datetime.now(UTC)
