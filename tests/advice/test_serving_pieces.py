"""The serving minutes kept as one piece per autoscaling pass (`DayParts.pieces`, decision
0287): each piece is what `cut` gives for the day's query; a part kept for another number of
passes is cut again from its own pieces, not queried; a part cut short is read again; a write
that fails still hands out the pieces; and a month in passes decodes each kept piece in its own
pass only."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from gpuledger.analytics.advice import autoscaling_month
from gpuledger.analytics.advice.autoscaling_month import cut
from gpuledger.analytics.advice.run import autoscaling_proposals, serving_pieces
from gpuledger.core.config import Settings
from gpuledger.core.rules import SamplingRules
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.day_parts import DayParts, day_parts_path
from gpuledger.warehouse.pieces import Pieces
from gpuledger.warehouse.queries import advice as queries
from tests.advice.test_day_parts import DAY_ONE, DAY_TWO, WINDOW

ACTIVITY = SamplingRules.of(Settings()).activity


@pytest.fixture
def copy(serving_fleet: Path, tmp_path: Path) -> Path:
    return Path(shutil.copyfile(serving_fleet, tmp_path / "wh.duckdb"))


def _one_piece(frame: pl.DataFrame, count: int | None) -> list[pl.DataFrame]:
    return cut(frame, count or 1)


def _part(copy: Path) -> Path:
    [part] = day_parts_path(copy).glob(f"serving_minutes*/{DAY_TWO.start.date().isoformat()}.daypart")
    return part


def _expected(wh: Warehouse, count: int) -> list[pl.DataFrame]:
    return cut(queries.serving_minutes(wh, DAY_TWO.start, DAY_TWO.end, ACTIVITY), count)


def _equal(pieces: Pieces | None, expected: list[pl.DataFrame]) -> bool:
    assert pieces is not None
    return pieces.count == len(expected) and all(
        pieces.take(i).equals(frame) for i, frame in enumerate(expected))


def test_a_day_kept_for_other_passes_is_cut_again_not_queried(copy: Path) -> None:
    with Warehouse.open(copy, read_only=True) as wh, DayParts(day_parts_path(copy)) as days:
        keep = serving_pieces(days, wh, ACTIVITY)
        assert _equal(keep(DAY_TWO, None, _one_piece), _expected(wh, 1))
        assert (days.reads, days.hits) == (1, 0)
        assert _equal(keep(DAY_TWO, None, _one_piece), _expected(wh, 1))  # any count kept will do
        three = keep(DAY_TWO, 3, _one_piece)
        assert (days.reads, days.hits) == (1, 2), "cut again from the kept pieces"
        assert _equal(three, _expected(wh, 3))
        assert all(not piece.is_empty() for piece in _expected(wh, 3)), "each pass has minutes"
    with Warehouse.open(copy, read_only=True) as wh, DayParts(day_parts_path(copy)) as days:
        assert _equal(serving_pieces(days, wh, ACTIVITY)(DAY_TWO, 3, _one_piece), _expected(wh, 3))
        assert (days.reads, days.hits) == (0, 1), "kept as three pieces"


def test_a_pieces_part_cut_short_is_read_again(copy: Path) -> None:
    with Warehouse.open(copy, read_only=True) as wh, DayParts(day_parts_path(copy)) as days:
        serving_pieces(days, wh, ACTIVITY)(DAY_TWO, 3, _one_piece)
    part = _part(copy)
    part.write_bytes(part.read_bytes()[:-7])
    with Warehouse.open(copy, read_only=True) as wh, DayParts(day_parts_path(copy)) as days:
        assert _equal(serving_pieces(days, wh, ACTIVITY)(DAY_TWO, 3, _one_piece), _expected(wh, 3))
        assert (days.reads, days.hits, days.failure) == (1, 0, None)


def test_a_write_that_fails_still_hands_out_the_pieces(copy: Path) -> None:
    with Warehouse.open(copy, read_only=True) as wh, DayParts(day_parts_path(copy)) as days:
        serving_pieces(days, wh, ACTIVITY)(DAY_TWO, 3, _one_piece)
    part = _part(copy)
    part.unlink()
    part.with_name(part.name + ".tmp").mkdir()  # where the part is written: a folder
    with Warehouse.open(copy, read_only=True) as wh, DayParts(day_parts_path(copy)) as days:
        assert _equal(serving_pieces(days, wh, ACTIVITY)(DAY_TWO, 3, _one_piece), _expected(wh, 3))
        assert days.failure is not None and not part.exists()


def test_a_month_in_passes_decodes_each_kept_piece_in_its_own_pass(
        copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Warehouse.open(copy, read_only=True) as wh:
        one = autoscaling_proposals(wh, WINDOW, Settings())
        first = queries.serving_minutes(wh, DAY_ONE.start, DAY_ONE.end, ACTIVITY)  # its second half
    budget = first.select(autoscaling_month.REPLAY_COLUMNS).estimated_size() * len(list(WINDOW.days()))
    monkeypatch.setattr(autoscaling_month, "REPLAY_BUDGET", budget // 3 + 1)  # three passes
    with Warehouse.open(copy, read_only=True) as wh, DayParts(day_parts_path(copy)) as days:
        assert autoscaling_proposals(wh, WINDOW, Settings(), days=days) == one
    taken: Counter[int] = Counter()
    take = Pieces.take
    monkeypatch.setattr(Pieces, "take", lambda self, piece: taken.update([piece]) or take(self, piece))
    with Warehouse.open(copy, read_only=True) as wh, DayParts(day_parts_path(copy)) as days:
        assert autoscaling_proposals(wh, WINDOW, Settings(), days=days) == one
        assert (days.reads, days.hits) == (0, 2)
    # the first day is decoded whole to size the passes; then each pass takes its own piece of
    # each day: three pieces a day, each taken once by its pass (and day one's once more)
    assert taken == Counter({0: 3, 1: 3, 2: 3})
