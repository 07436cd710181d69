"""The vectorised XOR chunk decoder against an independent, bit-by-bit encoder.

The encoder below is a plain transcription of Prometheus' `xorAppender` (tsdb/chunkenc/xor.go:
`Append`, `bitRange`, `xorWrite`), written with Python integers one bit at a time, sharing no
code with `collectors.xor_chunks`. Chunks of random lengths (1..300 samples, longer than
Prometheus' 120 so lanes end at different steps), timestamps whose delta-of-delta hits every
bucket (0, 14, 17, 20 and 64 bits, both signs, and the range ends), values that repeat, change
in few or many bits, NaN, ±Inf, −0.0 and the stale marker: all decoded exactly, bit for bit.
The real Prometheus side (remote read of backfilled blocks) is covered in test_bulk_read.py.
"""

from __future__ import annotations

import random
import struct

import numpy as np
import pytest

from gpuledger.collectors.remote_read import STALE_NAN_BITS
from gpuledger.collectors.xor_chunks import decode
from gpuledger.core.errors import SourceError


class _BitWriter:
    def __init__(self) -> None:
        self.bits: list[int] = []

    def write(self, value: int, width: int) -> None:
        self.bits.extend((value >> (width - 1 - i)) & 1 for i in range(width))

    def data(self) -> bytes:
        padded = self.bits + [0] * (-len(self.bits) % 8)
        return bytes(int("".join(map(str, padded[i:i + 8])), 2) for i in range(0, len(padded), 8))


def _varint(value: int, *, signed: bool) -> list[int]:
    u = ((value << 1) ^ (value >> 63)) & (2**64 - 1) if signed else value & (2**64 - 1)
    out = []
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    return [*out, u]


def _bit_range(x: int, n: int) -> bool:
    return -((1 << (n - 1)) - 1) <= x <= 1 << (n - 1)


def encode(samples: list[tuple[int, int]]) -> bytes:
    """(timestamp ms, value bits) → one XOR chunk, as Prometheus writes it."""
    w = _BitWriter()
    w.write(len(samples), 16)
    leading, trailing, t_prev, delta_prev, v_prev = 0xFF, 0, 0, 0, 0
    for i, (t, v) in enumerate(samples):
        if i == 0:
            for byte in _varint(t, signed=True):
                w.write(byte, 8)
            w.write(v, 64)
        else:
            delta = t - t_prev
            if i == 1:
                for byte in _varint(delta, signed=False):
                    w.write(byte, 8)
            else:
                dod = delta - delta_prev
                for prefix, plen, n in ((0b10, 2, 14), (0b110, 3, 17), (0b1110, 4, 20)):
                    if dod == 0:
                        w.write(0, 1)
                        break
                    if _bit_range(dod, n):
                        w.write(prefix, plen)
                        w.write(dod & ((1 << n) - 1), n)
                        break
                else:
                    w.write(0b1111, 4)
                    w.write(dod & (2**64 - 1), 64)
            leading, trailing = _xor_write(w, v ^ v_prev, leading, trailing)
            delta_prev = delta
        t_prev, v_prev = t, v
    return w.data()


def _xor_write(w: _BitWriter, delta: int, leading: int, trailing: int) -> tuple[int, int]:
    if delta == 0:
        w.write(0, 1)
        return leading, trailing
    w.write(1, 1)
    new_leading = min(64 - delta.bit_length(), 31)
    new_trailing = (delta & -delta).bit_length() - 1
    if leading != 0xFF and new_leading >= leading and new_trailing >= trailing:
        w.write(0, 1)
        w.write(delta >> trailing, 64 - leading - trailing)
        return leading, trailing
    w.write(1, 1)
    w.write(new_leading, 5)
    sigbits = 64 - new_leading - new_trailing
    w.write(sigbits & 63, 6)
    w.write(delta >> new_trailing, sigbits)
    return new_leading, new_trailing


def _bits(x: float) -> int:
    return int(struct.unpack(">Q", struct.pack(">d", x))[0])


DODS = (0, 0, 0, 1, -1, 8191, -8191, 8192, 8193, -8192, 65536, -65535, 65537, 524288, -524287,
        524289, -524288, 10**9, -(10**9), 2**40)
SPECIAL = (float("nan"), float("inf"), float("-inf"), -0.0, 0.0)


def _series(rnd: random.Random, n: int) -> list[tuple[int, int]]:
    t, delta = rnd.randint(-(10**12), 2 * 10**12), rnd.choice((15_000, 60_000, 1))
    out, value = [], rnd.random()
    for _ in range(n):
        out.append((t, _bits(value) if value is not None else STALE_NAN_BITS))
        delta += rnd.choice(DODS)
        t += delta
        roll = rnd.random()
        if roll < 0.05:
            value = None  # a staleness marker
        elif roll < 0.1:
            value = rnd.choice(SPECIAL)
        elif roll < 0.5:
            value = (value if value is not None else 0.0) + rnd.choice((1.0, 0.5, 1e-9, 123456.789))
        elif roll < 0.7:
            value = rnd.uniform(-1e300, 1e300)
    return out


def test_decode_matches_an_independent_encoder() -> None:
    rnd = random.Random(20)
    series = [_series(rnd, rnd.choice((1, 2, 3, rnd.randint(1, 300)))) for _ in range(300)]
    decoded = decode([encode(s) for s in series])
    expected_chunk = np.repeat(np.arange(len(series)), [len(s) for s in series])
    assert np.array_equal(decoded.chunk, expected_chunk)
    assert decoded.ts_ms.tolist() == [t for s in series for t, _ in s]
    assert decoded.value_bits.tolist() == [v for s in series for _, v in s]


def test_empty_and_malformed_input() -> None:
    assert decode([]).ts_ms.size == 0
    assert decode([b"\x00\x00"]).ts_ms.size == 0  # a chunk without samples
    with pytest.raises(SourceError, match="shorter than its header"):
        decode([b"\x01"])
    with pytest.raises(SourceError, match="malformed"):
        decode([b"\xff\xff" + b"\xff" * 3])  # 65535 samples claimed in 3 bytes
