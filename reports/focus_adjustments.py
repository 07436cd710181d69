"""The FOCUS rows that are not a holder's usage: the sharing discount the platform absorbs,
unallocated cost moved onto teams, and late data for an issued month.

They are few (per day x model x mode, per summary line), so they are built as records and
typed by `reports.focus` with the usage rows; kept apart so the export's column mapping
(`reports.focus`) reads as one table.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from gpuledger.analytics.billing.special_lines import SpecialLine
from gpuledger.core.config import Settings
from gpuledger.core.period import Period
from gpuledger.core.window import Window


def discount_rows(detail: pl.DataFrame) -> list[dict[str, Any]]:
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
            "SubAccountId": SpecialLine.SHARING_DISCOUNT.value,
            "SubAccountName": SpecialLine.SHARING_DISCOUNT.value,
            "x_GpuModel": r["model"], "x_SharingMode": r["sharing_mode"],
            "x_SharingDiscount": r["sharing_discount"], "x_LineType": SpecialLine.SHARING_DISCOUNT.value,
        }
        for r in grouped.iter_rows(named=True)
    ]


def redistribution_rows(summary: pl.DataFrame, window: Window, settings: Settings) -> list[dict[str, Any]]:
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


def correction_rows(adjustments: pl.DataFrame) -> list[dict[str, Any]]:
    """Late data for an issued month, as corrections to that (closed) billing period."""
    rows = []
    for r in adjustments.iter_rows(named=True):
        month = Period.exact(r["for_period"]).window
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
