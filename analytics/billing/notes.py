"""What a bill tells its reader besides its numbers, one line each: the one list every surface
that bills shows (the CLI's stderr, the report's manifest, the API's `notes`, the notebook's
warnings, the dashboard's banner), so no surface drops what another says.

Why one home: the lines were written once for `gpuledger bill`'s stderr; the other surfaces
(report, budgets, the API, the dashboards) printed none of them, so a month billed from raw
samples because its roll-up was computed under other rules, or priced at zero for a model
without a price, looked exactly like one billed as usual (issue 28, docs/decisions/0158).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

if TYPE_CHECKING:
    from gpuledger.analytics.billing.bill import Bill


def bill_notes(bill: Bill) -> list[str]:
    """The bill's notes and warnings (`Bill.notes`, `Bill.warnings`: its rules and where its
    numbers came from), then what it could not know: models without a price, time-slice
    replica counts no label states. The numbers still add up; these say what they rest on."""
    out: list[str] = [*bill.notes, *bill.warnings]
    if bill.unpriced_models:
        hours = bill.detail.group_by("model").agg(pl.col("unpriced_card_hours").sum())
        held = {str(m): float(h) for m, h in hours.iter_rows()}
        named = ", ".join(f"{m!r} ({held.get(m, 0.0):,.3f} GPU-hours)" for m in bill.unpriced_models)
        out.append(
            f"no price for GPU model {named}: billed at 0 on lines marked unpriced; add it to "
            f"`price_book` in the config (model: <name>, unit_price: <{bill.currency} per "
            "GPU-hour>), or pass --strict-prices to make this an error"
        )
    if bill.replicas_unknown_nodes:
        out.append(
            "time-slice replica count unknown on node(s) " + ", ".join(bill.replicas_unknown_nodes)
            + " (no nvidia.com/gpu.replicas label from the Kubernetes API or kube_node_labels): "
            "shares there use the replicas seen, which overcharges when replicas sit unused"
        )
    return out
