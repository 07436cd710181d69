"""The notebook facade: `gpuledger.open(path)` and one method per question, each a Polars frame.

```python
import gpuledger
gl = gpuledger.open("gpuledger.duckdb")            # optional: config="gpuledger.yaml"
gl.bill("2026-11", by=["team", "model"])           # the lines `gpuledger bill` prints
gl.idle("2026-11", team="nlp")                     # idle per workload (Deployment, Job, notebook)
gl.recommendations("2026-11").to_pandas()          # one per workload and kind
gl.plans(); gl.budgets("2026-11"); gl.teams("2026-11")
gl.capacity(); gl.why("my-job-7xk2p")               # free now by shape; why a workload waits
gl.bill("2026-11", as_computed=True)               # the roll-up under the rules it was stored under
```

Why a facade in the roof: it composes warehouse, analytics and optimizer exactly as the CLI
commands do (same functions, same settings), so a notebook and `gpuledger bill` agree to the
cent. Each call opens its own short read-only connection: an open notebook never holds the
warehouse and never blocks a collector writing to it. Results are cached per call only, so a
later call sees new data. `period` is `YYYY-MM` (or anything `core.period.Period.parse` takes).

Every call that bills takes `as_computed` (`gpuledger bill --as-computed`, docs/decisions/0147)
and says the bill's notes (`analytics.billing.notes`: billed from raw samples because the roll-up
was computed under other rules, unpriced models, ...) as Python warnings (`BillNote`), which a
notebook shows under the cell, as the CLI prints them on stderr.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from gpuledger.core.config import Settings, load_settings
from gpuledger.core.period import Period
from gpuledger.core.window import Window

if TYPE_CHECKING:
    import polars as pl

    from gpuledger.analytics.billing.bill import Bill
    from gpuledger.warehouse import Warehouse

T = TypeVar("T")


class BillNote(UserWarning):
    """A line the bill tells its reader (`analytics.billing.notes.bill_notes`)."""


def _say(bill: Bill) -> Bill:
    """Warn each of the bill's notes (Python's default filter shows a line once per session)."""
    from gpuledger.analytics.billing.notes import bill_notes

    for line in bill_notes(bill):
        warnings.warn(f"gpuledger: {line}", BillNote, stacklevel=2)
    return bill


class Ledger:
    """One warehouse file and the settings to read it with (see module docstring)."""

    def __init__(self, path: str | Path, settings: Settings | None = None) -> None:
        self.path = Path(path)
        self.settings = settings or Settings()

    def _with(self, read: Callable[[Warehouse], T]) -> T:
        from gpuledger.warehouse import Warehouse

        with Warehouse.open(self.path, read_only=True, limits=self.settings.warehouse) as wh:
            return read(wh)

    @staticmethod
    def window(period: str) -> Window:
        return Period.parse(period).window

    def _bill(self, wh: Warehouse, window: Window, by: Sequence[str], as_computed: bool) -> Bill:
        from gpuledger.analytics.billing.bill import compute_bill

        return _say(compute_bill(wh, window, self.settings, tuple(by), as_computed=as_computed))

    def bill_of(self, period: str, by: Sequence[str] = ("team",), *, as_computed: bool = False) -> Bill:
        """The whole `Bill` object (lines, detail, unallocated, fleet totals, rules, notes)."""
        return self._with(lambda wh: self._bill(wh, self.window(period), by, as_computed))

    def bill(self, period: str, by: Sequence[str] = ("team",), *, as_computed: bool = False) -> pl.DataFrame:
        """The bill's lines by `by` (team always first), as `gpuledger bill` prints them."""
        return self.bill_of(period, by, as_computed=as_computed).lines

    def idle(self, period: str, *, by: str = "owner", team: str | None = None,
             namespace: str | None = None, as_computed: bool = False) -> pl.DataFrame:
        """Idle GPU-hours and cost per workload (`by="owner"`, `"pod"` or `"label:<key>"`)."""
        from gpuledger.analytics.workloads.idle import held_allocations, idle_workloads
        from gpuledger.analytics.workloads.requested import check_workload_by, pod_workloads

        if by != "pod":
            check_workload_by(by)

        def read(wh: Warehouse) -> pl.DataFrame:
            bill = self._bill(wh, self.window(period), ("team",), as_computed)
            owners = None if by == "pod" else pod_workloads(wh, by)
            return idle_workloads(held_allocations(bill), owners, team=team, namespace=namespace)

        return self._with(read)

    def recommendations(self, period: str, *, by: str = "owner", team: str | None = None,
                        namespace: str | None = None, as_computed: bool = False) -> pl.DataFrame:
        """Right-sizing and reclaim recommendations, one per workload and kind."""
        from gpuledger.analytics.workloads.recommend import recommend
        from gpuledger.analytics.workloads.requested import filter_scope

        def read(wh: Warehouse) -> pl.DataFrame:
            window = self.window(period)
            bill = self._bill(wh, window, ("team",), as_computed)
            found = recommend(wh, window, self.settings, by=by, bill=bill)
            return filter_scope(found.recommendations, team, namespace)

        return self._with(read)

    def plans(self) -> pl.DataFrame:
        """Stored optimization plans, newest first: id, kind, status, times, summary."""
        import json

        import polars as pl

        from gpuledger.optimizer.plan.render import list_json
        from gpuledger.optimizer.plan.store import list_plans

        rows = json.loads(self._with(lambda wh: list_json(list_plans(wh))))
        schema = {"id": pl.String, "kind": pl.String, "status": pl.String, "created_at": pl.String,
                  "updated_at": pl.String, "fingerprint": pl.String, "summary": pl.String}
        return pl.DataFrame(rows, schema=schema) if rows else pl.DataFrame(schema=schema)

    def budgets(self, period: str, *, as_computed: bool = False) -> pl.DataFrame:
        """Budget status per team: used, left, forecast, threshold crossed."""
        from gpuledger.analytics.billing.budgets import budget_status

        return budget_status(self.bill_of(period, as_computed=as_computed), self.settings)

    def teams(self, period: str, *, as_computed: bool = False) -> pl.DataFrame:
        """Every team at once (the Teams page's rows; both months `as_computed` when asked)."""
        from gpuledger.analytics.billing.overview import teams_overview
        from gpuledger.analytics.workloads.recommend import recommend

        month = Period.parse(period)

        def read(wh: Warehouse) -> pl.DataFrame:
            bill = self._bill(wh, month.window, ("team",), as_computed)
            previous = self._bill(wh, month.shift(-1).window, ("team",), as_computed)
            recs = recommend(wh, month.window, self.settings, bill=bill).recommendations
            return teams_overview(bill, self.settings, previous=previous, recommendations=recs)

        return self._with(read)

    def capacity(self) -> pl.DataFrame:
        """What is free now, by cluster, pool, model and shape (`gpuledger capacity`)."""
        import polars as pl

        from gpuledger.analytics.waiting.fleet import capacity_document
        from gpuledger.dashboards.capacity_data import fleet_now

        rows = capacity_document(self._with(lambda wh: fleet_now(wh, self.settings)))["capacity"]
        schema: dict[str, pl.DataType | type[pl.DataType]] = {
            "cluster": pl.String, "pool": pl.String, "model": pl.String, "shape": pl.String,
            "ready": pl.Float64, "placeable": pl.Int64, "nodes": pl.List(pl.String)}
        return pl.DataFrame(rows, schema=schema)

    def why(self, name: str | None = None) -> pl.DataFrame:
        """Each waiting workload (or the one named): why, how long, a change that fits now
        (`gpuledger why`)."""
        import polars as pl

        from gpuledger.analytics.waiting.fleet import why_document
        from gpuledger.core.config import utcnow
        from gpuledger.dashboards.capacity_data import fleet_now

        fleet = self._with(lambda wh: fleet_now(wh, self.settings))
        rows = why_document(fleet, utcnow(), name, self.settings.sharing.mig_share_basis)["waiting"]
        return pl.DataFrame(rows, infer_schema_length=None)


def open_ledger(path: str | Path, *, config: str | Path | None = None,
                settings: Settings | None = None) -> Ledger:
    """A `Ledger` on `path`, with settings from `config` (a gpuledger YAML file) or given."""
    if settings is None:
        settings = load_settings(Path(config)) if config is not None else Settings()
    return Ledger(path, settings)
