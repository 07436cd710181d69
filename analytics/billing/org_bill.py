"""The org bill: every cluster's published bill, re-aggregated, never re-priced.

Each cluster priced its own month (`gpuledger publish`); the lake holds that priced detail
exactly (DECIMAL). The org bill only adds it up, and finishes each cluster's lines with the
very functions its own bill uses (`analytics.billing.lines`), so a cluster's lines in the org bill are
its own bill's lines to the cent, and the org bill is their sum.

1. The committed partitions of the period (manifests only; files checked against them).
2. The engine (DuckDB embedded, or Spark for fleets beyond one machine) runs one SQL text:
   the detail summed by cluster and the requested dimensions (`warehouse.lake.org_sql`).
3. Per cluster, as `analytics.billing.bill` does: the discount line, redistribution by that cluster's
   own policy, whole cents against that cluster's fleet cost (checked against its manifest).
4. Team aliases (`lake.team_aliases`) rename teams after their cluster's lines are final, so a
   rename rolls lines up by one name and never changes a cluster's numbers.
5. Without `cluster` in `by`, lines of the same dimensions add up across clusters, in cents.
6. Conservation: the lines' costs add up to the sum of the clusters' fleet costs, to the cent.

Each cluster's numbers carry the rules its own bill was computed under (its manifest's
`rules`, docs/decisions/0150). The org bill never relabels them with one set: it states each
cluster's, and says so (`rules_note`) when they differ, since the same usage would then be
priced differently from one cluster to the next.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import polars as pl

from gpuledger.analytics.billing.bill import DIMENSIONS, ConservationError
from gpuledger.analytics.billing.lines import (
    FLAG_HOURS,
    HOURS,
    LINE_VALUES,
    group_lines,
    line_json,
    order_lines,
    redistribute,
    round_lines,
)
from gpuledger.analytics.billing.money import to_cents
from gpuledger.analytics.billing.special_lines import SPECIAL_LINES
from gpuledger.core.config_lake import LakeSettings
from gpuledger.core.errors import InputError
from gpuledger.core.period import Period
from gpuledger.core.rules_record import RecordedRules, label
from gpuledger.warehouse.lake import duckdb_engine, spark_engine
from gpuledger.warehouse.lake.errors import LakeError
from gpuledger.warehouse.lake.location import Lake
from gpuledger.warehouse.lake.org_sql import SUM_COLUMNS, grouped_detail_sql
from gpuledger.warehouse.lake.reader import Partition, partitions, read_verified

Engine = Literal["duckdb", "spark"]
ORG_DIMENSIONS: tuple[str, ...] = ("cluster", *DIMENSIONS)
MONEY_LINES = tuple(c for c in LINE_VALUES if c not in HOURS)


@dataclass(frozen=True)
class OrgBill:
    """The org's lines; `clusters` maps each cluster to its fleet cost (cents-exact)."""

    period: str
    currency: str
    by: tuple[str, ...]
    engine: str
    fleet_cost: float
    fleet_card_hours: float
    lines: pl.DataFrame
    clusters: dict[str, float]
    watermarks: dict[str, str | None]
    rules: dict[str, RecordedRules | None] = field(default_factory=dict)
    """Each cluster's rules as its manifest records them (None: not recorded)."""

    @property
    def rules_differ(self) -> bool:
        """Whether the clusters' numbers were computed under more than one rule set (a cluster
        whose rules were not recorded counts as its own set: they cannot be shown to agree)."""
        return len({r.fingerprint if r is not None else None for r in self.rules.values()}) > 1

    def rules_lines(self) -> list[str]:
        """One line per cluster: `east: rules 1124e8bbe2e7 (idle < 5% …)`."""
        return [f"{name}: {label(rules)}" for name, rules in sorted(self.rules.items())]

    def rules_note(self) -> str | None:
        """One line when the clusters' rules differ, else None."""
        if not self.rules_differ:
            return None
        return (f"org bill {self.period}: clusters were billed under different rules ("
                + "; ".join(self.rules_lines()) + "); each cluster's lines stand as its own bill "
                "computed them")

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "gpuledger.org-bill/v1", "period": self.period, "currency": self.currency,
            "by": list(self.by), "engine": self.engine, "fleet_cost": round(self.fleet_cost, 2),
            "fleet_card_hours": round(self.fleet_card_hours, 6), "clusters": self.clusters,
            "watermarks": self.watermarks,
            "rules": {name: ({"fingerprint": r.fingerprint, "description": r.description} if r else None)
                      for name, r in sorted(self.rules.items())},
            "rules_differ": self.rules_differ,
            "lines": [line_json(r) for r in self.lines.iter_rows(named=True)],
        }


def check_org_by(by: Sequence[str]) -> tuple[str, ...]:
    """`cluster` first when asked, then `team` (always), then the rest in the order given."""
    dims = [d.strip() for d in by if d.strip()]
    bad = [d for d in dims if d not in ORG_DIMENSIONS]
    if bad:
        raise InputError(
            f"org bill --by {','.join(by)}: unknown dimension {bad[0]!r} (known: {', '.join(ORG_DIMENSIONS)})"
        )
    head = ["cluster"] if "cluster" in dims else []
    return tuple(dict.fromkeys([*head, "team", *[d for d in dims if d not in ("cluster", "team")]]))


def compute_org_bill(
    lake: Lake, period: str, by: Sequence[str] = ("cluster", "team"), *,
    engine: Engine = "duckdb", settings: LakeSettings | None = None, spark: Any = None,
    verify: bool = True, clusters: tuple[str, ...] | None = None,
) -> OrgBill:
    """Steps in the module docstring. `spark` is a session the caller owns (else one is made)."""
    settings = settings or lake.settings
    dims = check_org_by(by)
    own = tuple(d for d in dims if d != "cluster")
    month = str(Period.exact(period))
    # 1. Partitions.
    parts = partitions(lake, month, clusters)
    currency = _one_currency(parts)
    if verify:
        for part in parts:
            read_verified(lake, part, "bill_detail")
    # 2. The engine's sums.
    files = [part.file("bill_detail") for part in parts]
    sql = grouped_detail_sql(own)
    if engine == "duckdb":
        grouped = duckdb_engine.run_grouped(lake, files, sql)
    elif engine == "spark":
        session = spark or spark_engine.spark_session(settings, s3=not lake.is_local)
        grouped = spark_engine.run_grouped(session, lake, files, sql)
    else:
        raise InputError(f"org bill --engine {engine}: expected duckdb or spark")
    grouped = grouped.with_columns(pl.col(list(SUM_COLUMNS)).cast(pl.Float64))
    # 3. Each cluster's own lines.
    per_cluster = [_cluster_lines(grouped, part, own) for part in parts]
    lines = pl.concat(per_cluster, how="vertical")
    # 4-5. Aliases, then roll-up.
    lines = _apply_aliases(lines, settings.team_aliases)
    keys = list(dims)
    lines = _sum_lines(lines, keys)
    order = order_lines(lines, own)
    if "cluster" in dims:
        order = order.sort("cluster", maintain_order=True)
    totals = {p.manifest.cluster: float(p.manifest.bill["fleet_cost"]) for p in parts}
    bill = OrgBill(
        period=month, currency=currency, by=dims, engine=engine,
        fleet_cost=sum(to_cents(v) for v in totals.values()) / 100,
        fleet_card_hours=float(grouped["card_hours"].sum()), lines=order.select(*keys, *_values()),
        clusters=totals, watermarks={p.manifest.cluster: p.manifest.watermark for p in parts},
        rules={p.manifest.cluster: p.manifest.recorded_rules for p in parts},
    )
    check_org_conservation(bill)
    return bill


def _values() -> list[str]:
    return [*LINE_VALUES, *FLAG_HOURS, "unpriced"]


def _one_currency(parts: list[Partition]) -> str:
    found = sorted({str(p.manifest.bill["currency"]) for p in parts})
    if len(found) != 1:
        raise LakeError(f"org bill: clusters bill in different currencies ({', '.join(found)})")
    return found[0]


def _cluster_lines(grouped: pl.DataFrame, part: Partition, dims: tuple[str, ...]) -> pl.DataFrame:
    """Step 3: one cluster's lines, finished exactly as `analytics.billing.bill.compute_bill` does."""
    name = part.manifest.cluster
    mine = grouped.filter(pl.col("cluster") == name).drop("cluster")
    fleet_raw = float(mine["list_cost"].sum())
    published = float(part.manifest.bill["fleet_cost"])
    if to_cents(fleet_raw) != to_cents(published):
        raise ConservationError(
            f"org bill: {name} {part.manifest.period} detail sums to {fleet_raw:.2f} but its "
            f"manifest says {published:.2f}"
        )
    lines = group_lines(mine, dims)
    lines = redistribute(lines, str(part.manifest.bill["redistribution"]))
    lines = round_lines(order_lines(lines, dims), fleet_raw, dims)
    return lines.with_columns(pl.lit(name).alias("cluster"))


def _apply_aliases(lines: pl.DataFrame, aliases: dict[str, str]) -> pl.DataFrame:
    """Step 4: `old: new` renames everywhere, `cluster/old: new` in one cluster only."""
    if not aliases:
        return lines
    for old, new in aliases.items():
        if new in SPECIAL_LINES or old.split("/")[-1] in SPECIAL_LINES:
            raise InputError(f"lake.team_aliases {old}: {new}: special lines cannot be renamed")
    team = pl.col("team")
    expr = team
    for old, new in sorted(aliases.items(), key=lambda kv: "/" not in kv[0]):
        if "/" in old:
            cluster, name = old.split("/", 1)
            cond = (pl.col("cluster") == cluster) & (team == name)
        else:
            cond = team == old
        expr = pl.when(cond).then(pl.lit(new)).otherwise(expr)
    return lines.with_columns(expr.alias("team"))


def _sum_lines(lines: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Step 5: add lines that share `keys`: money as whole cents, hours as hours."""
    cents = [(pl.col(c) * 100).round(0).cast(pl.Int64).sum().alias(c) for c in MONEY_LINES]
    hours = [pl.col(c).sum() for c in (*HOURS,)]
    out = lines.group_by(keys, maintain_order=True).agg(*cents, *hours, pl.col("unpriced").any())
    # Python's true division, as `round_lines` does: Polars' `/ 100` multiplies by the
    # reciprocal (50878 / 100 = 508.78000000000003) and would not equal the cluster's own line.
    return out.with_columns(
        [pl.Series(c, [v / 100 for v in out[c].to_list()], dtype=pl.Float64) for c in MONEY_LINES]
    )


def check_org_conservation(bill: OrgBill) -> None:
    """Raise `ConservationError` unless the lines add up to the clusters' fleet costs."""
    cents = sum(to_cents(float(v)) for v in bill.lines["cost"].to_list())
    if cents != to_cents(bill.fleet_cost):
        raise ConservationError(
            f"org bill {bill.period}: lines sum to {cents / 100:.2f} but the clusters' fleet costs "
            f"sum to {bill.fleet_cost:.2f}"
        )
    hours = float(bill.lines["card_hours"].sum())
    if not math.isclose(hours, bill.fleet_card_hours, rel_tol=1e-9, abs_tol=1e-6):
        raise ConservationError(f"org bill {bill.period}: lines hold {hours:.6f} card-hours, "
                                f"the clusters {bill.fleet_card_hours:.6f}")
