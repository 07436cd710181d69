"""A label-poor cluster is normal input: every label-valued output works and says what it lacks.

The warehouse (hand-built, 2026-11-01 00:00-12:00 UTC): node `ip-10-0-77-14.ec2.internal`
with no pool label (GPU feature discovery not running, like
`tests/fixtures/planes/label_poor/node.yaml`), three cards: GPU-a (H100) held by
`research/exp-17` all 12 hours; GPU-b (a model no source names: `unknown`) held by
`ml-prod/serve-0` for the first 6 hours, then free; GPU-c (H100) free. Neither namespace has a
team label. H100 at 2.00 per card-hour; the unknown model is unpriced (billed at zero).

Cases:
- `/metrics` answers 200 and its text parses (prometheus_client's parser, as a scraper
  would); no label value is missing; the unallocated gauge is per pool `unknown` and model,
  with the card-hours worked out here (H100 12, unknown 6), and the cost gauge puts 12 h x
  2.00 = 24.00 of H100 on `unattributed` (issue 29: a node without a pool label once made
  every scrape a 500);
- an empty warehouse (schema, no rows) also answers 200 with parseable text;
- the bill `by pool` names the pool `unknown` on every team and unallocated line; its
  unallocated table too;
- every dashboard page renders for an admin, none as an error panel; the Fleet page's
  unallocated table is per pool `unknown`; the CSV download lists pool `unknown`;
- the monthly report's FOCUS rows tag the pool `unknown` (`Tags`, `x_Pool`), never leave it
  out.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpuledger.core.access import resolve_roles
from gpuledger.core.config import Settings
from gpuledger.core.period import Period
from tests.analytics.builders import Seg, at, gpus, load, namespaces, pods, samples, window
from tests.dashboards.conftest import ADMIN, admin_headers, settings_with_roles

PERIOD = "2026-11"
NODE = "ip-10-0-77-14.ec2.internal"
PRICE = 2.00
HOURS = 12


def label_poor_settings() -> Settings:
    base = settings_with_roles()
    book = [{"model": "H100-80GB", "unit_price": PRICE, "effective_from": date(2026, 1, 1)}]
    return base.model_copy(update={"price_book": Settings.model_validate({"price_book": book}).price_book})


def build(path: Path) -> Path:
    last = at(minutes=HOURS * 60 - 1)
    segs = [
        Seg("GPU-a", at(0), at(HOURS), namespace="research", pod="exp-17", node=NODE),
        Seg("GPU-b", at(0), at(6), namespace="ml-prod", pod="serve-0", node=NODE),
        Seg("GPU-b", at(6), at(HOURS), act=0.0, fb=0.0, node=NODE),
        Seg("GPU-c", at(0), at(HOURS), act=0.0, fb=0.0, node=NODE),
    ]
    card = {"node": NODE, "pool": None, "first_seen": at(0), "last_seen": last}
    return load(path, window(HOURS), {
        "gpu_samples": samples(segs),
        "gpus": gpus(card | {"uuid": "GPU-a"}, card | {"uuid": "GPU-b", "gpu_index": 1, "model": "unknown"},
                     card | {"uuid": "GPU-c", "gpu_index": 2}),
        "namespaces": namespaces({"research": None, "ml-prod": None}),
        "pods": pods({"namespace": "research", "pod": "exp-17", "node": NODE},
                     {"namespace": "ml-prod", "pod": "serve-0", "node": NODE}),
    })


def app_on(path: Path, cache: Path) -> Any:
    from gpuledger.dashboards.app import create_app

    app = create_app(label_poor_settings(), path, background=False, cache_dir=cache)
    app.store.refresh()  # what the first page view does: take a snapshot and serve it
    app.data.serving()
    return app


@pytest.fixture(scope="module")
def poor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    folder = tmp_path_factory.mktemp("label-poor")
    app = app_on(build(folder / "w.duckdb"), folder / "cache")
    yield app
    app.close()


def scrape(app: Any) -> dict[str, list[Any]]:
    client = app.server.test_client()
    client.environ_base["REMOTE_ADDR"] = "127.0.0.1"
    answer = client.get("/metrics", headers=admin_headers())
    assert answer.status_code == 200, answer.data[:500]
    families = text_string_to_metric_families(answer.data.decode())
    out: dict[str, list[Any]] = {}
    for family in families:
        for sample in family.samples:
            assert all(isinstance(v, str) for v in sample.labels.values()), sample
            out.setdefault(sample.name, []).append(sample)
    return out


def test_metrics_of_a_label_poor_fleet(poor: Any) -> None:
    series = scrape(poor)
    unallocated = {(s.labels["pool"], s.labels["model"]): s.value
                   for s in series["gpuledger_unallocated_card_hours"] if s.labels["period"] == "current"}
    # GPU-c free 12 h (H100); GPU-b free from hour 6 to 12 (model unknown)
    assert unallocated == pytest.approx({("unknown", "H100-80GB"): 12.0, ("unknown", "unknown"): 6.0})
    cost = {(s.labels["team"], s.labels["model"]): s.value
            for s in series["gpuledger_cost"] if s.labels["period"] == "current"}
    assert cost[("unattributed", "H100-80GB")] == pytest.approx(HOURS * PRICE)
    assert cost[("unattributed", "unknown")] == 0.0  # a model nobody priced: held, billed at zero
    assert cost[("unallocated", "H100-80GB")] == pytest.approx(HOURS * PRICE)
    assert cost[("sharing_discount", "")] == 0.0  # a line without a model: the empty value


def test_metrics_of_an_empty_warehouse(tmp_path: Path) -> None:
    from gpuledger.warehouse import Warehouse

    with Warehouse.open(tmp_path / "empty.duckdb"):
        pass
    app = app_on(tmp_path / "empty.duckdb", tmp_path / "cache")
    try:
        series = scrape(app)
    finally:
        app.close()
    assert "gpuledger_snapshot_age_seconds" in series
    assert "gpuledger_unallocated_card_hours" not in series  # no card, no capacity


def test_bill_by_pool_names_the_unknown_pool(poor: Any) -> None:
    from gpuledger.analytics.billing.bill import compute_bill
    from gpuledger.warehouse import Warehouse

    with Warehouse.open(poor.store.source, read_only=True) as wh:
        bill = compute_bill(wh, Period.exact(PERIOD).window, label_poor_settings(), by=("team", "pool"))
    lines = {(r["team"], r["pool"]): r["card_hours"] for r in bill.lines.iter_rows(named=True)}
    assert lines == pytest.approx({("unattributed", "unknown"): HOURS + 6.0,
                                   ("unallocated", "unknown"): HOURS + 6.0,
                                   ("sharing_discount", None): 0.0})
    assert bill.unallocated["pool"].to_list() == ["unknown", "unknown"]
    assert bill.unattributed_namespaces == ("ml-prod", "research")


def test_every_page_renders_and_fleet_names_the_pool(poor: Any) -> None:
    from gpuledger.dashboards.callbacks import render_page
    from gpuledger.dashboards.pages import fleet
    from gpuledger.dashboards.pages.common import PageContext
    from gpuledger.dashboards.registry import PAGES
    from gpuledger.dashboards.state import ViewState

    admin = resolve_roles(ADMIN, ("platform-admins",), poor.settings.access)
    for page in PAGES:
        shown = render_page(poor, admin, {"page": page.path, "period": PERIOD})
        assert getattr(shown, "id", None) not in ("error", "refusal"), (page.path, shown)
    view = fleet.view(PageContext(admin, ViewState(period=PERIOD), poor.data, poor.settings))
    assert view.unallocated["pool"].unique().to_list() == ["unknown"]


def test_csv_download_and_focus_tags_name_the_pool(poor: Any, tmp_path: Path) -> None:
    from gpuledger.cli import main
    from gpuledger.dashboards.app import bill_csv

    admin = resolve_roles(ADMIN, ("platform-admins",), poor.settings.access)
    text, _name = bill_csv(poor, admin, {"period": PERIOD})
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows and {r["pool"] for r in rows} == {"unknown"}
    config = tmp_path / "gpuledger.yaml"
    config.write_text(json.dumps({"price_book": [
        {"model": "H100-80GB", "unit_price": PRICE, "effective_from": "2026-01-01"}]}))
    out = tmp_path / "reports"
    code = main(["--config", str(config), "--warehouse", str(poor.store.source), "report", "monthly",
                 "--period", PERIOD, "--out", str(out)])
    assert code == 0
    focus = pl.read_parquet(next(out.rglob("focus.parquet")))
    usage = focus.filter(pl.col("ChargeCategory") == "Usage")
    assert usage.height > 0 and usage["x_Pool"].unique().to_list() == ["unknown"]
    assert all(json.loads(t)["gpuledger/pool"] == "unknown" for t in usage["Tags"].to_list())
