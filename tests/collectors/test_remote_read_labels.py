"""Remote-read label sets: interned by their encoded bytes, `__name__` left out, per answer.

The frames are written here by a small protobuf encoder of its own (field tags and varints by
hand, as prompb's remote.proto and types.proto define them), sharing nothing with
`collectors.remote_read`'s descriptor: what the reader gives back is checked against the
labels the test put in. The end-to-end check against Prometheus itself (frames equal to the
query path's) is test_bulk_read.py.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from gpuledger.collectors import remote_read


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _label(name: str, value: str) -> bytes:
    return _field(1, name.encode()) + _field(2, value.encode())


def _chunk(data: bytes) -> bytes:
    return _varint(3 << 3) + _varint(1) + _field(4, data)  # type XOR, then the bytes


def _frame(query: int, series: list[tuple[dict[str, str], list[bytes]]]) -> bytes:
    body = b""
    for labels, chunks in series:
        encoded = b"".join(_field(1, _label(n, v)) for n, v in sorted(labels.items()))
        body += _field(1, encoded + b"".join(_field(2, _chunk(c)) for c in chunks))
    body += _varint(2 << 3) + _varint(query)
    return _varint(len(body)) + b"\0\0\0\0" + body


GPU0 = {"UUID": "GPU-0", "Hostname": "n1", "pod": "p", "weird": "__name__"}
GPU1 = {"UUID": "GPU-1", "Hostname": "n1", "__name__x": "not the name"}
CHUNK = b"\x00\x00"  # a chunk of no samples: only the framing is under test here


def _answer() -> bytes:
    return (_frame(0, [({"__name__": "A", **GPU0}, [CHUNK]), ({"__name__": "A", **GPU1}, [CHUNK, CHUNK])])
            + _frame(1, [({"__name__": "B", **GPU1}, [CHUNK]), ({"__name__": "B", **GPU0}, [])]))


def test_fields_of_one_device_share_one_label_set_without_the_name() -> None:
    stream = remote_read.read_frames(_answer(), "test")
    assert stream.query == [0, 0, 1, 1]
    assert stream.labels == [GPU0, GPU1]  # first seen first; `__name__` only where it is the name
    assert stream.label_set == [0, 1, 1, 0]
    assert stream.chunk_sid == [0, 1, 1, 2]


def test_a_reader_shared_across_answers_and_threads_numbers_each_answer_from_zero() -> None:
    sets = remote_read.LabelSets()
    remote_read.read_frames(_frame(0, [({"__name__": "C", "UUID": "GPU-9"}, [CHUNK])]), "warm-up", sets)
    with ThreadPoolExecutor(4) as pool:
        streams = list(pool.map(lambda _: remote_read.read_frames(_answer(), "test", sets), range(16)))
    for stream in streams:
        assert stream.labels == [GPU0, GPU1]
        assert stream.label_set == [0, 1, 1, 0]
    assert len(sets.sets) == 3  # GPU-9, GPU0, GPU1: each decoded once
