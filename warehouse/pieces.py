"""Frames kept as the pieces of one payload, each read back alone.

Why (issue 34, docs/decisions/0287): the autoscaling replay reads a month of serving minutes in
passes, a group of Deployments each (`analytics.advice.autoscaling_month`), and each pass wants
only its group's minutes of every day. Kept as one frame a day, a pass had to decode the whole
day, or the first pass had to split every day and set the other groups aside again on every
refresh (about 9 CPU-s of a 10,000-GPU increment). Kept as one piece per pass, cut once when the
day is read, a pass decodes its own piece and nothing else.

A payload is the pieces' count (`<I`), each piece's size in bytes (`<Q`), then the pieces, each
a frame as Arrow IPC (an empty one too: its schema). The index is checked against the
payload's length before any piece is trusted (`DamagedPieces`).
"""

from __future__ import annotations

import io
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

import polars as pl

COUNT = struct.Struct("<I")
SIZE = struct.Struct("<Q")
Compression = Literal["zstd", "lz4"]


class DamagedPieces(ValueError):
    """A payload whose index does not fill it exactly (cut short, or not pieces at all)."""


def encoded(frames: Sequence[pl.DataFrame], compression: Compression) -> bytes:
    """`frames` as one payload of pieces (`Pieces` reads them back)."""
    bodies = []
    for frame in frames:
        buffer = io.BytesIO()
        frame.write_ipc(buffer, compression=compression)
        bodies.append(buffer.getvalue())
    return b"".join([COUNT.pack(len(bodies)), *(SIZE.pack(len(body)) for body in bodies), *bodies])


@dataclass(frozen=True)
class Pieces:
    """The pieces of a payload at `offset` in `source` (a file by its path, opened per piece,
    or an open file or buffer the caller keeps open): `at` holds each piece's place and size."""

    source: Path | IO[bytes]
    at: tuple[tuple[int, int], ...]

    @classmethod
    def read(cls, source: Path | IO[bytes], offset: int, size: int) -> Pieces:
        """The pieces of the `size`-byte payload at `offset` in `source`, from its index
        (`DamagedPieces` when the index and the payload disagree)."""
        head = _bytes(source, offset, min(size, COUNT.size))
        if len(head) < COUNT.size:
            raise DamagedPieces("no count of pieces")
        (count,) = COUNT.unpack(head)
        if count == 0:
            raise DamagedPieces("no pieces")
        index = COUNT.size + count * SIZE.size
        if index > size:
            raise DamagedPieces(f"an index of {count} pieces in a {size}-byte payload")
        sizes = [s for (s,) in SIZE.iter_unpack(_bytes(source, offset + COUNT.size, index - COUNT.size))]
        if COUNT.size + len(sizes) * SIZE.size + sum(sizes) != size:
            raise DamagedPieces(f"{count} pieces of {sum(sizes)} bytes in a {size}-byte payload")
        at, place = [], offset + index
        for piece in sizes:
            at.append((place, piece))
            place += piece
        return cls(source, tuple(at))

    @classmethod
    def of(cls, payload: bytes) -> Pieces:
        """The pieces of a payload held in memory."""
        return cls.read(io.BytesIO(payload), 0, len(payload))

    @property
    def count(self) -> int:
        return len(self.at)

    def take(self, piece: int) -> pl.DataFrame:
        """Piece `piece`'s frame."""
        place, size = self.at[piece]
        return pl.read_ipc(io.BytesIO(_bytes(self.source, place, size)))

    def whole(self) -> pl.DataFrame:
        """Every piece's rows as one frame, in the pieces' order."""
        return pl.concat([self.take(piece) for piece in range(self.count)], how="vertical_relaxed")


def _bytes(source: Path | IO[bytes], offset: int, size: int) -> bytes:
    """`size` bytes at `offset` of `source` (fewer where it ends first)."""
    if isinstance(source, Path):
        with source.open("rb") as file:
            file.seek(offset)
            return file.read(size)
    source.seek(offset)
    return source.read(size)
