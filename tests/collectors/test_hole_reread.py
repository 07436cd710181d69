"""A transient empty answer loses no sample (issue 31 item 6): holes are read again.

The fleet (3 hours at 60 s, real Prometheus, promtool backfill) has two whole H100s on one
node: GPU-g0 held by team-a throughout; GPU-g1 held by team-b for minutes 0..69 and by team-c
from minute 70. The engine is reached through `hostile.HostileProxy`, which answers every
range query empty while told to.

Cases:
- collect hour 1; then 15 minutes during which the engine answers empty (a gap: the
  watermark moves past it); then the next normal collect, within the retry horizon: it reads
  the hole again and the bill equals the uninterrupted collect's and the fleet's truth, to the
  cent (card-hours x the price book's 3.00, computed here);
- the same hole found only after the horizon: a normal collect leaves it (and `status` says
  it is closed by the horizon); a collect with `--start` below it reads it again;
- an engine still empty at the re-read: nothing loaded, the hole still open, said in the report.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gpuledger.analytics.billing.bill import compute_bill
from gpuledger.cli import main
from gpuledger.collect_gaps import hole_status
from gpuledger.collect_pipeline import CollectReport, collect_window, resume_point
from gpuledger.collect_rollup import RollupPlan
from gpuledger.core.config import Settings
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse
from tests.collectors.conftest import tiny_settings
from tests.collectors.hostile import Fault, HostileProxy
from tools.metrics_servers import ServerPool

pytestmark = pytest.mark.prometheus

T0 = datetime(2026, 5, 4, tzinfo=UTC)
MINUTES = 180
END = T0 + timedelta(minutes=MINUTES)
HOLE = (T0 + timedelta(minutes=60), T0 + timedelta(minutes=75))
PRICE = 3.00  # H100-80GB in the default price book (core.config)
MINUTE = timedelta(minutes=1)


def _holder(gpu: str, minute: int) -> tuple[str, str]:
    if gpu == "GPU-g0":
        return ("team-a", "a-1")
    return ("team-b", "b-1") if minute < 70 else ("team-c", "c-1")


def _write(path: Path) -> Path:
    lines = ["# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge"]
    for gpu, index in (("GPU-g0", 0), ("GPU-g1", 1)):
        for minute in range(MINUTES):
            ns, pod = _holder(gpu, minute)
            labels = (f'gpu="{index}",UUID="{gpu}",modelName="NVIDIA H100 80GB HBM3",Hostname="node-g",'
                      f'namespace="{ns}",pod="{pod}",container="main"')
            t = int((T0 + minute * MINUTE).timestamp())
            lines.append(f"DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{labels}}} 0.5 {t}")
    lines.append("# TYPE kube_namespace_labels gauge")
    for ns in ("team-a", "team-b", "team-c"):
        lines += [f'kube_namespace_labels{{namespace="{ns}"}} 1 {int((T0 + m * MINUTE).timestamp())}'
                  for m in range(0, MINUTES, 5)]
    path.write_text("\n".join([*lines, "# EOF"]) + "\n")
    return path


@pytest.fixture(scope="module")
def proxy(metrics_servers: ServerPool, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostileProxy]:
    server = metrics_servers.prometheus(_write(tmp_path_factory.mktemp("holes") / "holes.om"))
    front = HostileProxy(server.url)
    yield front
    front.close()


def _settings() -> Settings:
    return tiny_settings(chunk="1h", step="60s", read_path="query_range")


def _collect(wh: Warehouse, url: str, start: datetime, end: datetime, now: datetime) -> CollectReport:
    return collect_window(wh, _settings(), url, Window(start, end), now=lambda: now, rollup=RollupPlan(),
                          require_series=False)


def _costs(wh: Warehouse) -> dict[str, float]:
    bill = compute_bill(wh, Window(T0, END), _settings(), ("team",))
    return {row["team"]: round(row["cost"], 2) for row in bill.lines.to_dicts()}


def _truth() -> dict[str, float]:
    minutes = {"a": MINUTES, "b": 70, "c": MINUTES - 70}  # teams by the fallback `team-(.*)`
    return {**{team: round(n / 60 * PRICE, 2) for team, n in minutes.items()}, "sharing_discount": 0.0}


def _with_hole(wh: Warehouse, proxy: HostileProxy) -> None:
    """Hour 1 read normally, then 15 minutes answered empty (a gap the watermark moves past)."""
    _collect(wh, proxy.url, T0, HOLE[0], HOLE[0] + 5 * MINUTE)
    proxy.fault = Fault("empty")
    try:
        report = _collect(wh, proxy.url, HOLE[0], HOLE[1], HOLE[1] + 5 * MINUTE)
    finally:
        proxy.fault = Fault()
    assert report.quality is not None and report.quality.gaps  # the engine answered empty
    assert resume_point(wh) == HOLE[1]
    assert wh.scalar("SELECT count(*) FROM gpu_samples WHERE ts >= ? AND ts < ?", list(HOLE)) == 0


def test_next_collect_within_the_horizon_recovers_every_sample(proxy: HostileProxy, tmp_path: Path) -> None:
    with Warehouse.open(tmp_path / "whole.duckdb") as whole:
        _collect(whole, proxy.url, T0, END, END + 5 * MINUTE)
        uninterrupted = _costs(whole)
    with Warehouse.open(tmp_path / "holed.duckdb") as wh:
        _with_hole(wh, proxy)
        report = _collect(wh, proxy.url, HOLE[1], END, END + 5 * MINUTE)
        assert [(w.start, w.end, n) for w, n in report.holes] == [(*HOLE, 2 * 15)]
        assert wh.count("gpu_samples") == 2 * MINUTES
        assert _costs(wh) == uninterrupted == _truth()


def test_hole_past_the_horizon_is_closed_and_start_below_it_reads_it(
        proxy: HostileProxy, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    late = END + timedelta(hours=12)  # past the 6 h default horizon
    with Warehouse.open(tmp_path / "late.duckdb") as wh:
        _with_hole(wh, proxy)
        report = _collect(wh, proxy.url, HOLE[1], END, late)
        assert report.holes == []
        closed = hole_status(wh, _settings(), resume_point(wh), late, step=MINUTE, look_back=timedelta(days=7))
        assert [(h.start, h.end, h.open) for h in closed] == [(*HOLE, False)]
        assert _costs(wh) != _truth()  # the hole is still missing: the bill shows it
        wh.close()
        capsys.readouterr()
        assert main(["--warehouse", str(tmp_path / "late.duckdb"), "status"]) == 0
        shown = [line.split() for line in capsys.readouterr().out.splitlines() if "gap_retry_horizon" in line]
        assert [words[:2] for words in shown] == [["2026-05-04T01:00:00Z", "2026-05-04T01:15:00Z"]]
        assert "closed" in shown[0], shown
    with Warehouse.open(tmp_path / "late.duckdb") as wh:
        report = _collect(wh, proxy.url, T0, END, late)  # an explicit --start below the hole
        assert [(w.start, w.end, n) for w, n in report.holes] == [(*HOLE, 2 * 15)]
        assert _costs(wh) == _truth()
        assert hole_status(wh, _settings(), resume_point(wh), late, step=MINUTE,
                           look_back=timedelta(days=7)) == []


def test_engine_still_empty_leaves_the_hole_open(proxy: HostileProxy, tmp_path: Path) -> None:
    with Warehouse.open(tmp_path / "still.duckdb") as wh:
        _with_hole(wh, proxy)
        proxy.fault = Fault("empty")
        try:
            report = _collect(wh, proxy.url, HOLE[1], HOLE[1] + 5 * MINUTE, HOLE[1] + 10 * MINUTE)
        finally:
            proxy.fault = Fault()
        assert [(w.start, w.end, n) for w, n in report.holes] == [(*HOLE, 0)]  # read, still empty
        grown = (HOLE[0], HOLE[1] + 5 * MINUTE)  # with the 5 empty minutes this run collected
        assert any("still empty" in line for line in report.lines())
        now = HOLE[1] + 10 * MINUTE
        status = hole_status(wh, _settings(), resume_point(wh), now, step=MINUTE, look_back=timedelta(days=1))
        assert [(h.start, h.end, h.open) for h in status] == [(*grown, True)]
