"""`pipeline.load_and_rollup` (the demo's overlapped simulate / load / roll-up, decision 0130)
stores what `load_simulation` then `rollup` store, for the demo's fleet with its DRA pool.

Cases: over three days starting mid-day (so a roll-up day is clipped, and each day's roll-up
reads the next day's margin), every row of `card_hours_hourly` and `allocations` and of the
inventory tables (the DRA pool's objects, parsed on their own thread since decision 0136), the sample
tables' row counts and sums, and the watermarks are equal in both warehouses (floats to 1e-12:
DuckDB's parallel sums add in no fixed order, so two sequential runs differ in the last bit too); a failure in
the simulating thread reaches the caller as itself and leaves no thread behind. `each_day` (the
demo keeps each day's advice inputs, decision 0258) reads each stored day whole, in order, on a
thread of its own; its failure reaches the caller too. `load_simulation` an hour at a time
stores what it stores a day at a time. At most two days' frames are held at once (the
writer's and the next, decision 0285); DuckDB's cached blocks are handed back once a week of
days, when no roll-up and no day's task reads, and the cache is smaller after.
"""

from __future__ import annotations

import threading
import weakref
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from gpuledger import pipeline
from gpuledger.commands._demo_pipeline import demo_fleet
from gpuledger.core.config import Settings
from gpuledger.core.window import Window
from gpuledger.pipeline import load_and_rollup, load_simulation, rollup
from gpuledger.simulator.dra_fleet import DraFleet
from gpuledger.simulator.engine import Simulation
from gpuledger.warehouse import LoadBatch, Warehouse
from tests.foundation.test_cached_blocks import cached_bytes

pytestmark = pytest.mark.slow
START = datetime(2026, 10, 4, 12, tzinfo=UTC)
WINDOW = Window(START, START + timedelta(days=3))
SUMS = {"gpu_samples": "gr_engine_active", "token_samples": "prompt_tokens_total", "queue_samples": "usage"}
INVENTORY = ("gpus", "nodes", "namespaces", "pods", "mig_instances", "dra_devices", "dra_claims",
             "dra_reservations", "node_planes", "gpu_series")


def _stored(path: Path, *, series_ids: bool = True) -> dict[str, object]:
    """What the cases compare; without `series_ids`, the series' labels only (a series' id is
    the order it was first stored in, which the chunks change)."""
    with Warehouse.open(path, read_only=True) as wh:
        out: dict[str, object] = {}
        for table in ("card_hours_hourly", "allocations", *INVENTORY):
            frame = wh.query(f"SELECT * FROM {table}")
            frame = frame if series_ids else frame.drop("series_id", strict=False)
            out[table] = frame.sort(frame.columns, nulls_last=True)
        for table, column in SUMS.items():
            out[table] = wh.query(f"SELECT count(*) AS n, sum({column}) AS s FROM {table}").row(0)
        out["watermarks"] = wh.query("SELECT * FROM watermarks ORDER BY ALL").drop("updated_at", strict=False)
    return out


def test_overlapped_pipeline_stores_what_the_sequential_one_does(tmp_path: Path) -> None:
    settings = Settings()
    paths = {}
    for way in ("sequential", "overlapped"):
        sim = Simulation(demo_fleet(40), WINDOW, seed=7)
        paths[way] = tmp_path / f"{way}.duckdb"
        with Warehouse.open(paths[way]) as wh:
            if way == "sequential":
                load_simulation(wh, sim, dra=DraFleet(WINDOW))
                rollup(wh, WINDOW, settings)
            else:
                load_and_rollup(wh, sim, settings, dra=DraFleet(WINDOW))
    _assert_equal(_stored(paths["sequential"]), _stored(paths["overlapped"]))


def test_hour_chunks_store_what_day_chunks_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`load_simulation(chunk=)`: the bench builds a 10,000-GPU month an hour at a time (a day's
    frames would not fit in memory); the same rows as a day at a time, the DRA pool's too."""
    settings = Settings()
    paths, batches = {}, {}
    for chunk in (timedelta(days=1), timedelta(hours=1)):
        sim = Simulation(demo_fleet(40), WINDOW, seed=7)
        paths[chunk] = tmp_path / f"{chunk.total_seconds():.0f}.duckdb"
        with Warehouse.open(paths[chunk]) as wh:
            load, stored = wh.load, []
            monkeypatch.setattr(wh, "load", lambda batch, load=load, stored=stored: stored.append(batch) or load(batch))
            load_simulation(wh, sim, dra=DraFleet(WINDOW), chunk=chunk)
            batches[chunk] = len(stored)
            rollup(wh, WINDOW, settings)
    assert batches == {timedelta(days=1): 2 + 4, timedelta(hours=1): 2 + 72}  # the inventories, then each chunk
    _assert_equal(*(_stored(path, series_ids=False) for path in paths.values()))


def _assert_equal(before: dict[str, object], after: dict[str, object]) -> None:
    assert before.keys() == after.keys()
    for key, frame in before.items():
        if isinstance(frame, pl.DataFrame):
            assert frame.height > 0, key
            other = after[key]
            assert isinstance(other, pl.DataFrame), key
            assert_frame_equal(frame, other, check_exact=False, rel_tol=1e-12, abs_tol=1e-15)
        else:
            assert frame == pytest.approx(after[key], rel=1e-12), key


class _Boom(RuntimeError):
    pass


def test_a_simulation_error_reaches_the_writer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sim = Simulation(demo_fleet(40), WINDOW, seed=7)
    real = sim.batches

    def failing(chunk: timedelta = timedelta(days=1)):
        for n, item in enumerate(real(chunk)):
            if n == 1:
                raise _Boom("day two failed")
            yield item

    monkeypatch.setattr(sim, "batches", failing)
    with Warehouse.open(tmp_path / "w.duckdb") as wh, pytest.raises(_Boom, match="day two"):
        load_and_rollup(wh, sim, Settings())
    assert not [t for t in threading.enumerate() if t.name == "simulate"]


def _count(wh: Warehouse, day: Window) -> int:
    return int(wh.scalar("SELECT count(*) FROM gpu_sample_values WHERE ts >= ? AND ts < ?",
                         [day.start, day.end]))


def test_each_day_reads_every_stored_day_in_order_on_its_own_thread(tmp_path: Path) -> None:
    seen: list[tuple[Window, int, str]] = []

    def each_day(reader: Warehouse, day: Window) -> None:
        seen.append((day, _count(reader, day), threading.current_thread().name))

    sim = Simulation(demo_fleet(40), WINDOW, seed=7)
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        load_and_rollup(wh, sim, Settings(), each_day=each_day)
        stored = [_count(wh, day) for day, _, _ in seen]
    assert [day for day, _, _ in seen] == list(WINDOW.days())  # UTC days, the edges clipped
    assert [n for _, n, _ in seen] == stored and min(stored) > 0  # each day whole when it was read
    assert {name.split("_")[0] for _, _, name in seen} == {"demo-days"}
    assert not [t for t in threading.enumerate() if t.name.startswith("demo-days")]


def test_an_each_day_error_reaches_the_caller(tmp_path: Path) -> None:
    def each_day(reader: Warehouse, day: Window) -> None:
        if day.start > START:
            raise _Boom(f"day {day.start:%d} failed")

    with Warehouse.open(tmp_path / "w.duckdb") as wh, pytest.raises(_Boom, match="day 05"):
        load_and_rollup(wh, Simulation(demo_fleet(40), WINDOW, seed=7), Settings(), each_day=each_day)
    assert not [t for t in threading.enumerate() if t.name.startswith(("demo-days", "simulate"))]


def test_at_most_two_days_are_held_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer's day and the next (`AHEAD`): each is ~155 MB at 256 GPUs, so the demo's peak
    follows this count (decision 0285). The writer holds its first day until the second is
    made, then a second more: a third could be made meanwhile only where the producer makes
    days before the writer takes them (a bounded queue's producer makes one past its size)."""
    live: list[weakref.ref[LoadBatch]] = []
    most, first = [0], [True]
    made = {n: threading.Event() for n in (2, 3)}

    def counted(days):  # the producer's batches, the live ones counted as each is made
        for window, batch in real(days):
            live.append(weakref.ref(batch))
            most[0] = max(most[0], sum(ref() is not None for ref in live))
            if len(live) in made:
                made[len(live)].set()
            yield window, batch

    def held(batch: LoadBatch):
        if batch.window is not None and first and first.pop():  # the first day, not the inventory
            assert made[2].wait(60), "the producer made no second day"
            made[3].wait(1)
        return load(batch)

    real = pipeline.prepared_days
    monkeypatch.setattr(pipeline, "prepared_days", counted)
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        load = wh.load
        monkeypatch.setattr(wh, "load", held)
        load_simulation(wh, Simulation(demo_fleet(40), WINDOW, seed=7))
    assert len(live) == 4  # a day per chunk, the window's edges clipped
    assert most[0] == 2


def test_the_cache_is_handed_back_when_nothing_else_reads(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Every `HAND_BACK_DAYS` stored days (two here, of four), DuckDB's cached blocks are handed
    back while no roll-up is computed and no day's task runs (a statement running then would
    meet the lowered bound), and DuckDB holds fewer bytes after than before."""
    from gpuledger.analytics.usage import rollup as rollup_module

    running = {"rollup": 0, "task": 0}
    handed_back: list[tuple[int, dict[str, int], int, int]] = []  # days read, running, bytes
    lock = threading.Lock()

    def counted(name: str, call):
        def run(*args, **kwargs):
            with lock:
                running[name] += 1
            try:
                return call(*args, **kwargs)
            finally:
                with lock:
                    running[name] -= 1
        return run

    def release(wh: Warehouse) -> None:
        before = cached_bytes(wh.con)
        with lock:
            now = dict(running)
        real_release(wh)
        handed_back.append((len(days_read), now, before, cached_bytes(wh.con)))

    days_read: list[Window] = []
    real_release = Warehouse.release_cache
    monkeypatch.setattr(pipeline, "HAND_BACK_DAYS", 2)
    monkeypatch.setattr(rollup_module, "rollup_batch", counted("rollup", rollup_module.rollup_batch))
    monkeypatch.setattr(Warehouse, "release_cache", release)
    each_day = counted("task", lambda reader, day: days_read.append(day))
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        load_and_rollup(wh, Simulation(demo_fleet(40), WINDOW, seed=7), Settings(), each_day=each_day)
    assert len(days_read) == 4  # the second and fourth day's tasks come after their hand-back:
    assert [read for read, _, _, _ in handed_back] == [1, 3]
    assert all(now == {"rollup": 0, "task": 0} for _, now, _, _ in handed_back)
    assert all(after < before for _, _, before, after in handed_back)
