"""The simulator's frames load into a real warehouse, idempotently.

Cases: loading inventory and two days of samples into a DuckDB file stores exactly the rows
the frames hold; loading the same simulation again changes no count and no sum (time-series
loads own their window, dimensions replace by key, intervals merge); the stored pods and MIG
instances keep their intervals.
"""

from __future__ import annotations

from datetime import timedelta

from gpuledger.simulator.engine import Simulation
from gpuledger.warehouse import LoadBatch, Warehouse


def load_into_warehouse(wh: Warehouse, sim: Simulation, chunk: timedelta) -> dict[str, int]:
    totals: dict[str, int] = {}
    for stats in [wh.load(LoadBatch(sim.inventory())),
                  *(wh.load(LoadBatch(frames, window=w, watermarks={"simulate": w.end}))
                    for w, frames in sim.batches(chunk))]:
        for table, rows in stats.rows.items():
            totals[table] = totals.get(table, 0) + rows
    return totals


def _fingerprint(wh: Warehouse) -> dict[str, object]:
    tables = ("gpu_samples", "token_samples", "queue_samples", "gpus", "nodes", "namespaces", "pods",
              "mig_instances", "queues", "pod_priorities", "preemptions", "vgpu_allocations")
    out: dict[str, object] = {t: wh.count(t) for t in tables}
    out["gr"] = round(wh.scalar("SELECT sum(gr_engine_active) FROM gpu_samples"), 6)
    out["tokens"] = wh.scalar("SELECT sum(prompt_tokens_total) FROM token_samples")
    out["pod_span"] = wh.scalar("SELECT sum(epoch(end_ts) - epoch(start_ts)) FROM pods")
    return out


def test_load_twice_is_idempotent(tmp_path, tiny_sim, tiny_samples, tiny_inventory):
    path = tmp_path / "wh.duckdb"
    with Warehouse.open(path) as wh:
        totals = load_into_warehouse(wh, tiny_sim, chunk=timedelta(days=1))
        first = _fingerprint(wh)
    for table, frame in tiny_samples.items():
        assert first[table] == totals[table] == frame.height
    for table, frame in tiny_inventory.items():
        assert first[table] == frame.height
    expected_span = sum((e - s).total_seconds() for s, e in tiny_inventory["pods"].select("start_ts", "end_ts").iter_rows())
    assert first["pod_span"] == expected_span
    with Warehouse.open(path) as wh:
        load_into_warehouse(wh, tiny_sim, chunk=timedelta(hours=12))
        assert _fingerprint(wh) == first
        assert wh.watermark("simulate") == tiny_sim.window.end
