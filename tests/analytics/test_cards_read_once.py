"""The bill reads and parses the card inventory once (issue 31 item 7).

`analytics.devices.replicas.cards` reads `gpus` and every node's stored labels and parses them
(GPU feature discovery's replicas, the node pool). The bill priced with one copy and the raw
usage (`hourly_usage`) read its own (two calls). Case: a bill from raw samples calls `cards`
once, and bills the same lines as without the count.
"""

from __future__ import annotations

import pytest

from gpuledger.analytics.billing import bill as bill_module
from gpuledger.analytics.billing.bill import compute_bill
from gpuledger.analytics.devices import replicas
from gpuledger.analytics.usage import hourly as hourly_module
from gpuledger.core.config import Settings
from gpuledger.warehouse import Warehouse
from tests.analytics.builders import window
from tests.analytics.test_sampling_model import frame, minutes, rows, warehouse


def test_the_bill_reads_the_cards_once(tmp_path, monkeypatch):
    win = window(2)
    path = warehouse(tmp_path, win, frame(rows("GPU-1", minutes(120))))
    with Warehouse.open(path, read_only=True) as wh:
        before = compute_bill(wh, win, Settings(), ("team",), source="raw")
    calls: list[int] = []

    def counted(wh: Warehouse, window=None, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        return replicas.cards(wh, window, **kwargs)

    monkeypatch.setattr(bill_module, "cards", counted)
    monkeypatch.setattr(hourly_module, "cards", counted)
    with Warehouse.open(path, read_only=True) as wh:
        after = compute_bill(wh, win, Settings(), ("team",), source="raw")
    assert len(calls) == 1
    assert after.lines.equals(before.lines)
    assert float(after.fleet_card_hours) == pytest.approx(2.0)
