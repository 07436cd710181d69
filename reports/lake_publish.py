"""`gpuledger publish`: one cluster's month, written to the org lake as one partition.

The partition holds the same bill the cluster's own reports issue (`reports.billing.month_bill`,
so the lake never prices anything differently from `gpuledger bill`), at its finest grain:

1. The month's bill: its priced detail (day x device x holder, and per card-day for
   `unallocated`) becomes `bill_detail`, with the summed columns as DECIMAL(38, 12) so every
   engine adds them exactly; its FOCUS rows (`reports.focus`) become `bill_lines`.
2. The prices in force (model x day unit price the bill used), the hourly card-hours and the
   allocations of the month, the inventory.
3. The bill facts the org bill needs to finish the cluster's lines exactly as its own bill does
   (redistribution policy, fleet cost, currency), the watermark (data as of), and the rules the
   bill was computed under (`Bill.rules`, never today's settings: docs/decisions/0150).
4. `warehouse.lake.partition.publish_partition` commits it (manifest last, idempotent,
   finalized partitions immutable unless reissued).
"""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl

from gpuledger.core.config import Settings
from gpuledger.core.config_lake import check_cluster_name
from gpuledger.core.errors import InputError
from gpuledger.core.period import Period
from gpuledger.core.rules_record import RecordedRules
from gpuledger.reports.billing import MonthBill, month_bill, summary_lines
from gpuledger.reports.focus import focus_frame
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.lake.extract import partition_tables
from gpuledger.warehouse.lake.location import Lake
from gpuledger.warehouse.lake.org_sql import SUM_COLUMNS
from gpuledger.warehouse.lake.partition import PublishResult, publish_partition

DETAIL_DECIMAL = pl.Decimal(38, 12)
DETAIL_ORDER: tuple[str, ...] = (
    "day", "kind", "team", "namespace", "pod", "queue", "node", "pool", "model", "sharing_mode",
    "uuid", "gpu_i_id", "vgpu", "profile",
)


def publish_month(
    wh: Warehouse, settings: Settings, lake: Lake, cluster: str, period: str, *,
    finalize: bool = False, reissue: bool = False, now: datetime | None = None,
) -> PublishResult:
    """Publish `period` of this warehouse as `cluster` (steps in the module docstring)."""
    try:
        check_cluster_name(cluster)
    except ValueError as exc:
        raise InputError(f"publish --cluster: {exc}") from None
    month = Period.exact(period)
    moment = now or datetime.now(UTC)
    if finalize and month.end > moment:
        raise InputError(f"publish --finalize: {period} is not over until {month.end.isoformat()}")
    # 1. The bill, as the cluster's reports issue it.
    bill = month_bill(wh, settings, str(month))
    detail = detail_frame(bill, cluster)
    focus = focus_frame(detail.with_columns(pl.col(SUM_COLUMNS).cast(pl.Float64)),
                        summary_lines(bill), bill.window, settings, bill.currency, rules=bill.raw.rules)
    # 2. Prices in force and the copied tables.
    tables = {
        "bill_detail": detail,
        "bill_lines": focus.with_columns(pl.lit(cluster).alias("x_Cluster")),
        "prices": prices_frame(bill).select(pl.lit(cluster).alias("cluster"), pl.all()),
        **partition_tables(wh, bill.window, cluster),
    }
    # 3. Facts and watermark.
    newest = bill.raw.newest_sample
    watermark = newest.isoformat().replace("+00:00", "Z") if newest else None
    facts = bill_facts(bill, settings)
    rules = bill.raw.rules
    return publish_partition(
        lake, cluster, str(month), tables, bill=facts, watermark=watermark,
        finalize=finalize, reissue=reissue, now=moment,
        rules=RecordedRules.of(rules).to_dict() if rules is not None else None,
    )


def detail_frame(bill: MonthBill, cluster: str) -> pl.DataFrame:
    """The bill's detail with a `cluster` column, exact decimals, in a fixed row order."""
    return (
        bill.detail.with_columns(
            pl.lit(cluster).alias("cluster"),
            *[pl.col(c).cast(DETAIL_DECIMAL) for c in SUM_COLUMNS],
        )
        .sort([*DETAIL_ORDER, "card_hours", "list_cost"], nulls_last=True)
        .select("cluster", *bill.detail.columns)
    )


def prices_frame(bill: MonthBill) -> pl.DataFrame:
    """The unit price per model and day the bill used, and the discount factors it applied."""
    return (
        bill.detail.filter(pl.col("unit_price").is_not_null())
        .group_by("model", "day", "sharing_mode")
        .agg(pl.col("unit_price").first(), pl.col("discount_factor").max())
        .with_columns(pl.lit(bill.currency).alias("currency"))
        .sort("model", "day", "sharing_mode")
    )


def bill_facts(bill: MonthBill, settings: Settings) -> dict[str, object]:
    """What the org bill needs to finish this cluster's lines as its own bill does."""
    raw = bill.raw
    return {
        "currency": bill.currency,
        "fleet_cost": round(bill.fleet_cost, 2),
        "fleet_card_hours": round(bill.fleet_card_hours, 6),
        "redistribution": raw.redistribution,
        "price_book_version": raw.price_book_version,
        "mig_share_basis": raw.mig_share_basis,
        "source": raw.source,
        "unpriced_models": list(raw.unpriced_models),
        "unattributed_namespaces": list(raw.unattributed_namespaces),
    }
