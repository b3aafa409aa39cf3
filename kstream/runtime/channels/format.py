"""Channels: the partitions of internal topics, each one FIFO stream between two subtasks.

The edge into stage `s` of job `J` is the topic ``kstream.J.s<s>`` with U*D
partitions for U upstream and D downstream subtasks; partition ``i*D + j`` is
written only by upstream subtask i and read only by downstream subtask j, so
every partition is exactly one Chandy-Lamport channel.

Wire format of a channel record's value (the key is unused)::

    byte 0      kind: 0 = data, 1 = barrier, 2 = timed data
    bytes 1-4   generation of the writer (big-endian u32)
    barrier:    bytes 5-12: checkpoint id (u64)
    data:       byte 5: format of the batch, then the batch:
                1 = items: `kstream.protocol.codec` of the list of stream records
                2 = pairs: the codec's flat list k0, v0, k1, v1, ... of a list of
                    2-tuples (a hash edge's (key, value) items, or values that
                    are all pairs)
                3 = trusted pickle of the list of stream records
                4 = same pairs: the codec's list of k0, k1, ... of pairs (k, k)
    timed data: bytes 5-17: the writer's watermark (i64), idle flag (u8), item
                count n (u32); then n (timestamp, partition stamp) pairs (2n
                i64); then, when n > 0, the format byte and the batch as for data

The format byte lets a reader refuse a batch in an encoding its job does not
trust (`kstream.dataflow.channel_serde`) without reading it: a job on the
safe default never unpickles what an internal topic holds. A stream record
the encoding cannot carry (e.g. an instance of a class the job did not
declare) is not written: it goes to `on_unencodable` (the job's error policy)
with an `UnsupportedTypeError` that names its type and the two ways out.

Channels of a timed stage (one whose records carry event time) use timed data
records only; the timestamps, stamps and watermark travel beside the batch in
fixed-size binary, so the codec never sees them. The watermark of a timed
record is its writer's watermark *after* its items: the reader applies it once
the items are processed. A writer whose watermark (or idleness) changed with
nothing to send writes one record with no items per channel and flush.

One Kafka record carries a small batch of stream records: a produce call, a
broker write and a fetch per stream record would cost more than the work
itself. A batch never straddles a barrier (`barrier` flushes first), so FIFO
order and the before/after split of each checkpoint hold per stream record.

A batch is bounded by count (`MAX_BATCH`) and by size: its encoded record must
fit `max_bytes` (see `kstream.protocol.limits`). Sizing each stream record would cost
more than encoding it, so the writer sizes only what it encodes anyway: the
count bound adapts to the bytes per stream record of the last batch written
(aiming at half the limit), and a batch whose encoding is still too large is
split, in order, into parts that fit. A single stream record that cannot fit
alone is not written: it goes to `on_too_large` (the job's error policy).

The generation is in the value rather than in Kafka headers because a header
list costs Python allocations per record.
"""

from __future__ import annotations

import pickle
import struct
from typing import Any, NamedTuple

from kstream.dataflow.channel_serde import MSGPACK, ChannelSerde
from kstream.errors import DecodeError, ProtocolError, UnsupportedTypeError
from kstream.protocol.codec import ITEMS, PAIRS, SAME_PAIRS, Codec

__all__ = [
    "BARRIER",
    "RECORD",
    "TIMED",
    "BatchFormat",
    "Timed",
    "decode_header",
    "decode_timed",
    "encode_barrier",
]

RECORD = 0
BARRIER = 1
TIMED = 2
#: Stream records per channel record at most: enough to amortise a produce call.
#: Records of some kilobytes lower the bound (see the module docstring).
MAX_BATCH = 500
HEADER = struct.Struct(">BI")
#: A data record's header: kind, generation and the format of its batch.
DATA_HEADER = struct.Struct(">BIB")
_CHECKPOINT = struct.Struct(">Q")
HEADER_SIZE = HEADER.size
#: A timed record after its header: watermark, idle flag, item count.
_TIMED = struct.Struct(">qBI")
TIMED_SIZE = HEADER_SIZE + _TIMED.size
#: Bytes per item of a timed record besides its encoding: timestamp and stamp.
STAMP_BYTES = 16
DATA_HEADER_SIZE = DATA_HEADER.size
#: Formats of a data record's batch (byte 5); on the wire, so never renumbered.
#: The codec's shapes are formats as they are; pickle is 3.
PICKLE = 3
FORMAT_NAMES = {
    ITEMS: "msgpack items",
    PAIRS: "msgpack pairs",
    PICKLE: "trusted-pickle",
    SAME_PAIRS: "msgpack same pairs",
}


def decode_header(value: bytes) -> tuple[int, int]:
    """(kind, generation) of a channel record."""
    if len(value) < HEADER_SIZE:
        raise ProtocolError(f"channel record of {len(value)} bytes has no header")
    kind, generation = HEADER.unpack_from(value)
    return kind, generation


def encode_barrier(checkpoint: int, generation: int) -> bytes:
    return HEADER.pack(BARRIER, generation) + _CHECKPOINT.pack(checkpoint)


def barrier_checkpoint(value: bytes) -> int:
    """The checkpoint id of a barrier record; `ProtocolError` if it is too short to hold one."""
    if len(value) < HEADER_SIZE + _CHECKPOINT.size:
        raise ProtocolError(f"barrier record of {len(value)} bytes has no checkpoint id")
    (n,) = _CHECKPOINT.unpack_from(value, HEADER_SIZE)
    return int(n)


class BatchFormat:
    """Encodes and decodes the batches of one job's channels, by its `ChannelSerde`.

    Built once per subtask (it holds the job's codec). Writing uses the job's
    encoding; reading accepts the codec's formats, and pickle only when the
    job chose ``trusted-pickle``.
    """

    def __init__(self, serde: ChannelSerde = MSGPACK) -> None:
        self.serde = serde
        self._codec = Codec(serde.types)
        self._pickle = serde.trusted_pickle

    def encode(self, items: list[Any], pairs: bool) -> tuple[int, bytes]:
        """(format, payload) of a batch; `pairs`: its items are (key, value) tuples.

        `UnsupportedTypeError` if an item has a type the encoding cannot carry.
        """
        if self._pickle:
            return PICKLE, pickle.dumps(items, protocol=pickle.HIGHEST_PROTOCOL)
        return self._codec.dumps_batch(items, pairs)

    def decode(self, value: bytes, keyed: bool) -> list[Any]:
        """The stream records of data channel record `value` ((key, value) pairs if `keyed`).

        `DecodeError` (one line, naming the format) if the batch is malformed or
        in a format this job does not trust; nothing of it is then unpickled.
        """
        if len(value) < DATA_HEADER_SIZE:
            raise DecodeError(f"channel record of {len(value)} bytes has no batch format")
        return self.decode_body(value[HEADER_SIZE], memoryview(value)[DATA_HEADER_SIZE:], keyed)

    def decode_body(self, fmt: int, body: memoryview, keyed: bool) -> list[Any]:
        """The stream records of a batch in format `fmt` (see `decode`)."""
        if fmt in (SAME_PAIRS, PAIRS) or (fmt == ITEMS and not keyed):
            return self._codec.loads_batch(body, fmt)
        if fmt == PICKLE:
            if not self._pickle:
                raise DecodeError(
                    "channel batch in format trusted-pickle refused unread: this job's channel"
                    f" serde is {self.serde.name}, and loading pickle runs code (choose"
                    " Job(..., channel_serde='trusted-pickle') only if only the job can write"
                    " its internal topics)"
                )
            items: list[Any] = pickle.loads(body)
            return items
        raise DecodeError(
            f"channel batch in unknown format {fmt}"
            + (" for a keyed channel" if fmt == ITEMS else "")
            + f" refused unread (this kstream reads {', '.join(map(str, sorted(FORMAT_NAMES)))})"
        )


def decode_batch(value: bytes, fmt: BatchFormat | None = None, keyed: bool = False) -> list[Any]:
    """The stream records of a data channel record, read as `fmt` (default: the safe codec)."""
    return (fmt or SAFE_FORMAT).decode(value, keyed)


SAFE_FORMAT = BatchFormat()


class Timed(NamedTuple):
    """A decoded timed record: its writer's watermark and idleness, applied after
    its items; ``stamps[2i]`` and ``stamps[2i + 1]`` are item i's timestamp and
    partition stamp."""

    watermark: int
    idle: bool
    stamps: tuple[int, ...]
    items: list[Any]


def encode_timed(
    prefix: bytes, watermark: int, idle: bool, stamps: list[int], fmt: int, payload: bytes
) -> bytes:
    """A timed record (`prefix` is its header) of a batch of `len(stamps) // 2` items
    encoded as `payload` in format `fmt`, stamped by `stamps`."""
    n = len(stamps) // 2
    head = prefix + _TIMED.pack(watermark, idle, n)
    if not n:
        return head
    return head + struct.pack(f">{2 * n}q", *stamps) + bytes((fmt,)) + payload


def decode_timed(value: bytes, fmt: BatchFormat, keyed: bool) -> Timed:
    """The watermark, idleness, stamps and items of a timed record, its batch read as `fmt`."""
    if len(value) < TIMED_SIZE:
        raise ProtocolError(f"timed channel record of {len(value)} bytes is too short")
    watermark, idle, n = _TIMED.unpack_from(value, HEADER_SIZE)
    if not n:
        return Timed(watermark, bool(idle), (), [])
    at = TIMED_SIZE + STAMP_BYTES * n
    if len(value) <= at:
        raise DecodeError(f"timed channel record of {len(value)} bytes lacks its {n} items")
    stamps = struct.unpack_from(f">{2 * n}q", value, TIMED_SIZE)
    items = fmt.decode_body(value[at], memoryview(value)[at + 1 :], keyed)
    if len(items) != n:
        raise DecodeError(f"timed channel record says {n} items, holds {len(items)}")
    return Timed(watermark, bool(idle), stamps, items)


def unencodable(value: Any, exc: UnsupportedTypeError) -> UnsupportedTypeError:
    """The record error for a stream record `exc` says the channel encoding cannot carry."""
    holds = (
        "is"
        if f"{type(value).__module__}.{type(value).__qualname__}" == exc.type_name
        else (f"of type {type(value).__qualname__} holds")
    )
    return UnsupportedTypeError(
        type(value),
        f"a stream record {holds} a {exc.type_name}, which"
        " channels do not carry safely: declare how it travels with Job(...,"
        " channel_serde=[kstream.RecordType(<type>, encode, decode)]), or opt in to pickle with"
        " Job(..., channel_serde='trusted-pickle') (unsafe: loading pickle runs code)",
    )
