"""Prometheus remote read (`/api/v1/read`) with streamed XOR chunks: raw samples, no PromQL.

Why: a range query makes Prometheus decode every chunk, evaluate `last_over_time` at every
instant and print JSON; a streamed remote read sends the stored chunks as they are (the
engine's cheapest answer), and `xor_chunks` decodes them on our side, vectorised.

Wire format (prometheus/prompb, remote.proto and types.proto): the request is a snappy-block-
compressed `ReadRequest` (one `Query` per matcher set, `accepted_response_types =
[STREAMED_XOR_CHUNKS]`); the answer (content type `application/x-streamed-protobuf;
proto=prometheus.ChunkedReadResponse`) is a sequence of frames, each a uvarint length, a
CRC32-C (big-endian, not checked here: TCP and HTTP already checksum the bytes) and one
`ChunkedReadResponse` (series labels, chunks, the index of the query they answer).

The message classes are built at import from a hand-written descriptor of just the messages
used (docs/decisions/0124): the `protobuf` runtime (upb, C) parses them, with no generated
code and no build step.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import cramjam
import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from gpuledger.collectors import xor_chunks
from gpuledger.collectors.bulk_align import RawRead
from gpuledger.core.errors import SourceError

STREAMED_TYPE = "application/x-streamed-protobuf"
HEADERS = {
    "Content-Encoding": "snappy",
    "Content-Type": "application/x-protobuf",
    "X-Prometheus-Remote-Read-Version": "0.1.0",
    "Accept-Encoding": "identity",
}
STALE_NAN_BITS = 0x7FF0000000000002
"""Prometheus' staleness marker (value.StaleNaN): a series ended, not a sample."""
XOR = 1
MATCH_TYPES = {"=": 0, "!=": 1, "=~": 2, "!~": 3}

_F = descriptor_pb2.FieldDescriptorProto
_FIELDS: dict[str, list[tuple[str, int, int, int, str]]] = {
    # message: [(field, number, type, label, message type)]
    "Label": [("name", 1, _F.TYPE_STRING, _F.LABEL_OPTIONAL, ""),
              ("value", 2, _F.TYPE_STRING, _F.LABEL_OPTIONAL, "")],
    "LabelMatcher": [("type", 1, _F.TYPE_INT32, _F.LABEL_OPTIONAL, ""),
                     ("name", 2, _F.TYPE_STRING, _F.LABEL_OPTIONAL, ""),
                     ("value", 3, _F.TYPE_STRING, _F.LABEL_OPTIONAL, "")],
    "Query": [("start_timestamp_ms", 1, _F.TYPE_INT64, _F.LABEL_OPTIONAL, ""),
              ("end_timestamp_ms", 2, _F.TYPE_INT64, _F.LABEL_OPTIONAL, ""),
              ("matchers", 3, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".gpuledger.prompb.LabelMatcher")],
    "ReadRequest": [("queries", 1, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".gpuledger.prompb.Query"),
                    ("accepted_response_types", 2, _F.TYPE_INT32, _F.LABEL_REPEATED, "")],
    "Chunk": [("min_time_ms", 1, _F.TYPE_INT64, _F.LABEL_OPTIONAL, ""),
              ("max_time_ms", 2, _F.TYPE_INT64, _F.LABEL_OPTIONAL, ""),
              ("type", 3, _F.TYPE_INT32, _F.LABEL_OPTIONAL, ""),
              ("data", 4, _F.TYPE_BYTES, _F.LABEL_OPTIONAL, "")],
    # Labels kept as their encoded bytes (a message field is length-delimited bytes on the
    # wire): a label set is interned by its bytes and decoded once (`_LabelSets`).
    "ChunkedSeries": [("labels", 1, _F.TYPE_BYTES, _F.LABEL_REPEATED, ""),
                      ("chunks", 2, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".gpuledger.prompb.Chunk")],
    "ChunkedReadResponse": [
        ("chunked_series", 1, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".gpuledger.prompb.ChunkedSeries"),
        ("query_index", 2, _F.TYPE_INT64, _F.LABEL_OPTIONAL, "")],
}
"""Field numbers and wire types as in prompb (enums read as int32: the same varint on the wire)."""


def _classes() -> dict[str, Any]:
    proto = descriptor_pb2.FileDescriptorProto(name="gpuledger_prompb.proto", package="gpuledger.prompb",
                                               syntax="proto3")
    for name, fields in _FIELDS.items():
        message = proto.message_type.add(name=name)
        for field, number, kind, label, type_name in fields:
            entry = message.field.add(name=field, number=number, type=kind, label=label)
            if type_name:
                entry.type_name = type_name
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"gpuledger.prompb.{name}"))
            for name in _FIELDS}


_MESSAGES = _classes()


def request_body(queries: Sequence[tuple[int, int, Sequence[tuple[str, str, str]]]]) -> bytes:
    """A compressed ReadRequest: per query (start ms, end ms inclusive, [(name, op, value)])."""
    request = _MESSAGES["ReadRequest"](accepted_response_types=[1])
    for start_ms, end_ms, matchers in queries:
        query = request.queries.add(start_timestamp_ms=start_ms, end_timestamp_ms=end_ms)
        for name, op, value in matchers:
            query.matchers.add(type=MATCH_TYPES[op], name=name, value=value)
    return bytes(cramjam.snappy.compress_raw(request.SerializeToString()))


NAME_LABEL = b"\n\x08__name__"
"""How an encoded `Label` named `__name__` begins (field 1, length 8, the name)."""


@dataclass(frozen=True)
class Stream:
    """A streamed answer unpacked: distinct label sets (`__name__` aside), each series' set
    and query, and each XOR chunk's series."""

    labels: list[dict[str, str]]
    label_set: list[int]
    query: list[int]
    chunks: list[bytes]
    chunk_sid: list[int]


class LabelSets:
    """Label sets interned by their encoded bytes, `__name__` left out: the fields of one
    device share one set, decoded once. Kept by the reader across answers (its chunks
    repeat the same series), so a series seen before costs one join and one lookup; shared
    by the reader's threads (a miss takes the lock) and emptied past `LIMIT` keys."""

    LIMIT = 200_000

    def __init__(self) -> None:
        self.sets: list[dict[str, str]] = []
        self._by_series: dict[bytes, int] = {}
        self._by_set: dict[bytes, int] = {}
        self._lock = threading.Lock()
        self._label = _MESSAGES["Label"]

    def intern(self, encoded: Sequence[bytes]) -> int:
        """The index of the label set of one series (its `Label`s, encoded)."""
        key = b"".join(encoded)
        index = self._by_series.get(key)
        if index is None:
            with self._lock:
                if len(self._by_series) > self.LIMIT:
                    self._by_series.clear()
                kept = [label for label in encoded if not label.startswith(NAME_LABEL)]
                set_key = b"".join(kept)
                index = self._by_set.get(set_key)
                if index is None:
                    index = self._by_set[set_key] = len(self.sets)
                    parsed = [self._label.FromString(label) for label in kept]
                    self.sets.append({label.name: label.value for label in parsed})
                self._by_series[key] = index
        return index


def read_frames(body: bytes, what: str, sets: LabelSets | None = None) -> Stream:
    """The frames of a streamed answer (chunks still encoded); a bad frame → SourceError.
    `sets`: the reader's interned label sets (a fresh one when not given)."""
    frame_class = _MESSAGES["ChunkedReadResponse"]
    sets = sets if sets is not None else LabelSets()
    series_set: list[int] = []
    query: list[int] = []
    chunks: list[bytes] = []
    chunk_sid: list[int] = []
    pos, end = 0, len(body)
    while pos < end:
        size, pos = _uvarint(body, pos, what)
        pos += 4  # CRC32-C
        if pos + size > end:
            raise SourceError(f"{what}: a truncated remote-read frame")
        frame = frame_class.FromString(body[pos:pos + size])
        pos += size
        query_index = frame.query_index
        for series in frame.chunked_series:
            sid = len(query)
            series_set.append(sets.intern(series.labels))
            query.append(query_index)
            for chunk in series.chunks:
                if chunk.type != XOR:
                    raise SourceError(f"{what}: chunk encoding {chunk.type} (only XOR floats are read)")
                chunks.append(chunk.data)
                chunk_sid.append(sid)
    # This answer's own sets, numbered 0..k-1 (the reader's grow with every answer).
    used, local = np.unique(np.asarray(series_set, dtype=np.int64), return_inverse=True)
    return Stream([sets.sets[i] for i in used.tolist()], local.tolist(), query, chunks, chunk_sid)


def parse_stream(body: bytes, what: str, sets: LabelSets | None = None) -> RawRead:
    """Frames → series labels and decoded samples (stale markers dropped)."""
    stream = read_frames(body, what, sets)
    decoded = xor_chunks.decode(stream.chunks)
    sid = np.asarray(stream.chunk_sid, dtype=np.int64)[decoded.chunk] if stream.chunks else decoded.chunk
    ts, bits = decoded.ts_ms, decoded.value_bits
    stale = bits == np.uint64(STALE_NAN_BITS)
    if stale.any():  # most answers have none: no copies then
        keep = ~stale
        sid, ts, bits = sid[keep], ts[keep], bits[keep]
    return RawRead(stream.labels, np.asarray(stream.query, dtype=np.int64), sid, ts, bits.view(np.float64),
                   label_set=np.asarray(stream.label_set, dtype=np.int64))


def _uvarint(body: bytes, pos: int, what: str) -> tuple[int, int]:
    value, shift = 0, 0
    while pos < len(body):
        byte = body[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
    raise SourceError(f"{what}: a truncated remote-read frame header")
