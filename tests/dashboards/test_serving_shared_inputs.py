"""`refresh-serving` bills a month once and reads its per-allocation statistics once (issue 34):
the recommendations, the token costs and the profile-catalog advice share the bill and
`workload_usage` through `serving_results.compute`'s `bills`, and every stored result equals
the one each analysis computes alone, from its own bill (the path before the sharing)."""

from __future__ import annotations

import gc
import io
import json
import weakref
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from gpuledger.analytics.advice import KINDS
from gpuledger.analytics.advice.run import catalog_advice
from gpuledger.analytics.billing import bill as bill_module
from gpuledger.analytics.billing.bill import compute_bill
from gpuledger.analytics.workloads import requested
from gpuledger.analytics.workloads.recommend import recommend
from gpuledger.analytics.workloads.tokens import team_token_costs
from gpuledger.core.period import Period
from gpuledger.dashboards import serving_results
from gpuledger.warehouse import Warehouse
from tests.dashboards.conftest import PERIOD, settings_with_roles

SETTINGS = settings_with_roles()


def _alone(wh: Warehouse, name: str) -> Any:
    """One result as its analysis computes it by itself (each with its own bill)."""
    window = Period.exact(PERIOD).window
    if name == serving_results.RECOMMENDATIONS:
        return recommend(wh, window, SETTINGS, bill=compute_bill(wh, window, SETTINGS)).recommendations
    if name == serving_results.TOKEN_COSTS:
        return team_token_costs(wh, window, SETTINGS, bill=compute_bill(wh, window, SETTINGS),
                                generation_weight=serving_results.GENERATION_WEIGHT)
    kind = name.removeprefix("advice:")
    advice = catalog_advice(wh, window, SETTINGS) if kind == "profile-catalog" else KINDS.get(kind)(
        wh, window, SETTINGS)
    return json.loads(serving_results.advice_payload(advice))


def _close(a: Any, b: Any) -> bool:
    """Equal, floats to 1e-9 relative (DuckDB's threads add a month's floats in any order, so
    two runs of one analysis, overcommit's sums among them, move in the last bits)."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or abs(a - b) <= 1e-9 * max(abs(a), abs(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    return bool(a == b)


def _stored(name: str, payload: bytes) -> Any:
    if name in (serving_results.RECOMMENDATIONS, serving_results.TOKEN_COSTS):
        return pl.read_ipc(io.BytesIO(payload))
    return json.loads(payload)


def test_a_month_is_billed_once_and_every_result_is_as_computed_alone(
    demo_source: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    with Warehouse.open(demo_source, read_only=True) as wh:
        alone = {name: _alone(wh, name) for name in serving_results.NAMES}
        calls = {"bill": 0, "usage": 0}
        real_bill, real_usage = bill_module.compute_bill, requested.allocation_usage

        def counted_bill(*args: Any, **kwargs: Any) -> Any:
            calls["bill"] += 1
            return real_bill(*args, **kwargs)

        def counted_usage(*args: Any, **kwargs: Any) -> Any:
            calls["usage"] += 1
            return real_usage(*args, **kwargs)

        monkeypatch.setattr(bill_module, "compute_bill", counted_bill)
        monkeypatch.setattr(requested, "allocation_usage", counted_usage)
        bills: dict[str, Any] = {}
        shared = {name: _stored(name, serving_results.compute(wh, SETTINGS, name, PERIOD, bills))
                  for name in serving_results.NAMES}
    assert calls == {"bill": 1, "usage": 1}
    catalog = shared["advice:profile-catalog"]
    assert catalog["document"]["models"], "the demo month has MIG demand to build a catalog from"
    assert shared[serving_results.RECOMMENDATIONS].height > 0
    for name in serving_results.NAMES:
        if isinstance(alone[name], pl.DataFrame):
            assert shared[name].equals(alone[name]), name
        elif name == "advice:profile-catalog":  # the kind that now takes the shared inputs
            assert shared[name] == alone[name], name
        else:
            assert _close(shared[name], alone[name]), name


def test_the_bill_is_let_go_after_its_last_reader(demo_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The token costs, which read the bill alone, run before the usage exists; the bill is let
    go as the usage is made (its rules kept: they are the recommendations' stored rules,
    decision 0283); the per-minute advice kinds, which read neither, run after the usage is
    dropped too (a few hundred MB at 1,000 GPUs held for nothing); every result is computed."""
    held: dict[tuple[str, str], list[str]] = {}
    real = serving_results.compute

    def seen(wh: Warehouse, settings: Any, name: str, period: str, bills: dict[str, Any], **kw: Any) -> bytes:
        held[name, period] = sorted(bills)
        return real(wh, settings, name, period, bills, **kw)

    monkeypatch.setattr(serving_results, "compute", seen)
    with Warehouse.open(demo_copy, read_only=True) as wh:
        serving_results.refresh_serving(wh, SETTINGS)
        periods = [period for period, _ in serving_results.wanted(wh, SETTINGS)]
    readers = [n for n in serving_results.NAMES if serving_results.reads_bills(n)]
    assert readers == [serving_results.TOKEN_COSTS, serving_results.RECOMMENDATIONS, "advice:profile-catalog"]
    # the token costs first, before any usage exists; the recommendations find the bill
    begins = dict(zip(readers, ([], ["bill", "rules"], ["rules", "usage"]), strict=True))
    expected = {(n, p): begins.get(n, []) for p in periods for n in serving_results.NAMES}
    assert held == expected
    assert len(serving_results.LAST_TIMINGS) == len(expected), "every result computed"


def _refresh_every_month(demo_copy: Path) -> int:
    """Refresh the demo's serving store, every result of every month computed; how many months."""
    with Warehouse.open(demo_copy, read_only=True) as wh:
        serving_results.refresh_serving(wh, SETTINGS)
        months = len(serving_results.wanted(wh, SETTINGS))
    assert len(serving_results.LAST_TIMINGS) == months * len(serving_results.NAMES), "every result computed"
    return months


def test_nothing_holds_the_bill_while_its_usage_is_made(demo_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The usage's reads and joins run with the month's bill let go (decision 0283: at 10,000
    GPUs its 2.2 GiB of frames beside them were the refresh's peak): when the usage starts, a
    weak reference to every bill the refresh made is dead. Fails if `compute` or `month_usage`
    holds the bill across the usage (handing it to `recommend` beside the usage did)."""
    made: list[weakref.ref[Any]] = []
    alive: list[int] = []
    real_bill, real_usage = bill_module.compute_bill, requested.allocation_usage

    def bill(*args: Any, **kwargs: Any) -> Any:
        out = real_bill(*args, **kwargs)
        made.append(weakref.ref(out))
        return out

    def usage(*args: Any, **kwargs: Any) -> Any:
        gc.collect()
        alive.append(sum(ref() is not None for ref in made))
        return real_usage(*args, **kwargs)

    monkeypatch.setattr(bill_module, "compute_bill", bill)
    monkeypatch.setattr(requested, "allocation_usage", usage)
    months = _refresh_every_month(demo_copy)
    assert months >= 2 and len(made) == months and alive == [0] * months


def test_a_result_that_fails_is_one_line_in_the_log(demo_copy: Path, monkeypatch: pytest.MonkeyPatch,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    """A result that cannot be computed (DuckDB out of memory under a small bound, whose message
    goes on with a paragraph of tuning advice) is one warning line; the others are stored."""
    real = serving_results.compute

    def failing(wh: Warehouse, settings: Any, name: str, period: str, *args: Any, **kw: Any) -> bytes:
        if name == serving_results.TOKEN_COSTS:
            raise RuntimeError("Out of Memory Error: could not allocate block\n\nPossible solutions:\n* more")
        return real(wh, settings, name, period, *args, **kw)

    monkeypatch.setattr(serving_results, "compute", failing)
    with caplog.at_level("WARNING", logger=serving_results.log.name), \
            Warehouse.open(demo_copy, read_only=True) as wh:
        serving_results.refresh_serving(wh, SETTINGS)
    lines = [r.getMessage() for r in caplog.records if "not stored" in r.getMessage()]
    assert lines and all("\n" not in line and line.endswith("could not allocate block") for line in lines), lines
    assert any(key.startswith(f"{serving_results.RECOMMENDATIONS} ") for key in serving_results.LAST_TIMINGS)


def test_the_allocation_statistics_are_kept_before_the_bill_and_read_back(
        demo_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A refresh computes each month's per-allocation statistics before the month's bill exists
    (their statement holds DuckDB at its bound: beside the bill it was a 10,000-GPU refresh's
    peak, decision 0282), once: the usage finds them in the day parts and asks DuckDB nothing."""
    from gpuledger.warehouse.queries import workloads

    order: list[str] = []
    real_stats, real_bill = workloads.allocation_stats, bill_module.compute_bill

    def stats(*args: Any, **kwargs: Any) -> Any:
        order.append("statistics")
        return real_stats(*args, **kwargs)

    def bill(*args: Any, **kwargs: Any) -> Any:
        order.append("bill")
        return real_bill(*args, **kwargs)

    monkeypatch.setattr(workloads, "allocation_stats", stats)
    monkeypatch.setattr(bill_module, "compute_bill", bill)
    months = _refresh_every_month(demo_copy)
    assert months >= 2 and order == ["statistics", "bill"] * months
