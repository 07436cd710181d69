"""`warehouse.prepare` and `Warehouse.reader` (the demo's threads, decision 0136).

Cases: a batch prepared (checked and turned into Arrow) ahead of the load stores exactly what
the same batch loaded unprepared stores, duplicates dropped the same way (last wins); a bad
frame is refused by `prepare` with the error `load` gives, before anything is stored; a reader
connection sees what the writer committed, not what its open transaction holds, and refuses
to write.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from gpuledger.core.errors import InputError, WarehouseError
from gpuledger.core.window import Window
from gpuledger.warehouse import LoadBatch, Warehouse, prepare

START = datetime(2026, 10, 1, tzinfo=UTC)
WINDOW = Window(START, START + timedelta(hours=1))


def _tokens(pods: list[str], minutes: list[int], prompt: list[float]) -> pl.DataFrame:
    n = len(pods)
    return pl.DataFrame({
        "ts": [START + timedelta(minutes=m) for m in minutes], "namespace": ["ns"] * n, "pod": pods,
        "model_name": ["m"] * n, "prompt_tokens_total": prompt, "generation_tokens_total": [1.0] * n,
        "num_requests_waiting": [0.0] * n, "num_requests_running": [2.0] * n,
    })


def test_a_prepared_batch_stores_what_the_unprepared_one_does(tmp_path: Path) -> None:
    frame = _tokens(["a", "b", "a"], [0, 0, 0], [1.0, 2.0, 3.0])  # ("a", 0) twice: last wins
    stored = {}
    for way in ("plain", "prepared"):
        batch = LoadBatch({"token_samples": frame}, WINDOW, {"simulator": WINDOW.end})
        with Warehouse.open(tmp_path / f"{way}.duckdb") as wh:
            stats = wh.load(prepare(batch) if way == "prepared" else batch)
            assert stats.rows == {"token_samples": 2}
            stored[way] = wh.query("SELECT * FROM token_samples ORDER BY pod")
    assert stored["plain"]["prompt_tokens_total"].to_list() == [3.0, 2.0]
    assert_frame_equal(stored["plain"], stored["prepared"])


def test_prepare_refuses_a_bad_frame_as_load_does(tmp_path: Path) -> None:
    bad = LoadBatch({"token_samples": _tokens(["a"], [90], [1.0])}, WINDOW)  # outside the window
    with pytest.raises(InputError, match="outside the load window"):
        prepare(bad)
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        with pytest.raises(InputError, match="outside the load window"):
            wh.load(bad)
        assert wh.count("token_samples") == 0


def test_a_reader_sees_committed_rows_only_and_cannot_write(tmp_path: Path) -> None:
    with Warehouse.open(tmp_path / "w.duckdb") as wh, wh.reader() as reader:
        wh.load(LoadBatch({"token_samples": _tokens(["a"], [0], [1.0])}, WINDOW))
        with wh.transaction():
            wh.con.execute("DELETE FROM token_samples")
            assert wh.count("token_samples") == 0
            assert reader.count("token_samples") == 1  # the writer's open transaction is not seen
        assert reader.count("token_samples") == 0
        with pytest.raises(WarehouseError, match="read-only"):
            reader.load(LoadBatch({"token_samples": _tokens(["b"], [0], [1.0])}, WINDOW))
