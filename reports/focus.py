"""The FinOps FOCUS cost-and-usage export (v1.2 mandatory columns + the 1.3 provider and
split-allocation columns), from the bill's detail rows.

Mapping (one row per UTC day x device x holder, the bill's finest grain):
- ChargeCategory `Usage`, ChargeFrequency `Usage-Based`, ServiceCategory
  `AI and Machine Learning`, ServiceSubcategory `AI Platforms`, ServiceName `GPU Pool`;
- PricingUnit = ConsumedUnit = `GPU-Hours`; PricingQuantity = ConsumedQuantity = card-hours
  (held hours x share); ListUnitPrice = the full-card price, so ListCost = ListUnitPrice x
  PricingQuantity; ContractedCost = EffectiveCost = BilledCost = cost after the sharing
  discount (the sharing tariff is our negotiated term; there are no commitment programs);
- SkuId `<model>:<whole|MIG profile|timeslice/N|vgpu>`, SkuPriceId = SkuId@unit price;
- ResourceId = GPU UUID (`<uuid>/gi<GPU_I_ID>` for a MIG instance); SubAccountId = the team;
- split allocation (1.3): the origin charge is one card for one day; each holder's row is an
  allocated charge (AllocatedResourceId `namespace/pod`, AllocatedRatio = its card-hours over
  the card-day's), the unheld remainder is the unallocated portion (AllocatedResourceId null);
- the sharing discount the platform absorbs is an `Adjustment` row per day x model x mode, so
  BilledCost sums to the fleet cost; late data for an issued month is `Usage` with ChargeClass
  `Correction` and the ChargePeriod of that month;
- `x_` columns: idle card-hours and cost, activity ratio, queue, namespace, pod, node, pool...
Times are UTC (`YYYY-MM-DDTHH:MM:SSZ` in CSV), periods end-exclusive; amounts are Decimal
(38, 10) in Parquet and plain decimal numbers in CSV.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import polars as pl

from core.config import Settings
from core.window import Window

DECIMAL = pl.Decimal(38, 10)
UTC_TS = pl.Datetime("us", "UTC")
SERVICE_CATEGORY = "AI and Machine Learning"
SERVICE_SUBCATEGORY = "AI Platforms"
SERVICE_NAME = "GPU Pool"
UNIT = "GPU-Hours"

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
    "SkuId": pl.String, "SkuPriceId": pl.String, "SubAccountId": pl.String,
    "SubAccountName": pl.String, "Tags": pl.String,
    # Custom columns.
    "x_IdleCardHours": DECIMAL, "x_IdleCost": DECIMAL, "x_ActivityRatio": pl.Float64,
    "x_SharingDiscount": DECIMAL, "x_Queue": pl.String, "x_Namespace": pl.String,
    "x_Pod": pl.String, "x_Node": pl.String, "x_Pool": pl.String, "x_GpuModel": pl.String,
    "x_SharingMode": pl.String, "x_MigProfile": pl.String, "x_GpuInstanceId": pl.Int32,
    "x_Share": pl.Float64, "x_LineType": pl.String, "x_CorrectedPeriod": pl.String,
    "x_PriceBookVersion": pl.String,
}
JSON_COLUMNS = ("AllocatedMethodDetails", "AllocatedTags", "Tags")
NOT_ALLOCATED = ("unallocated",)


def sku_id(model: str, mode: str, profile: str | None, share: float | None) -> str:
    """`<model>:<whole|MIG profile|timeslice/N|vgpu>` (N = replicas, from the 1/N share)."""
    if mode == "mig" and profile:
        return f"{model}:{profile}"
    if mode == "timeslice":
        replicas = round(1 / share) if share and share > 0 else 1
        return f"{model}:timeslice/{replicas}"
    if mode == "vgpu":
        return f"{model}:vgpu"
    return f"{model}:whole"


def method_id(mode: str, settings: Settings) -> str:
    """The documented split-allocation method for a sharing mode (see docs/readme/reports.md)."""
    if mode == "mig":
        return f"gpuledger/mig-{settings.sharing.mig_share_basis}-slices"
    return {
        "timeslice": "gpuledger/timeslice-replica-fraction",
        "vgpu": "gpuledger/vgpu-requested-fraction",
    }.get(mode, "gpuledger/whole-card")


def _resource(row: dict[str, Any]) -> tuple[str, str, str]:
    """ResourceId, ResourceName, ResourceType of a detail row's device."""
    uuid, gi, mode, node = row["uuid"], row["gpu_i_id"], row["sharing_mode"], row["node"]
    if row["team"] in NOT_ALLOCATED:
        return str(uuid), f"{node} {row['model']}", "GPU"
    if mode == "mig" and gi is not None and gi >= 0:
        return f"{uuid}/gi{gi}", f"{node} {row['model']} {row['profile'] or 'MIG'} (GI {gi})", "MIG Instance"
    kind = {"timeslice": "GPU Time-Slice", "vgpu": "vGPU"}.get(mode, "GPU")
    suffix = f" replica {row['vgpu']}" if row.get("vgpu") not in (None, "") else ""
    return str(uuid), f"{node} {row['model']}{suffix}", kind


def _description(row: dict[str, Any], sku: str) -> str:
    hours = row["card_hours"]
    if row.get("kind") == "utilization_remainder":
        return f"utilization-billed remainder of {sku} on {row['node']} (not paid by holders)"
    if row["team"] in NOT_ALLOCATED:
        return f"{hours:.3f} GPU-hours of unallocated {sku} capacity on {row['node']}"
    holder = f"{row['namespace']}/{row['pod']}" if row["pod"] else str(row["namespace"])
    return f"{hours:.3f} GPU-hours of {sku} held by {holder}"


def _dumps(value: dict[str, Any] | None) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True, separators=(",", ":"))


def _usage_rows(detail: pl.DataFrame, settings: Settings) -> list[dict[str, Any]]:
    """One FOCUS row per detail row (the allocated charges of each card-day)."""
    # 1. The origin charge of a split is one card for one day: its card-hours are the divisor.
    origin = detail.group_by(["uuid", "day"]).agg(pl.col("card_hours").sum().alias("_origin_hours"))
    frame = detail.join(origin, on=["uuid", "day"], how="left")
    rows: list[dict[str, Any]] = []
    # 2. Map each row; the JSON columns are built per row (key order is sorted, stable).
    for row in frame.iter_rows(named=True):
        allocated = row["team"] not in NOT_ALLOCATED
        sku = (
            sku_id(row["model"], row["sharing_mode"], row["profile"], row["share"])
            if allocated else sku_id(row["model"], "exclusive", None, None)
        )
        resource_id, resource_name, resource_type = _resource(row)
        ratio = row["card_hours"] / row["_origin_hours"] if row["_origin_hours"] else 0.0
        holder = f"{row['namespace']}/{row['pod']}" if row["pod"] else row["namespace"]
        alloc_tags = {
            k: v for k, v in {
                "gpuledger/team": row["team"], "k8s/namespace": row["namespace"],
                "k8s/pod": row["pod"], "kueue/queue": row["queue"],
            }.items() if v not in (None, "")
        }
        tags = {
            k: v for k, v in {
                "gpuledger/node": row["node"], "gpuledger/pool": row["pool"],
                "gpuledger/model": row["model"], "gpuledger/sharing-mode": row["sharing_mode"],
            }.items() if v not in (None, "")
        }
        rows.append({
            "ChargePeriodStart": row["_start"], "ChargePeriodEnd": row["_end"],
            "ChargeCategory": "Usage", "ChargeClass": None,
            "ChargeDescription": _description(row, sku),
            "BilledCost": row["cost"], "EffectiveCost": row["cost"], "ContractedCost": row["cost"],
            "ListCost": row["list_cost"], "ListUnitPrice": row["unit_price"],
            "PricingQuantity": row["card_hours"], "ConsumedQuantity": row["card_hours"],
            "PricingUnit": UNIT, "ConsumedUnit": UNIT,
            "AllocatedMethodId": method_id(row["sharing_mode"], settings),
            "AllocatedMethodDetails": _dumps({"Elements": [{
                "AllocatedRatio": round(ratio, 12), "UsageUnit": UNIT,
                "UsageQuantity": round(row["card_hours"], 9), "x_Share": row["share"],
            }]}),
            "AllocatedResourceId": holder if allocated else None,
            "AllocatedResourceName": (row["pod"] or row["namespace"]) if allocated else None,
            "AllocatedTags": _dumps(alloc_tags) if allocated and alloc_tags else None,
            "ResourceId": resource_id, "ResourceName": resource_name, "ResourceType": resource_type,
            "SkuId": sku, "SkuPriceId": f"{sku}@{row['unit_price']:.6f}",
            "SubAccountId": row["team"], "SubAccountName": row["team"], "Tags": _dumps(tags),
            "x_IdleCardHours": row["idle_card_hours"], "x_IdleCost": row["idle_cost"],
            "x_ActivityRatio": row["active_ratio"], "x_SharingDiscount": row["sharing_discount"],
            "x_Queue": row["queue"], "x_Namespace": row["namespace"], "x_Pod": row["pod"],
            "x_Node": row["node"], "x_Pool": row["pool"], "x_GpuModel": row["model"],
            "x_SharingMode": row["sharing_mode"], "x_MigProfile": row["profile"],
            "x_GpuInstanceId": row["gpu_i_id"], "x_Share": row["share"],
            "x_LineType": "unallocated" if not allocated else (
                "unattributed" if row["team"] == "unattributed" else "team"),
        })
    return rows


def _discount_rows(detail: pl.DataFrame) -> list[dict[str, Any]]:
    """The sharing discount the platform absorbs, per day x model x sharing mode."""
    grouped = (
        detail.filter(pl.col("sharing_discount") != 0)
        .group_by(["_start", "_end", "model", "sharing_mode"])
        .agg(pl.col("sharing_discount").sum())
        .sort(["_start", "model", "sharing_mode"])
    )
    return [
        {
            "ChargePeriodStart": r["_start"], "ChargePeriodEnd": r["_end"],
            "ChargeCategory": "Adjustment", "ChargeClass": None,
            "ChargeDescription": (
                f"sharing discount on {r['model']} ({r['sharing_mode']}) absorbed by the platform"
            ),
            "BilledCost": r["sharing_discount"], "EffectiveCost": r["sharing_discount"],
            "ContractedCost": r["sharing_discount"], "ListCost": 0.0,
            "SubAccountId": "sharing_discount", "SubAccountName": "sharing_discount",
            "x_GpuModel": r["model"], "x_SharingMode": r["sharing_mode"],
            "x_SharingDiscount": r["sharing_discount"], "x_LineType": "sharing_discount",
        }
        for r in grouped.iter_rows(named=True)
    ]


def _redistribution_rows(summary: pl.DataFrame, window: Window, settings: Settings) -> list[dict[str, Any]]:
    """Unallocated cost moved onto teams (`idle.unallocated_redistribution`), per summary line."""
    moved = summary.filter((pl.col("line") != "adjustment") & (pl.col("redistributed_cost") != 0))
    policy = settings.idle.unallocated_redistribution
    return [
        {
            "ChargePeriodStart": window.start, "ChargePeriodEnd": window.end,
            "ChargeCategory": "Adjustment", "ChargeClass": None,
            "ChargeDescription": (
                f"unallocated {r['model']} ({r['sharing_mode']}) capacity redistributed ({policy})"
            ),
            "BilledCost": r["redistributed_cost"], "EffectiveCost": r["redistributed_cost"],
            "ContractedCost": r["redistributed_cost"], "ListCost": 0.0,
            "SubAccountId": r["team"], "SubAccountName": r["team"],
            "x_GpuModel": r["model"], "x_SharingMode": r["sharing_mode"],
            "x_LineType": "redistribution",
        }
        for r in moved.iter_rows(named=True)
    ]


def _correction_rows(adjustments: pl.DataFrame) -> list[dict[str, Any]]:
    """Late data for an issued month, as corrections to that (closed) billing period."""
    rows = []
    for r in adjustments.iter_rows(named=True):
        month = Window.month(r["for_period"])
        rows.append({
            "ChargePeriodStart": month.start, "ChargePeriodEnd": month.end,
            "ChargeCategory": "Usage", "ChargeClass": "Correction",
            "ChargeDescription": (
                f"late usage for {r['for_period']}: {r['card_hours']:+.3f} GPU-hours of "
                f"{r['model']} ({r['sharing_mode']}) for {r['team']}"
            ),
            "BilledCost": r["cost"], "EffectiveCost": r["cost"], "ContractedCost": r["cost"],
            "ListCost": r["list_cost"],
            "SubAccountId": r["team"], "SubAccountName": r["team"],
            "x_IdleCardHours": r["idle_card_hours"], "x_IdleCost": r["idle_cost"],
            "x_SharingDiscount": r["sharing_discount"], "x_GpuModel": r["model"],
            "x_SharingMode": r["sharing_mode"], "x_LineType": "adjustment",
            "x_CorrectedPeriod": r["for_period"],
        })
    return rows


def focus_frame(
    detail: pl.DataFrame, summary: pl.DataFrame, window: Window, settings: Settings,
    currency: str,
) -> pl.DataFrame:
    """The FOCUS rows of one month: usage, absorbed sharing discounts, redistributed
    unallocated cost, and late-data corrections (the `adjustment` lines of `summary`)."""
    # 1. Charge periods are the detail's UTC days, clipped to the billing window.
    days = detail.with_columns(
        pl.col("day").cast(pl.Datetime("us")).dt.replace_time_zone("UTC").alias("_start"),
    ).with_columns(
        pl.min_horizontal(pl.col("_start") + timedelta(days=1), pl.lit(window.end)).alias("_end"),
        pl.max_horizontal(pl.col("_start"), pl.lit(window.start)).alias("_start"),
    )
    # 2. Rows of each kind, then the constant columns every row shares.
    rows = (
        _usage_rows(days, settings) + _discount_rows(days)
        + _redistribution_rows(summary, window, settings)
        + _correction_rows(summary.filter(pl.col("line") == "adjustment"))
    )
    provider = settings.reports.issuer
    constant = {
        "BillingAccountId": settings.reports.billing_account,
        "BillingAccountName": settings.reports.billing_account_name,
        "BillingCurrency": currency, "BillingPeriodStart": window.start,
        "BillingPeriodEnd": window.end, "InvoiceIssuerName": provider, "ProviderName": provider,
        "PublisherName": provider, "ServiceProviderName": provider,
        "HostProviderName": settings.reports.host_provider, "ServiceCategory": SERVICE_CATEGORY,
        "ServiceSubcategory": SERVICE_SUBCATEGORY, "ServiceName": SERVICE_NAME,
        "ChargeFrequency": "Usage-Based", "x_PriceBookVersion": settings.price_book_version(),
    }
    for row in rows:
        row.update(constant)
        if row["ChargeCategory"] == "Usage" and row["ChargeClass"] is None:
            row["PricingCategory"] = "Standard"
    # 3. Typed frame in the declared column order (floats become Decimal(38, 10)).
    float_schema = {n: (pl.Float64 if t == DECIMAL else t) for n, t in COLUMNS.items()}
    frame = pl.DataFrame(rows, schema=float_schema)
    return frame.with_columns(
        pl.col(n).round(10).cast(DECIMAL) for n, t in COLUMNS.items() if t == DECIMAL
    )


def write_focus(frame: pl.DataFrame, folder: Path) -> list[Path]:
    """`focus.parquet` (typed) and `focus.csv` (ISO-8601 UTC times, plain decimals)."""
    parquet = folder / "focus.parquet"
    frame.write_parquet(parquet, compression="zstd", statistics=True)
    text = frame.with_columns(
        pl.col(n).dt.strftime("%Y-%m-%dT%H:%M:%SZ") for n, t in COLUMNS.items() if t == UTC_TS
    )
    csv = folder / "focus.csv"
    text.write_csv(csv, float_scientific=False)
    return [csv, parquet]
