"""THE rules a stored fact is computed under, typed and fingerprinted (docs/decisions/0147).

Why: the warehouse stores computed facts (the hourly roll-up, allocations, serving results, lake
partitions, statements). A fact computed under one idle threshold and read back under another
is wrong twice: the number is stale and the label (the bill prints today's settings) lies. So
every rule a stored fact depends on is gathered here, once, from `Settings`, and hashed into a
fingerprint the writer stores beside the fact and the reader compares with today's.

Three parts, by where they act:

- `SamplingRules`: how the sample pass turns raw samples into held, active and idle time
  (`analytics.sampling`): the activity rule, the idle threshold and minimum run, the
  held-idle framebuffer floor, the gap tolerance, the staleness bound, the fallback spacing
  and the hole rule. Baked into `card_hours_hourly` and `allocations`.
- `ShareRules`: what fraction of a card a holder pays (`analytics.devices`): the MIG share
  basis. Baked into `card_hours_hourly.card_hours`.
- `PricingRules`: applied when a bill is priced, never stored in the roll-up: the sharing
  discounts, the billing basis per pool and the redistribution of unallocated capacity.
  Stored with whatever a bill becomes (statements, lake partitions, serving results).

`rollup_fingerprint` covers the first two (what the roll-up depends on), `fingerprint` all
three. A rule whose *code* changes (not its setting) bumps its version string here
(`ACTIVITY_RULE_VERSION`, `HOLE_RULE`, `SHARE_RULE_VERSION`), so facts computed by older code
are recognised as computed under other rules too.

Pure Python, nothing heavy: the CLI builds `Rules.of(settings)` at the edge and hands it down.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal

from gpuledger.core import activity as activity_rule
from gpuledger.core.activity import ActivitySource

if TYPE_CHECKING:
    import polars as pl

    from gpuledger.core.config import Settings

__all__ = [
    "ACTIVITY_RULE_VERSION",
    "FALLBACK_SPACING_US",
    "HOLE_RULE",
    "HOLE_RULES",
    "HOLE_RULE_V1",
    "HOLE_RULE_V2",
    "SHARE_RULE_VERSION",
    "STALENESS_US",
    "ActivitySource",
    "PricingRules",
    "Rules",
    "SamplingRules",
    "ShareRules",
    "hole_split",
]

_US = 1_000_000

ACTIVITY_RULE_VERSION = "1"
"""Bumped when `core.activity`'s rule changes in code (what counts as a reading, the fallback)."""

HOLE_RULE = "card-next-scrape-midpoint-unknown-v3"
"""How a scrape hole is split between the rows around it (the sampling model, decision 0051
rule 5 and 0060, amended by 0168 and 0179): a row stands until the card's next scrape within
the gap tolerance, except where its holder ends there: then the hole (the time past the card's
own spacing) is split at its midpoint, each side taking at most the staleness bound of it. The
half a holder's first row reaches back over is held with its activity unknown (no reading of
that holder exists before its first row; readings carry forward only, 0051). A HAMi holder's
rows stay inside its allocation span (0180).
Renamed when the rule changes, so roll-ups computed under the old rule are known as such."""

HOLE_RULE_V2 = "card-next-scrape-midpoint-v2"
"""0168 as first written: the reach back took the first row's activity (so an idle first row
billed the guessed half of the hole as idle). Still computable, like v1."""

HOLE_RULE_V1 = "card-next-scrape-v1"
"""The rule before 0168: the row before a hole stood for all of it, holder change or not. This
code still computes under it (`SamplingRules.computable`), so a roll-up stored under it can be
billed as computed with its raw hours, and the frozen SQL pass of decision 0122 stays a check."""

HOLE_RULES: tuple[str, ...] = (HOLE_RULE, HOLE_RULE_V2, HOLE_RULE_V1)
"""The hole rules this code computes under."""

SHARE_RULE_VERSION = "2"
"""Bumped when the share code (`analytics.devices`) changes what a holder pays. 2: a whole card
on a node GPU feature discovery labels as replicated (time-slicing, MPS) pays 1 / replicas per
replica, not the whole card (`core.gfd`, decision 0167)."""

STALENESS_US = 300 * _US
"""How long a reading stands for a field that later rows miss: Prometheus' default lookback
delta (`--query.lookback-delta`, 5 minutes), the bound a query engine itself applies."""

FALLBACK_SPACING_US = 60 * _US
"""The spacing assumed where the read window holds no spacing at all (a lone sample in the
whole fleet): Prometheus' default `scrape_interval`, 1 minute."""


@dataclass(frozen=True, slots=True)
class SamplingRules:
    """How raw samples become held, active and idle time; durations in microseconds.

    None of them is the collection step: how long a sample stands for comes from the data.
    """

    idle_threshold: float
    idle_min_us: int
    held_fb_mib: float
    gap_tolerance_us: int
    activity: ActivitySource = "gr_engine_active"
    activity_version: str = ACTIVITY_RULE_VERSION
    staleness_us: int = STALENESS_US
    fallback_spacing_us: int = FALLBACK_SPACING_US
    hole_rule: str = HOLE_RULE

    @classmethod
    def of(cls, settings: Settings) -> SamplingRules:
        idle = settings.idle
        return cls(  # floats as floats: `threshold: 0` and `0.0` are one rule, one fingerprint
            idle_threshold=float(idle.threshold),
            idle_min_us=int(idle.min_minutes) * 60 * _US,
            held_fb_mib=float(idle.held_fb_mib),
            gap_tolerance_us=int(idle.gap_tolerance_s * _US),
            activity=idle.activity,
        )

    @property
    def computable(self) -> bool:
        """Whether this code computes under these rules: a set stored by code whose activity or
        hole rule has since changed (another version string) can be read, not recomputed."""
        return self.activity_version == ACTIVITY_RULE_VERSION and self.hole_rule in HOLE_RULES

    @property
    def reach_back_unknown(self) -> bool:
        """Whether the hole rule is v3 (0179, 0180): a first row's reach back into a hole is held
        with its activity unknown, and a HAMi holder's rows stay inside its span. The sample
        pass asks this in two steps; one answer, so a later rule cannot update one of them."""
        return self.hole_rule not in (HOLE_RULE_V1, HOLE_RULE_V2)

    @property
    def margin(self) -> timedelta:
        """Context read on each side of a window: enough to judge runs and gaps at its edges."""
        widest = max(self.idle_min_us, self.gap_tolerance_us, self.staleness_us)
        return timedelta(microseconds=widest + 2 * self.staleness_us)


@dataclass(frozen=True, slots=True)
class ShareRules:
    """What fraction of a card a holder pays (`analytics.devices`)."""

    mig_share_basis: Literal["compute", "memory", "max_normalized"] = "compute"
    version: str = SHARE_RULE_VERSION

    @classmethod
    def of(cls, settings: Settings) -> ShareRules:
        return cls(mig_share_basis=settings.sharing.mig_share_basis)

    @property
    def computable(self) -> bool:
        """Whether this code's share rules are these (`SamplingRules.computable`)."""
        return self.version == SHARE_RULE_VERSION


@dataclass(frozen=True, slots=True)
class PricingRules:
    """What a bill applies when it prices card-hours (never stored in the roll-up)."""

    discounts: tuple[tuple[str, float], ...] = ()
    billing_basis: str = "allocation"
    pool_billing_basis: tuple[tuple[str, str], ...] = ()
    redistribution: str = "none"

    @classmethod
    def of(cls, settings: Settings) -> PricingRules:
        sharing = settings.sharing
        return cls(
            discounts=tuple(sorted((str(k), float(v)) for k, v in sharing.discounts.items())),
            billing_basis=sharing.billing_basis,
            pool_billing_basis=tuple(sorted(sharing.pool_billing_basis.items())),
            redistribution=settings.idle.unallocated_redistribution,
        )


@dataclass(frozen=True, slots=True)
class Rules:
    """Everything a stored derived fact depends on (module docstring)."""

    sampling: SamplingRules
    shares: ShareRules = field(default_factory=ShareRules)
    pricing: PricingRules = field(default_factory=PricingRules)

    @classmethod
    def of(cls, settings: Settings) -> Rules:
        return cls(SamplingRules.of(settings), ShareRules.of(settings), PricingRules.of(settings))

    def with_rollup_of(self, stored: Rules) -> Rules:
        """These pricing rules over `stored`'s sampling and share rules: a roll-up billed as it
        was computed (`bill --as-computed`) is priced by today's price rules, which are never
        stored in it."""
        return Rules(stored.sampling, stored.shares, self.pricing)

    @property
    def computable(self) -> bool:
        """Whether this code can compute under these rules (both version strings are its own)."""
        return self.sampling.computable and self.shares.computable

    # Fingerprints -------------------------------------------------------------------------

    @property
    def rollup_fingerprint(self) -> str:
        """What `card_hours_hourly` and `allocations` depend on: sampling and share rules."""
        return _digest({"sampling": asdict(self.sampling), "shares": asdict(self.shares)})

    @property
    def fingerprint(self) -> str:
        """Every rule, pricing included: what a priced fact (a bill, a statement) depends on."""
        return _digest(self.to_dict())

    # Stored form --------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "sampling": asdict(self.sampling),
            "shares": asdict(self.shares),
            "pricing": {
                "discounts": dict(self.pricing.discounts),
                "billing_basis": self.pricing.billing_basis,
                "pool_billing_basis": dict(self.pricing.pool_billing_basis),
                "redistribution": self.pricing.redistribution,
            },
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Rules:
        """The inverse of `to_json`."""
        return cls.from_dict(json.loads(text))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Rules:
        """The inverse of `to_dict` (unknown keys are refused: a stored set is ours)."""
        pricing = data.get("pricing", {})
        return cls(
            sampling=SamplingRules(**data["sampling"]),
            shares=ShareRules(**data.get("shares", {})),
            pricing=PricingRules(
                discounts=tuple(sorted((str(k), float(v)) for k, v in pricing.get("discounts", {}).items())),
                billing_basis=pricing.get("billing_basis", "allocation"),
                pool_billing_basis=tuple(sorted(pricing.get("pool_billing_basis", {}).items())),
                redistribution=pricing.get("redistribution", "none"),
            ),
        )

    # For people ---------------------------------------------------------------------------

    def describe_rollup(self) -> str:
        """The roll-up's rules in one short line, e.g. `idle < 5% for >= 30 min, …`."""
        s = self.sampling
        minutes = s.idle_min_us / (60 * _US)
        return (
            f"idle < {s.idle_threshold * 100:g}% for >= {minutes:g} min, "
            f"held >= {s.held_fb_mib:g} MiB, {activity_rule.describe(s.activity)}, "
            f"MIG share by {self.shares.mig_share_basis}"
        )

    def describe(self) -> str:
        """All rules in one line (the roll-up's, then the discounts and billing basis)."""
        discounts = ", ".join(f"{mode} {factor:g}" for mode, factor in self.pricing.discounts)
        billed = self.pricing.billing_basis
        return f"{self.describe_rollup()}; discounts {discounts or 'none'}; billed by {billed}"


def _digest(value: dict[str, Any]) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def hole_split(
    to_next: pl.Expr, tol: pl.Expr, same_next: pl.Expr, same_hold_prev: pl.Expr, stale: int
) -> tuple[pl.Expr, pl.Expr]:
    """The hole rule (`HOLE_RULE`, decision 0168) as the sample pass computes it (step 5 of
    `analytics.sampling.sweep`): each row's reach after it (`dt`) and before it (`back`,
    microseconds), from the columns `sp` (the card's spacing), `t`, `t_card_prev` and `hold`.

    A row stands until the card's next scrape within the tolerance, as before, unless its
    holder ends on the device there (the device's next row has another holder, or there is
    none): then only its own spacing plus half the hole, the hole being the interval past the
    card's spacing. The first row of a holder on a device reaches back over the other half of
    the hole before it (to the card's previous scrape). Each half is at most the staleness
    bound: a reading stands no longer than a query engine would show it, and what remains of a
    longer hole is held by nobody. A regular scrape leaves no hole, so nothing moves there."""
    import polars as pl

    sp, t = pl.col("sp"), pl.col("t")
    ends = ~(same_next & pl.col("hold").eq_missing(pl.col("hold").shift(-1))).fill_null(False)
    hole_after = to_next - sp
    dt = (
        pl.when((to_next <= tol) & ends & (hole_after > 0))
        .then(sp + pl.min_horizontal(hole_after // 2, pl.lit(stale, pl.Int64)))
        .when(to_next <= tol).then(to_next)
        .otherwise(sp)
    )
    from_prev = t - pl.col("t_card_prev")
    hole_before = from_prev - sp
    starts = ~same_hold_prev.fill_null(False)
    back = (
        pl.when(starts & (from_prev <= tol) & (hole_before > 0))
        .then(pl.min_horizontal(hole_before - hole_before // 2, pl.lit(stale, pl.Int64)))
        .otherwise(pl.lit(0, pl.Int64))
    )
    return dt, back
