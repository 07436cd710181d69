"""Property: whatever a hostile engine answers, `collect` says one clear line in bounded time
and memory, and once the engine answers again no sample is lost (issue 31, "Done when").

Hypothesis draws a run of 1 to 3 faults (`hostile.Fault`: empty, cut off, trickled body or headers, huge,
malformed `values`), each served by a real local HTTP server in front of a real Prometheus
(`hostile.HostileProxy`) for the next 15 minutes of the fleet of `test_hole_reread`, each
collected by the CLI. Then the engine answers again and one collect with `--start` at the
first hour (below the watermark, as the CronJob's lookback does) must leave the warehouse
with every sample and the bill of the fleet's truth, to the cent.

Asserted per faulty run: exit 0 (an empty answer is a gap, not an error) or one stderr line
`gpuledger: error: ...` naming the query or the setting that refused it, no traceback; the
run ends within `deadline_s` plus slack; Python's peak allocation during it (tracemalloc) stays
within twice the answer cap plus the run's working set, so a huge answer was refused while
streaming, not buffered (the process' RSS is measured by `test_request_limits`).
"""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuledger.cli import main
from gpuledger.warehouse import Warehouse
from tests.collectors import test_hole_reread as fleet
from tests.collectors.hostile import Fault, HostileProxy
from tools.metrics_servers import ServerPool

pytestmark = pytest.mark.prometheus

DEADLINE_S = 2
CAP_MB = 4
WORKING_SET_MB = 40
STEP = timedelta(minutes=15)
CONFIG = f"""\
teams:
  fallback:
    - {{namespace_regex: "team-(.*)", team: "\\\\1"}}
prometheus:
  chunk: 1h
  step: 60s
  read_path: query_range
  retries: 0
  timeout_s: 10
  deadline_s: {DEADLINE_S}
  max_response_mb: {CAP_MB}
"""

BAD_VALUES = st.sampled_from(['"x"', '[["a"]]', "[[1]]", '[[1,"1","2"]]', '[[null,"1"]]', "{}",
                              '[[1,{"a":1}]]', '[["1e400","1"]]', "[1,2]", '"'])
FAULTS = st.one_of(
    st.just(Fault("empty")),
    st.builds(Fault, st.just("partial"), st.integers(min_value=1, max_value=400)),
    st.just(Fault("trickle")),
    st.just(Fault("trickle_headers")),
    st.builds(Fault, st.just("huge"), st.integers(min_value=CAP_MB * 1_000_000 + 1, max_value=12_000_000)),
    st.builds(Fault, st.just("values"), st.just(0), BAD_VALUES),
)


@pytest.fixture(scope="module")
def proxy(metrics_servers: ServerPool, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostileProxy]:
    server = metrics_servers.prometheus(fleet._write(tmp_path_factory.mktemp("hostile") / "fleet.om"))
    front = HostileProxy(server.url)
    _warm_refusal_path(front, tmp_path_factory.mktemp("warm"))
    yield front
    front.close()


def _warm_refusal_path(proxy: HostileProxy, folder: Path) -> None:
    """One refused (huge) answer, untraced, before any example: the modules and caches the
    refusal path loads on its first use are this process's, not a run's working set, so the
    traced peak measures the answer's handling alone, whatever ran in this process before."""
    (folder / "gpuledger.yaml").write_text(CONFIG)
    warehouse = folder / "w.duckdb"
    _collect(folder / "gpuledger.yaml", warehouse, proxy.url, fleet.T0.isoformat(), fleet.HOLE[0].isoformat())
    proxy.fault = Fault("huge", CAP_MB * 1_000_000 + 1)
    try:
        _collect(folder / "gpuledger.yaml", warehouse, proxy.url, fleet.HOLE[0].isoformat(),
                 (fleet.HOLE[0] + STEP).isoformat())
    finally:
        proxy.fault = Fault()


def _collect(config: Path, warehouse: Path, url: str, start: object, end: object) -> int:
    return main(["--config", str(config), "--warehouse", str(warehouse), "collect", "-q",
                 "--prometheus", url, "--start", str(start), "--end", str(end)])


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(faults=st.lists(FAULTS, min_size=1, max_size=3))
def test_hostile_answers(proxy: HostileProxy, tmp_path_factory: pytest.TempPathFactory,
                         capsys: pytest.CaptureFixture[str], faults: list[Fault]) -> None:
    folder = tmp_path_factory.mktemp("run")
    config = folder / "gpuledger.yaml"
    config.write_text(CONFIG)
    warehouse = folder / "w.duckdb"
    at = fleet.HOLE[0]
    assert _collect(config, warehouse, proxy.url, fleet.T0.isoformat(), at.isoformat()) == 0
    for fault in faults:
        capsys.readouterr()
        proxy.fault = fault
        started = time.monotonic()
        tracemalloc.start()
        try:
            code = _collect(config, warehouse, proxy.url, at.isoformat(), (at + STEP).isoformat())
        finally:
            proxy.fault = Fault()
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        elapsed = time.monotonic() - started
        # Python's allocations at their peak: the cap's pieces and their join, plus the run's
        # own working set (measured 24-29 MB in full-suite runs, whatever ran before in the
        # process); a buffered 12 MB answer (its bytes and its text, 24 MB more) would show.
        assert peak < 2 * CAP_MB * 1_000_000 + WORKING_SET_MB * 1_000_000, (fault, peak)
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if line.strip()]
        assert elapsed < DEADLINE_S + 20, (fault, elapsed)
        assert "Traceback" not in err, err
        if code == 0:
            assert fault.kind == "empty", (fault, err)
            at += STEP  # a gap: the watermark moved past it
            continue
        assert len(lines) == 1 and lines[0].startswith("gpuledger: error: "), (fault, err)
        assert "query" in lines[0] or "prometheus." in lines[0], (fault, lines[0])
        if fault.kind == "huge":
            assert f"prometheus.max_response_mb = {CAP_MB} MB" in lines[0], lines[0]
        if fault.kind in ("trickle", "trickle_headers"):
            assert f"prometheus.deadline_s = {DEADLINE_S}s" in lines[0], lines[0]
    # The engine answers again: the CronJob-like collect from below the watermark loses nothing.
    assert _collect(config, warehouse, proxy.url, fleet.T0.isoformat(), fleet.END.isoformat()) == 0
    with Warehouse.open(warehouse) as wh:
        assert wh.count("gpu_samples") == 2 * fleet.MINUTES
        assert fleet._costs(wh) == fleet._truth()
