"""Frames kept as pieces of one payload (`warehouse.pieces`, decision 0287): each piece reads
back alone as it was written, an empty one with its schema, and a payload whose index does not
fill it exactly is refused before any piece is trusted."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from gpuledger.warehouse.pieces import COUNT, DamagedPieces, Pieces, encoded


def _frames() -> list[pl.DataFrame]:
    frame = pl.DataFrame({
        "deployment": ["a", "a", "b", "c"], "ts": [datetime(2026, 11, 1, minute=m, tzinfo=UTC) for m in range(4)],
        "replicas": [1, 2, None, 3],
    }).with_columns(pl.col("deployment").cast(pl.Categorical))
    return [frame.head(2), frame.clear(), frame.tail(2)]


@pytest.mark.parametrize("compression", ["zstd", "lz4"])
def test_each_piece_reads_back_alone_as_written(compression: str) -> None:
    frames = _frames()
    pieces = Pieces.of(encoded(frames, compression))  # type: ignore[arg-type]
    assert pieces.count == 3
    for piece in (2, 0, 1):  # in any order
        assert pieces.take(piece).equals(frames[piece])
    assert pieces.take(1).schema == frames[0].schema, "an empty piece keeps its columns"
    assert pieces.whole().equals(pl.concat(frames))


def test_pieces_at_an_offset_of_a_file(tmp_path: Path) -> None:
    frames = _frames()
    payload = encoded(frames, "zstd")
    path = tmp_path / "kept"
    path.write_bytes(b"a head of 17 bytes" + payload + b"what follows")
    pieces = Pieces.read(path, 18, len(payload))
    assert pieces.take(2).equals(frames[2])


@pytest.mark.parametrize(("damage", "why"), [
    (lambda p: p[:-1], "cut short"),
    (lambda p: p + b"\0", "a byte too many"),
    (lambda p: p[:2], "no count"),
    (lambda p: COUNT.pack(0), "no pieces"),
    (lambda p: COUNT.pack(2**31) + p[COUNT.size:], "an index longer than the payload"),
    (lambda p: b"not pieces at all, only text", "not pieces"),
])
def test_a_payload_whose_index_does_not_fill_it_is_refused(damage: object, why: str) -> None:
    payload = damage(encoded(_frames(), "zstd"))  # type: ignore[operator]
    with pytest.raises(DamagedPieces):
        Pieces.read(io.BytesIO(payload), 0, len(payload))
