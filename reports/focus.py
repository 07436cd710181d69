"""The FinOps FOCUS cost-and-usage export (v1.2 mandatory columns + the 1.3 provider and
split-allocation columns), from the bill's detail rows.

Mapping (one row per UTC day x device x holder, the bill's finest grain):
- ChargeCategory `Usage`, ChargeFrequency `Usage-Based`, ServiceCategory
  `AI and Machine Learning`, ServiceSubcategory `AI Platforms`, ServiceName `GPU Pool`;
- PricingUnit = ConsumedUnit = `GPU-Hours`; PricingQuantity = ConsumedQuantity = card-hours
  (held hours x share); ListUnitPrice = the full-card price, so ListCost = ListUnitPrice x
  PricingQuantity; ContractedCost = EffectiveCost = BilledCost = cost after the sharing
  discount (the sharing tariff is our negotiated term; there are no commitment programs);
- SkuId `<model>:<whole|MIG profile|timeslice/N|vgpu>`, SkuPriceId = SkuId@unit price,
  SkuMeter `GPU Allocation Time`, SkuPriceDetails `{"x_GpuModel", "x_Device", "x_PricedPer"}`
  (no FOCUS-defined SKU price property applies to a card-hour; all three are null on the rows
  without a SKU: adjustments and corrections);
- ResourceId = GPU UUID (`<uuid>/gi<GPU_I_ID>` for a MIG instance); SubAccountId = the team;
- split allocation (1.3): the origin charge is one card for one day; each holder's row is an
  allocated charge (AllocatedResourceId `namespace/pod`, AllocatedRatio = its card-hours over
  the card-day's), the unheld remainder is the unallocated portion (AllocatedResourceId null);
- the sharing discount the platform absorbs is an `Adjustment` row per day x model x mode, so
  BilledCost sums to the fleet cost; late data for an issued month is `Usage` with ChargeClass
  `Correction` and the ChargePeriod of that month;
- CommitmentDiscountStatus present and null on every row (no commitment programs; present because
  focus-validator 2.2.1 evaluates a ConsumedQuantity condition on it, docs/guide/reports.md);
- InvoiceId = the statement number (`reports.statement.statement_number`: the team's, the
  fleet's for platform lines), BillingAccountType `GPU fleet`, SubAccountType `Team` or
  `Platform`; ContractedUnitPrice = ContractedCost / PricingQuantity;
- `x_` columns: idle card-hours and cost, activity ratio, queue, namespace, pod, node, pool,
  the team's cost centre and GL account (`finance.cost_centres`)...
Times are UTC (`YYYY-MM-DDTHH:MM:SSZ` in CSV), periods end-exclusive; amounts are Decimal
(38, 10) in Parquet and plain decimal numbers in CSV.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import polars as pl

from gpuledger.analytics.billing.special_lines import SpecialLine
from gpuledger.core.config import Settings
from gpuledger.core.period import Period
from gpuledger.core.rules import Rules
from gpuledger.core.window import Window
from gpuledger.reports.focus_adjustments import correction_rows, discount_rows, redistribution_rows

DECIMAL = pl.Decimal(38, 10)
UTC_TS = pl.Datetime("us", "UTC")
SERVICE_CATEGORY = "AI and Machine Learning"
SERVICE_SUBCATEGORY = "AI Platforms"
SERVICE_NAME = "GPU Pool"
UNIT = "GPU-Hours"
SKU_METER = "GPU Allocation Time"
"""What a SKU meters (FOCUS SkuMeter): the time a card, or a share of one, is held."""

MANDATORY_1_2: tuple[str, ...] = (
    "BilledCost", "BillingAccountId", "BillingAccountName", "BillingCurrency", "BillingPeriodEnd",
    "BillingPeriodStart", "ChargeCategory", "ChargeClass", "ChargeDescription", "ChargePeriodEnd",
    "ChargePeriodStart", "ContractedCost", "EffectiveCost", "InvoiceIssuerName", "ListCost",
    "PricingQuantity", "PricingUnit", "ProviderName", "PublisherName", "ServiceCategory",
    "ServiceName",
)
ADDED_1_3: tuple[str, ...] = (
    "ServiceProviderName", "HostProviderName", "AllocatedMethodId", "AllocatedMethodDetails",
    "AllocatedResourceId", "AllocatedResourceName", "AllocatedTags",
)
COLUMNS: dict[str, Any] = {
    # FOCUS columns (mandatory, then 1.3, then the conditional ones we can fill).
    "BilledCost": DECIMAL, "BillingAccountId": pl.String, "BillingAccountName": pl.String,
    "BillingCurrency": pl.String, "BillingPeriodEnd": UTC_TS, "BillingPeriodStart": UTC_TS,
    "ChargeCategory": pl.String, "ChargeClass": pl.String, "ChargeDescription": pl.String,
    "ChargePeriodEnd": UTC_TS, "ChargePeriodStart": UTC_TS, "ContractedCost": DECIMAL,
    "EffectiveCost": DECIMAL, "InvoiceIssuerName": pl.String, "ListCost": DECIMAL,
    "PricingQuantity": DECIMAL, "PricingUnit": pl.String, "ProviderName": pl.String,
    "PublisherName": pl.String, "ServiceCategory": pl.String, "ServiceName": pl.String,
    "ServiceProviderName": pl.String, "HostProviderName": pl.String,
    "AllocatedMethodId": pl.String, "AllocatedMethodDetails": pl.String,
    "AllocatedResourceId": pl.String, "AllocatedResourceName": pl.String,
    "AllocatedTags": pl.String,
    "ChargeFrequency": pl.String, "ConsumedQuantity": DECIMAL, "ConsumedUnit": pl.String,
    "ListUnitPrice": DECIMAL, "PricingCategory": pl.String, "ResourceId": pl.String,
    "ResourceName": pl.String, "ResourceType": pl.String, "ServiceSubcategory": pl.String,
    "SkuId": pl.String, "SkuPriceId": pl.String, "SkuMeter": pl.String, "SkuPriceDetails": pl.String,
    "SubAccountId": pl.String,
    "SubAccountName": pl.String, "Tags": pl.String,
    "BillingAccountType": pl.String, "SubAccountType": pl.String, "ContractedUnitPrice": DECIMAL,
    "InvoiceId": pl.String, "CommitmentDiscountStatus": pl.String,
    # Custom columns.
    "x_IdleCardHours": DECIMAL, "x_IdleCost": DECIMAL, "x_ActivityRatio": pl.Float64,
    "x_SharingDiscount": DECIMAL, "x_Queue": pl.String, "x_Namespace": pl.String,
    "x_Pod": pl.String, "x_Node": pl.String, "x_Pool": pl.String, "x_GpuModel": pl.String,
    "x_SharingMode": pl.String, "x_MigProfile": pl.String, "x_GpuInstanceId": pl.Int32,
    "x_Share": pl.Float64, "x_LineType": pl.String, "x_CorrectedPeriod": pl.String,
    "x_PriceBookVersion": pl.String, "x_CostCenter": pl.String, "x_GlAccount": pl.String,
}
NOT_ALLOCATED = (SpecialLine.UNALLOCATED.value,)


def method_id(mode: str, basis: str) -> str:
    """The documented split-allocation method for a sharing mode (see docs/guide/reports.md);
    `basis`: the MIG share basis of the bill's rules (`focus_frame`)."""
    if mode == "mig":
        return f"gpuledger/mig-{basis}-slices"
    return {
        "timeslice": "gpuledger/timeslice-replica-fraction",
        "vgpu": "gpuledger/vgpu-requested-fraction",
    }.get(mode, "gpuledger/whole-card")


def _json_value(expr: pl.Expr) -> pl.Expr:
    """`expr` as a JSON value (strings quoted and escaped), via Polars' own JSON encoder."""
    return pl.struct(expr.alias("v")).struct.json_encode().str.slice(5).str.strip_suffix("}")


def _json_object(pairs: dict[str, pl.Expr]) -> pl.Expr:
    """A JSON object of the non-null, non-empty pairs (keys in the given order)."""
    parts = [
        pl.when(value.is_not_null() & (value.cast(pl.String) != ""))
        .then(pl.lit(json.dumps(key) + ":") + _json_value(value))
        for key, value in pairs.items()
    ]
    return pl.lit("{") + pl.concat_str(parts, separator=",", ignore_nulls=True) + pl.lit("}")


def _usage_frame(detail: pl.DataFrame, basis: str) -> pl.DataFrame:
    """One FOCUS row per detail row: the allocated charges of each card-day (vectorized, so a
    100,000-card month stays a few columnar passes)."""
    col = pl.col
    allocated = ~col("team").is_in(list(NOT_ALLOCATED))
    mig_instance = (col("sharing_mode") == "mig") & (col("gpu_i_id") >= 0) & allocated
    # 1. The origin charge of a split is one card for one day: its card-hours are the divisor.
    origin = col("card_hours").sum().over(["uuid", "day"])
    ratio = pl.when(origin > 0).then(col("card_hours") / origin).otherwise(0.0).round(12)
    holder = pl.when(col("pod").is_not_null()).then(col("namespace") + "/" + col("pod")).otherwise(
        col("namespace"))
    frame = detail.with_columns(
        _sku(allocated, mig_instance).alias("_sku"), holder.alias("_holder"), ratio.alias("_ratio"),
    )
    # 2. Every column as an expression over the detail rows.
    return frame.select(
        *_charge_columns(allocated),
        *_allocation_columns(allocated, basis),
        *_resource_columns(allocated, mig_instance),
        *_custom_columns(allocated),
    )


def _sku(allocated: pl.Expr, mig_instance: pl.Expr) -> pl.Expr:
    """`<model>:<whole|MIG profile|timeslice/N|vgpu>`; unallocated capacity is sold whole."""
    col = pl.col
    replicas = (1 / col("share")).round(0).cast(pl.Int64, strict=False).fill_null(1)
    return pl.concat_str(
        col("model"), pl.lit(":"),
        pl.when(~allocated).then(pl.lit("whole"))
        .when(mig_instance & col("profile").is_not_null()).then(col("profile"))
        .when(col("sharing_mode") == "timeslice").then(pl.lit("timeslice/") + replicas.cast(pl.String))
        .when(col("sharing_mode") == "vgpu").then(pl.lit("vgpu"))
        .otherwise(pl.lit("whole")),
    )


def _charge_columns(allocated: pl.Expr) -> list[pl.Expr]:
    """Charge period, category and description; the cost and pricing columns."""
    col = pl.col
    hours = col("card_hours").round(3).cast(pl.String)
    return [
        col("_start").alias("ChargePeriodStart"), col("_end").alias("ChargePeriodEnd"),
        pl.lit("Usage").alias("ChargeCategory"), pl.lit(None, pl.String).alias("ChargeClass"),
        pl.when(col("kind") == "utilization_remainder").then(pl.format(
            "utilization-billed remainder of {} on {} (not paid by holders)", col("_sku"), col("node")))
        .when(~allocated).then(pl.format(
            "{} GPU-hours of unallocated {} capacity on {}", hours, col("_sku"), col("node")))
        .otherwise(pl.format("{} GPU-hours of {} held by {}", hours, col("_sku"), col("_holder")))
        .alias("ChargeDescription"),
        col("cost").alias("BilledCost"), col("cost").alias("EffectiveCost"),
        col("cost").alias("ContractedCost"), col("list_cost").alias("ListCost"),
        col("unit_price").alias("ListUnitPrice"), col("card_hours").alias("PricingQuantity"),
        col("card_hours").alias("ConsumedQuantity"), pl.lit(UNIT).alias("PricingUnit"),
        pl.lit(UNIT).alias("ConsumedUnit"), pl.lit("Standard").alias("PricingCategory"),
    ]


def _allocation_columns(allocated: pl.Expr, basis: str) -> list[pl.Expr]:
    """The FOCUS 1.3 split-allocation columns: method, ratio details, holder and its tags."""
    col = pl.col
    method = pl.col("sharing_mode").replace_strict(
        {m: method_id(m, basis) for m in ("exclusive", "mig", "timeslice", "vgpu")},
        default=method_id("exclusive", basis), return_dtype=pl.String,
    )
    return [
        method.alias("AllocatedMethodId"),
        pl.concat_str(
            pl.lit('{"Elements":[{"AllocatedRatio":'), _json_value(col("_ratio")),
            pl.lit(',"UsageQuantity":'), _json_value(col("card_hours").round(9)),
            pl.lit(f',"UsageUnit":"{UNIT}","x_Share":'), _json_value(col("share")),
            pl.lit("}]}"),
        ).alias("AllocatedMethodDetails"),
        pl.when(allocated).then(col("_holder")).alias("AllocatedResourceId"),
        pl.when(allocated).then(pl.coalesce("pod", "namespace")).alias("AllocatedResourceName"),
        pl.when(allocated).then(_json_object({
            "gpuledger/team": col("team"), "k8s/namespace": col("namespace"),
            "k8s/pod": col("pod"), "kueue/queue": col("queue"),
        })).alias("AllocatedTags"),
    ]


def _resource_columns(allocated: pl.Expr, mig_instance: pl.Expr) -> list[pl.Expr]:
    """The device charged (card, MIG instance or replica), its SKU, the team and the tags."""
    col = pl.col
    return [
        pl.when(mig_instance).then(col("uuid") + "/gi" + col("gpu_i_id").cast(pl.String))
        .otherwise(col("uuid")).alias("ResourceId"),
        pl.when(mig_instance).then(pl.format(
            "{} {} {} (GI {})", col("node"), col("model"), col("profile").fill_null("MIG"), col("gpu_i_id")))
        .when(allocated & col("vgpu").is_not_null() & (col("vgpu") != "")).then(pl.format(
            "{} {} replica {}", col("node"), col("model"), col("vgpu")))
        .otherwise(pl.format("{} {}", col("node"), col("model"))).alias("ResourceName"),
        pl.when(mig_instance).then(pl.lit("MIG Instance"))
        .when(allocated & (col("sharing_mode") == "timeslice")).then(pl.lit("GPU Time-Slice"))
        .when(allocated & (col("sharing_mode") == "vgpu")).then(pl.lit("vGPU"))
        .otherwise(pl.lit("GPU")).alias("ResourceType"),
        col("_sku").alias("SkuId"),
        pl.format("{}@{}", col("_sku"), col("unit_price").round(6)).alias("SkuPriceId"),
        pl.lit(SKU_METER).alias("SkuMeter"),
        _json_object({
            "x_GpuModel": col("model"), "x_Device": col("_sku").str.replace(r"^[^:]*:", ""),
            "x_PricedPer": pl.lit("card-hour"),
        }).alias("SkuPriceDetails"),
        col("team").alias("SubAccountId"), col("team").alias("SubAccountName"),
        _json_object({
            "gpuledger/node": col("node"), "gpuledger/pool": col("pool"),
            "gpuledger/model": col("model"), "gpuledger/sharing-mode": col("sharing_mode"),
        }).alias("Tags"),
    ]


def _custom_columns(allocated: pl.Expr) -> list[pl.Expr]:
    """The `x_` columns: idle, activity, where the device sits, and the line type."""
    col = pl.col
    return [
        col("idle_card_hours").alias("x_IdleCardHours"), col("idle_cost").alias("x_IdleCost"),
        col("active_ratio").alias("x_ActivityRatio"), col("sharing_discount").alias("x_SharingDiscount"),
        col("queue").alias("x_Queue"), col("namespace").alias("x_Namespace"), col("pod").alias("x_Pod"),
        col("node").alias("x_Node"), col("pool").alias("x_Pool"), col("model").alias("x_GpuModel"),
        col("sharing_mode").alias("x_SharingMode"), col("profile").alias("x_MigProfile"),
        col("gpu_i_id").alias("x_GpuInstanceId"), col("share").alias("x_Share"),
        pl.when(~allocated).then(pl.lit(SpecialLine.UNALLOCATED.value))
        .when(col("team") == SpecialLine.UNATTRIBUTED).then(pl.lit(SpecialLine.UNATTRIBUTED.value))
        .otherwise(pl.lit("team")).alias("x_LineType"),
    ]


def focus_frame(
    detail: pl.DataFrame, summary: pl.DataFrame, window: Window, settings: Settings,
    currency: str, *, rules: Rules | None,
) -> pl.DataFrame:
    """The FOCUS rows of one month: usage, absorbed sharing discounts, redistributed
    unallocated cost, and late-data corrections (the `adjustment` lines of `summary`).
    `rules`: the rules the bill's numbers were computed under (`Bill.rules`): what the split
    allocation's method names."""
    # 1. Charge periods are the detail's UTC days, clipped to the billing window.
    days = detail.with_columns(
        pl.col("day").cast(pl.Datetime("us")).dt.replace_time_zone("UTC").alias("_start"),
    ).with_columns(
        pl.min_horizontal(pl.col("_start") + timedelta(days=1), pl.lit(window.end)).alias("_end"),
        pl.max_horizontal(pl.col("_start"), pl.lit(window.start)).alias("_start"),
    )
    # 2. Usage rows vectorized; the few other rows (discounts, moves, corrections) as records.
    # the basis the numbers carry (their rules, never today's settings; unknown: not recorded)
    usage = _usage_frame(days, rules.shares.mig_share_basis if rules is not None else "unknown")
    records = (
        discount_rows(days) + redistribution_rows(summary, window, settings)
        + correction_rows(summary.filter(pl.col("line") == "adjustment"))
    )
    float_schema = {n: (pl.Float64 if t == DECIMAL else t) for n, t in COLUMNS.items()}
    others = pl.DataFrame(records, schema=float_schema)
    frame = _finance_columns(pl.concat([usage, others], how="diagonal_relaxed"), window, settings)
    # 3. The constant columns every row shares; declared order and types (Decimal(38, 10)).
    provider = settings.reports.issuer
    constant: dict[str, Any] = {
        "BillingAccountId": settings.reports.billing_account,
        "BillingAccountName": settings.reports.billing_account_name,
        "BillingCurrency": currency, "BillingPeriodStart": window.start,
        "BillingPeriodEnd": window.end, "InvoiceIssuerName": provider, "ProviderName": provider,
        "PublisherName": provider, "ServiceProviderName": provider,
        "HostProviderName": settings.reports.host_provider, "ServiceCategory": SERVICE_CATEGORY,
        "ServiceSubcategory": SERVICE_SUBCATEGORY, "ServiceName": SERVICE_NAME,
        "ChargeFrequency": "Usage-Based", "x_PriceBookVersion": settings.price_book_version(),
    }
    columns = []
    for name, kind in COLUMNS.items():
        if name in constant:
            expr = pl.lit(constant[name])
        elif name in frame.columns:
            expr = pl.col(name)
        else:
            expr = pl.lit(None)
        typed = expr.cast(pl.Float64).round(10).cast(DECIMAL) if kind == DECIMAL else expr.cast(kind)
        columns.append(typed.alias(name))
    return frame.select(columns)


def _finance_columns(frame: pl.DataFrame, window: Window, settings: Settings) -> pl.DataFrame:
    """InvoiceId (the statement number: the team's, the fleet's for the special lines), the
    account types, the contracted unit price (ContractedCost / PricingQuantity, so the FOCUS
    rule ContractedCost = ContractedUnitPrice x PricingQuantity holds) and the cost centre."""
    from gpuledger.reports.statement import statement_number

    period, account = str(Period.of(window.start)), settings.reports.billing_account
    lines = [s.value for s in SpecialLine]
    special = pl.col("SubAccountId").is_in(lines) | pl.col("SubAccountId").is_null()
    teams = [t for t in frame["SubAccountId"].drop_nulls().unique().to_list() if t not in lines]
    invoices = {t: statement_number(account, period, t) for t in teams}
    centres = settings.finance.cost_centres
    qty = pl.col("PricingQuantity")
    return frame.with_columns(
        pl.when(special).then(pl.lit(statement_number(account, period, None)))
        .otherwise(pl.col("SubAccountId").replace_strict(invoices, default=None, return_dtype=pl.String))
        .alias("InvoiceId"),
        pl.lit("GPU fleet").alias("BillingAccountType"),
        pl.when(special).then(pl.lit("Platform")).otherwise(pl.lit("Team")).alias("SubAccountType"),
        pl.when(qty.is_not_null() & (qty != 0)).then(pl.col("ContractedCost") / qty)
        .alias("ContractedUnitPrice"),
        pl.col("SubAccountId").replace_strict({t: c.cost_centre for t, c in centres.items()}, default=None,
                                              return_dtype=pl.String).alias("x_CostCenter"),
        pl.col("SubAccountId").replace_strict({t: c.gl_account for t, c in centres.items()}, default=None,
                                              return_dtype=pl.String).alias("x_GlAccount"),
    )


def write_focus(frame: pl.DataFrame, folder: Path, formats: Sequence[str] = ("parquet",)) -> list[Path]:
    """The FOCUS files `formats` names (`reports.focus_formats`): `focus.parquet` (typed: Decimal
    amounts, UTC timestamps; zstd) and, on request, `focus.csv` (ISO-8601 UTC times, plain
    decimals). Parquet is the default because it keeps the FOCUS types and is 16 times smaller
    (256 GPUs, a month: 5.3 against 85.8 MiB; bench/results/reports_focus_size.json, decision 0193)."""
    written = []
    if "parquet" in formats:
        parquet = folder / "focus.parquet"
        frame.write_parquet(parquet, compression="zstd", statistics=True)
        written.append(parquet)
    if "csv" in formats:
        text = frame.with_columns(
            pl.col(n).dt.strftime("%Y-%m-%dT%H:%M:%SZ") for n, t in COLUMNS.items() if t == UTC_TS
        )
        csv = folder / "focus.csv"
        text.write_csv(csv, float_scientific=False)
        written.append(csv)
    return written
