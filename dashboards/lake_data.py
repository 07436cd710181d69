"""The dashboard's read path in lake mode: the org bill of a month, from an org lake.

Why a second read model and not a branch inside `dashboards.readmodel`: that one is a facade
over a warehouse snapshot (bills, heatmaps, queues, plans), and in lake mode there is no
warehouse; a flag inside it would have to be tested in every method. The lake pages need two
things, named by `OrgData`: which months the lake holds, and the org bill of one at a grain.
`LakeReadModel` answers them with `analytics.billing.org_bill` on DuckDB (read-only; nothing is ever
written to the lake), and caches each bill under the digests of the partitions it was built
from, so a cluster publishing again shows up at the next look and an unchanged lake is never
re-billed. The partition listing itself is re-read at most every `refresh_s` seconds.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Hashable
from typing import Protocol

from gpuledger.analytics.billing.org_bill import OrgBill, compute_org_bill
from gpuledger.core.config import Settings, utcnow
from gpuledger.core.period import Period
from gpuledger.warehouse.lake.location import Lake
from gpuledger.warehouse.lake.reader import partitions

MAX_BILLS = 32
"""Org bills kept (periods and grains come from the URL: bound the cache)."""


class OrgData(Protocol):
    """What the lake pages read (`dashboards.pages.org`)."""

    settings: Settings

    def periods(self) -> list[str]: ...

    def org_bill(self, period: str, by: tuple[str, ...] = ("cluster", "team")) -> OrgBill: ...


class LakeReadModel:
    """`OrgData` over a lake, on DuckDB (module docstring)."""

    def __init__(self, lake: Lake, settings: Settings, refresh_s: float = 120.0) -> None:
        self.lake = lake
        self.settings = settings
        self.refresh_s = refresh_s
        self._bills: OrderedDict[Hashable, OrgBill] = OrderedDict()
        self._digests: dict[str, tuple[float, tuple[tuple[str, str], ...]]] = {}
        self._gate = threading.Lock()

    def periods(self) -> list[str]:
        """Months any cluster published, newest first (this month when the lake is empty)."""
        found: set[str] = set()
        for name in self.lake.list_names(self.lake.root):
            if name.startswith("cluster="):
                folder = self.lake.path(name)
                found.update(p.removeprefix("period=") for p in self.lake.list_names(folder)
                             if p.startswith("period="))
        return sorted(found, reverse=True) or [str(Period.of(utcnow()))]

    def default_period(self) -> str:
        return self.periods()[0]

    def _partition_key(self, period: str) -> tuple[tuple[str, str], ...]:
        """(cluster, content digest) of each committed partition; re-listed every refresh_s."""
        now = time.monotonic()
        seen = self._digests.get(period)
        if seen is not None and now - seen[0] < self.refresh_s:
            return seen[1]
        key = tuple((p.manifest.cluster, p.manifest.content_sha256) for p in partitions(self.lake, period))
        self._digests[period] = (now, key)
        return key

    def org_bill(self, period: str, by: tuple[str, ...] = ("cluster", "team")) -> OrgBill:
        """`analytics.billing.org_bill.compute_org_bill` on DuckDB, once per set of partitions."""
        month = str(Period.exact(period))
        with self._gate:  # one bill at a time: DuckDB already uses every core for one
            full = (month, by, self._partition_key(month))
            bill = self._bills.get(full)
            if bill is None:
                bill = compute_org_bill(self.lake, month, by, engine="duckdb", settings=self.settings.lake)
                self._bills[full] = bill
                while len(self._bills) > MAX_BILLS:
                    self._bills.popitem(last=False)
            self._bills.move_to_end(full)
            return bill

    def close(self) -> None:
        """Nothing is held open between requests; forget the cache."""
        with self._gate:
            self._bills.clear()
