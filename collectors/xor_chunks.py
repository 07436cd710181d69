"""Prometheus XOR (Gorilla) chunks decoded with numpy, many chunks in lockstep.

A chunk's bit stream is sequential (every field's width depends on the bits before it), so one
chunk cannot be decoded in parallel. Many chunks can: each chunk is a lane, and the decoder
advances every lane by one sample per step, each step a few dozen whole-array operations. A
chunk holds at most a few hundred samples (Prometheus cuts them at 120), so decoding N chunks
costs ~120 steps whatever N is: thousands of chunks decode at numpy speed, with no Python loop
per sample. Lanes are sorted longest first, so the lanes still running are always a prefix.

The format (prometheus/tsdb/chunkenc/xor.go): 2 bytes big-endian sample count; sample 0 as a
signed varint timestamp and the raw 64 value bits; sample 1 as an unsigned varint time delta
and an XOR-coded value; later samples as a delta-of-delta in buckets `0`, `10`+14 bits,
`110`+17, `1110`+20, `1111`+64, then the value XOR-coded: `0` same value, `10` + the bits
inside the previous leading/trailing zeros, `11` + 5 bits leading zeros + 6 bits length
(0 meaning 64) + the bits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gpuledger.core.errors import SourceError

_U = np.uint64
# Delta-of-delta bucket by the 4-bit prefix: prefix length and payload width.
_PREFIX = np.array([1] * 8 + [2] * 4 + [3] * 2 + [4, 4], dtype=np.uint64)
_WIDTH = np.array([0] * 8 + [14] * 4 + [17] * 2 + [20, 64], dtype=np.uint64)
# Two's complement of a bucket's payload: above half the range it is negative (bitRange in
# xor.go allows -(2^(w-1) - 1) .. 2^(w-1)); the 64-bit bucket is already an int64.
_HALF = np.array([2**64 - 1] * 8 + [2**13] * 4 + [2**16] * 2 + [2**19, 2**64 - 1], dtype=np.uint64)
_FULL = np.array([0] * 8 + [2**14] * 4 + [2**17] * 2 + [2**20, 0], dtype=np.int64)
_PAD = 24


@dataclass(frozen=True)
class Decoded:
    """Samples of all chunks, chunk after chunk, each chunk's in time order."""

    chunk: np.ndarray
    """Per sample: the index of its chunk in the input."""
    ts_ms: np.ndarray
    value_bits: np.ndarray
    """The raw IEEE-754 bits (uint64): stale markers are told apart by their bits."""


class _Bits:
    """Vectorised reads of up to 64 bits at any bit offset of one byte buffer."""

    def __init__(self, data: bytes) -> None:
        self.buf = np.frombuffer(data + bytes(_PAD + (-len(data) % 8)), dtype=np.uint8)
        # The buffer as aligned big-endian 64-bit words, native: one byte-swapping pass (a
        # word at every byte offset would take eight passes and eight times the memory).
        self.words = self.buf.view(">u8").astype(np.uint64)

    def window(self, pos: np.ndarray) -> np.ndarray:
        """The 64 bits starting at bit `pos` of each lane (uint64, first bit highest): the
        tail of the word `pos` falls in and the head of the next (numpy shifts a uint64 by
        64 to 0, so an offset of 0 takes nothing from the next word)."""
        word = pos >> _U(6)
        off = pos & _U(63)
        return (self.words[word] << off) | (self.words[word + _U(1)] >> (_U(64) - off))

    def read(self, pos: np.ndarray, width: np.ndarray | int) -> np.ndarray:
        """The `width` bits (0..64) at bit `pos` of each lane, as uint64."""
        return self.window(pos) >> (_U(64) - np.asarray(width, dtype=np.uint64))

    def varint(self, byte: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Unsigned LEB128 varints at byte offsets `byte`: (values, lengths in bytes)."""
        raw = self.buf[byte[:, None] + np.arange(10)].astype(np.uint64)
        more = (raw & _U(0x80)) != 0
        length = np.argmin(more, axis=1) + 1
        keep = np.arange(10)[None, :] < length[:, None]
        shifts = (np.arange(10, dtype=np.uint64) * _U(7))[None, :]
        value = np.bitwise_or.reduce(np.where(keep, (raw & _U(0x7F)) << shifts, _U(0)), axis=1)
        return value, length.astype(np.int64)


def decode(chunks: Sequence[bytes]) -> Decoded:
    """Decode XOR chunks (each with its 2-byte header); malformed input → SourceError."""
    if not chunks:
        empty = np.zeros(0, dtype=np.int64)
        return Decoded(empty, empty.copy(), np.zeros(0, dtype=np.uint64))
    sizes = np.fromiter(map(len, chunks), dtype=np.int64, count=len(chunks))
    if (sizes < 2).any():
        raise SourceError("remote read: an XOR chunk shorter than its header")
    bits = _Bits(b"".join(chunks))
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    counts = (bits.buf[starts].astype(np.int64) << 8) | bits.buf[starts + 1]
    order = np.argsort(-counts, kind="stable")  # longest first: running lanes are a prefix
    counts_sorted = counts[order]
    total = int(counts.sum())
    out_at = np.concatenate(([0], np.cumsum(counts)[:-1]))[order]
    ts_out = np.zeros(total, dtype=np.int64)
    v_out = np.zeros(total, dtype=np.uint64)
    live = int((counts_sorted > 0).sum())
    if live:
        try:
            _lockstep(bits, starts[order][:live], counts_sorted[:live], out_at[:live],
                      ts_out=ts_out, v_out=v_out)
        except IndexError:  # a lane read past the buffer: the chunk lies about its length
            raise SourceError("remote read: a malformed XOR chunk (reads past its end)") from None
    chunk_of = np.repeat(np.arange(len(chunks), dtype=np.int64), counts)
    return Decoded(chunk_of, ts_out, v_out)


def _lockstep(bits: _Bits, starts: np.ndarray, counts: np.ndarray, out_at: np.ndarray, *,
              ts_out: np.ndarray, v_out: np.ndarray) -> None:
    """Decode every lane one sample per step (lanes sorted by count, all counts > 0)."""
    zig, n0 = bits.varint(starts + 2)
    t = (zig >> _U(1)).astype(np.int64) ^ -(zig & _U(1)).astype(np.int64)
    value_byte = starts + 2 + n0
    vbits = bits.read((value_byte * 8).astype(np.uint64), 64)
    ts_out[out_at] = t
    v_out[out_at] = vbits
    lanes = int((counts > 1).sum())
    if not lanes:
        return
    t, vbits = t[:lanes].copy(), vbits[:lanes].copy()
    delta_u, n1 = bits.varint(value_byte[:lanes] + 8)
    tdelta = delta_u.astype(np.int64)
    t += tdelta
    pos = ((value_byte[:lanes] + 8 + n1) * 8).astype(np.uint64)
    leading = np.zeros(lanes, dtype=np.uint64)
    trailing = np.zeros(lanes, dtype=np.uint64)
    pos, vbits, leading, trailing = _xor_value(bits, pos, vbits, leading, trailing)
    ts_out[out_at[:lanes] + 1] = t
    v_out[out_at[:lanes] + 1] = vbits
    for i in range(2, int(counts[0])):
        n = int(np.searchsorted(-counts, -i, side="left"))  # lanes with count > i
        if n < lanes:
            lanes = n
            pos, t, tdelta, vbits = pos[:n], t[:n], tdelta[:n], vbits[:n]
            leading, trailing = leading[:n], trailing[:n]
        head = bits.window(pos)  # bucket prefix and payload together (both fit unless 64 bits)
        prefix = (head >> _U(60)).astype(np.intp)
        plen, width = _PREFIX[prefix], _WIDTH[prefix]
        raw = (head << plen) >> (_U(64) - width)
        wide = prefix == 15
        if wide.any():
            raw[wide] = bits.read(pos[wide] + _U(4), 64)
        dod = raw.astype(np.int64) - np.where(raw > _HALF[prefix], _FULL[prefix], 0)
        used = plen + width
        pos = pos + used
        tdelta = tdelta + dod
        t = t + tdelta
        # The value's header follows in `head` (a timestamp takes at most 24 of its 64 bits
        # but in the 64-bit bucket, re-read there): one window less per step.
        value_head = head << used
        if wide.any():
            value_head[wide] = bits.window(pos[wide])
        pos, vbits, leading, trailing = _xor_value(bits, pos, vbits, leading, trailing, head=value_head)
        at = out_at[:n] + i
        ts_out[at] = t
        v_out[at] = vbits


def _xor_value(bits: _Bits, pos: np.ndarray, vbits: np.ndarray, leading: np.ndarray,
               trailing: np.ndarray, *, head: np.ndarray | None = None,
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One XOR-coded value per lane (see the module docstring); `head`: at least the 13 bits
    at `pos` (read here when not given)."""
    if head is None:
        head = bits.window(pos)  # control bits and the 11-bit header of a new leading/length
    control = head >> _U(62)
    fresh = control == _U(3)
    changed = control >= _U(2)
    lead_new = (head >> _U(57)) & _U(31)
    width_new = (head >> _U(51)) & _U(63)
    width_new[width_new == 0] = 64
    leading = np.where(fresh, lead_new, leading)
    trailing = np.where(fresh, _U(64) - lead_new - width_new, trailing)
    width = _U(64) - leading - trailing
    at = pos + _U(2) + np.where(fresh, _U(11), _U(0))
    payload = bits.read(at, width)
    vbits = vbits ^ np.where(changed, payload << trailing, _U(0))
    pos = np.where(changed, at + width, pos + _U(1))
    return pos, vbits, leading, trailing
