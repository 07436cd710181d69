"""The month results' basis knows the warehouse it was computed on (0256).

`gpuledger demo` run again into its folder makes a new warehouse at the same path; the serving
store beside it keeps the results the old one computed. With a basis of only the month's newest
hour and the settings, a new fleet over the same month kept the old fleet's recommendations and
advice. Cases, on a small simulated fleet loaded twice at one path (the second time with other
GPUs), the serving store kept between them:
- the basis is the same on every read of one warehouse, and differs for the warehouse made again
  (same months, same settings);
- after a refresh on the new warehouse every stored result equals what the new warehouse
  computes, not the old one's (the recommendations differ between the two fleets).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from gpuledger.core.config import Settings
from gpuledger.core.window import Window
from gpuledger.dashboards import serving_results
from gpuledger.warehouse import LoadBatch, Warehouse
from gpuledger.warehouse.serving_store import open_serving

SETTINGS = Settings()
PERIOD = "2024-11"


def _load(path: Path, gpus: int) -> None:
    from gpuledger.simulator.engine import Simulation
    from gpuledger.simulator.fleet import FleetSpec

    for stale in (path, Path(f"{path}.wal")):
        stale.unlink(missing_ok=True)
    window = Window(datetime(2024, 11, 3, tzinfo=UTC), datetime(2024, 11, 4, tzinfo=UTC), timedelta(minutes=5))
    sim = Simulation(FleetSpec.default(gpus=gpus), window, seed=5)
    with Warehouse.open(path) as wh:
        wh.load(LoadBatch(sim.inventory()))
        for sub, frames in sim.batches(timedelta(days=1)):
            wh.load(LoadBatch(frames, window=sub))


def _stored(path: Path) -> dict[str, bytes]:
    serving = open_serving(path)
    try:
        rows = serving.con.execute("SELECT name, payload FROM serving_results WHERE period = ?",
                                   [PERIOD]).fetchall()
    finally:
        serving.close()
    return {str(name): bytes(payload) for name, payload in rows}


def test_a_warehouse_made_again_does_not_keep_the_old_results(tmp_path: Path) -> None:
    path = tmp_path / "gpuledger.duckdb"
    _load(path, 48)
    with Warehouse.open(path, read_only=True) as wh:
        first = serving_results.wanted(wh, SETTINGS)
        assert serving_results.wanted(wh, SETTINGS) == first
        serving_results.refresh_serving(wh, SETTINGS)
    old = _stored(path)
    _load(path, 64)
    with Warehouse.open(path, read_only=True) as wh:
        again = serving_results.wanted(wh, SETTINGS)
        serving_results.refresh_serving(wh, SETTINGS)
        fresh = {name: serving_results.compute(wh, SETTINGS, name, PERIOD) for name in serving_results.NAMES}
    assert [period for period, _ in again] == [period for period, _ in first] == [PERIOD]
    assert again != first
    stored = _stored(path)
    assert stored[serving_results.RECOMMENDATIONS] == fresh[serving_results.RECOMMENDATIONS]
    assert stored[serving_results.RECOMMENDATIONS] != old[serving_results.RECOMMENDATIONS]
    assert set(stored) == set(serving_results.NAMES)
