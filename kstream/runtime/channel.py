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
import zlib
from collections.abc import Callable
from typing import Any, NamedTuple

from confluent_kafka import Producer

from kstream.dataflow.channel_serde import MSGPACK, ChannelSerde
from kstream.errors import DecodeError, ProtocolError, RecordTooLargeError, UnsupportedTypeError
from kstream.protocol.codec import ITEMS, PAIRS, SAME_PAIRS, Codec
from kstream.protocol.limits import DEFAULT_PRODUCER_BYTES, RECORD_OVERHEAD
from kstream.protocol.watermarks import MIN_WATERMARK
from kstream.runtime.event_time import ElementContext
from kstream.runtime.kafka import produce
from kstream.runtime.state import key_bytes

__all__ = [
    "BARRIER",
    "RECORD",
    "TIMED",
    "BatchFormat",
    "ChannelWriter",
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
_HEADER = struct.Struct(">BI")
#: A data record's header: kind, generation and the format of its batch.
_DATA = struct.Struct(">BIB")
_CHECKPOINT = struct.Struct(">Q")
HEADER_SIZE = _HEADER.size
#: A timed record after its header: watermark, idle flag, item count.
_TIMED = struct.Struct(">qBI")
TIMED_SIZE = HEADER_SIZE + _TIMED.size
#: Bytes per item of a timed record besides its encoding: timestamp and stamp.
STAMP_BYTES = 16
DATA_HEADER_SIZE = _DATA.size
#: Formats of a data record's batch (byte 5); on the wire, so never renumbered.
#: The codec's shapes are formats as they are; pickle is 3.
PICKLE = 3
_FORMAT_NAMES = {
    ITEMS: "msgpack items",
    PAIRS: "msgpack pairs",
    PICKLE: "trusted-pickle",
    SAME_PAIRS: "msgpack same pairs",
}


def decode_header(value: bytes) -> tuple[int, int]:
    """(kind, generation) of a channel record."""
    if len(value) < HEADER_SIZE:
        raise ProtocolError(f"channel record of {len(value)} bytes has no header")
    kind, generation = _HEADER.unpack_from(value)
    return kind, generation


def encode_barrier(checkpoint: int, generation: int) -> bytes:
    return _HEADER.pack(BARRIER, generation) + _CHECKPOINT.pack(checkpoint)


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
            + f" refused unread (this kstream reads {', '.join(map(str, sorted(_FORMAT_NAMES)))})"
        )


def decode_batch(value: bytes, fmt: BatchFormat | None = None, keyed: bool = False) -> list[Any]:
    """The stream records of a data channel record, read as `fmt` (default: the safe codec)."""
    return (fmt or _SAFE).decode(value, keyed)


_SAFE = BatchFormat()


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


class ChannelWriter:
    """Writes one upstream subtask's outputs into the channels of one edge.

    `send` routes by key (hash edge) or round-robin (rebalance edge) into a
    per-channel batch; `flush` writes the batches (the worker calls it after
    every processed input batch); `barrier` flushes, then writes a barrier
    into every channel this subtask owns. The shared producer is idempotent,
    so each partition keeps the order of `produce` calls.

    With an `element` context the edge is timed: each stream record is stamped
    with the context's timestamp and partition stamp when sent, and each
    record carries the subtask's watermark and idleness as of the last
    `flush` (a batch full before then carries the previous one: the watermark
    goes downstream only after everything the subtask emitted below it).

    Every channel record is at most `max_bytes`. A stream record too large
    for that on its own is handed to `on_too_large` with a
    `RecordTooLargeError` (without a handler, the error is raised). A batch is
    replaced only once all its parts were produced; a failed produce raises
    `KafkaUnavailableError`, which must stop the worker (the job rolls back),
    never count as a record error.
    """

    def __init__(
        self,
        producer: Producer,
        topic: str,
        upstream: int,
        downstream_count: int,
        generation: int,
        key_fn: Callable[[Any], Any] | None,
        *,
        max_bytes: int = DEFAULT_PRODUCER_BYTES,
        on_too_large: Callable[[Any, RecordTooLargeError], None] | None = None,
        batch_format: BatchFormat = _SAFE,
        on_unencodable: Callable[[Any, UnsupportedTypeError], None] | None = None,
        key_bytes: Callable[[Any], bytes] = key_bytes,
        element: ElementContext | None = None,
    ) -> None:
        self._producer = producer
        self._topic = topic
        self._base = upstream * downstream_count
        self._d = downstream_count
        self._prefixes = {f: _DATA.pack(RECORD, generation, f) for f in _FORMAT_NAMES}
        self._format = batch_format
        self._on_unencodable = on_unencodable
        self._key_bytes = key_bytes
        self._generation = generation
        self._element = element
        #: The header of a timed record (a data record's is in `_prefixes`, by format).
        self._timed_prefix = _HEADER.pack(TIMED, generation)
        self._key_fn = key_fn
        self._next = upstream % downstream_count
        self._batches: list[list[Any]] = [[] for _ in range(downstream_count)]
        #: Per channel, the timestamp and stamp of each batched item (timed edges).
        self._stamps: list[list[int]] = [[] for _ in range(downstream_count)]
        #: The watermark and idleness records carry now (as of the last flush), and
        #: per channel the last ones written (a watermark-only record goes out on change).
        self._mark = (MIN_WATERMARK, False)
        self._written = [self._mark] * downstream_count
        #: Channel records have no key and no headers: the value may take the rest.
        self._room = max_bytes - RECORD_OVERHEAD
        self._on_too_large = on_too_large
        #: Stream records per batch now (adapts to their size, see `_fitted`).
        self._cap = MAX_BATCH
        self.sent = 0
        self.too_large = 0
        if element is not None:
            self.send = self._send_timed  # type: ignore[method-assign]

    def send(self, value: Any) -> None:
        """Route one value to its channel's batch."""
        if self._key_fn is not None:
            key = self._key_fn(value)
            # Every key format encodes a str as its UTF-8 (`key_encoder`): no call for it.
            kb = key.encode() if type(key) is str else self._key_bytes(key)
            j = zlib.crc32(kb) % self._d
            batch = self._batches[j]
            batch.append((key, value))
        else:
            j = self._next
            self._next = (j + 1) % self._d
            batch = self._batches[j]
            batch.append(value)
        if len(batch) >= self._cap:
            self._write(j)

    def _send_timed(self, value: Any) -> None:
        """`send` of a timed edge: also stamps the value with the element context's time."""
        element = self._element
        assert element is not None
        assert element.timestamp is not None
        if self._key_fn is not None:
            key = self._key_fn(value)
            j = zlib.crc32(self._key_bytes(key)) % self._d
            batch = self._batches[j]
            batch.append((key, value))
        else:
            j = self._next
            self._next = (j + 1) % self._d
            batch = self._batches[j]
            batch.append(value)
        self._stamps[j] += (element.timestamp, element.stamp)
        if len(batch) >= self._cap:
            self._write(j)

    def flush(self) -> None:
        """Write every non-empty batch; on a timed edge, with the subtask's watermark
        now, and a watermark-only record into each channel whose last record
        carried another one."""
        element = self._element
        if element is not None:
            self._mark = (element.watermark, element.idle)
            for j, batch in enumerate(self._batches):
                if batch or self._written[j] != self._mark:
                    self._write(j)
            return
        for j, batch in enumerate(self._batches):
            if batch:
                self._write(j)

    def _write(self, j: int) -> None:
        if self._element is None:
            self._write_batch(self._batches[j], None, self._base + j)
        else:
            self._write_batch(self._batches[j], self._stamps[j], self._base + j)
            self._stamps[j] = []
            self._written[j] = self._mark
        self._batches[j] = []

    def _write_batch(self, batch: list[Any], stamps: list[int] | None, partition: int) -> None:
        """Produce `batch` as one channel record, or in order as several that fit."""
        if not batch and stamps is None:
            return  # only a timed edge writes a record without items (its watermark)
        keyed = self._key_fn is not None
        fmt, payload = ITEMS, b""
        if batch:
            try:
                fmt, payload = self._format.encode(batch, keyed)
            except UnsupportedTypeError:
                batch, stamps = self._encodable(batch, stamps)
                if batch:
                    fmt, payload = self._format.encode(batch, keyed)
                elif stamps is None:
                    return
        if stamps is None:
            data = self._prefixes[fmt] + payload
        else:
            data = encode_timed(self._timed_prefix, *self._mark, stamps, fmt, payload)
        size, n = len(data), len(batch)
        if size <= self._room:
            if n:
                self._fitted(size, n)
            produce(self._producer, self._topic, data, None, partition, kind="channel")
            self.sent += n
        elif n == 1:
            self._reject(batch[0], size, partition)
            if stamps is not None:
                # The watermark must still go out after the rejected record.
                self._write_batch([], [], partition)
        else:
            # Parts of about half the limit each: one more encoding pass, mostly.
            step = -(-n // min(n, 2 * size // self._room + 1))
            for i in range(0, n, step):
                part = None if stamps is None else stamps[2 * i : 2 * (i + step)]
                self._write_batch(batch[i : i + step], part, partition)

    def _encodable(
        self, batch: list[Any], stamps: list[int] | None
    ) -> tuple[list[Any], list[int] | None]:
        """The items of `batch` the encoding carries, and their stamps (timed edges);
        the others go to `on_unencodable`."""
        keyed = self._key_fn is not None
        kept: list[Any] = []
        kept_stamps: list[int] | None = None if stamps is None else []
        for i, item in enumerate(batch):
            try:
                self._format.encode([item], keyed)
            except UnsupportedTypeError as exc:
                # A hash edge's item is (key, value); the key was encoded already.
                error = unencodable(item[1] if keyed else item, exc)
                if self._on_unencodable is None:
                    raise error from None
                self._on_unencodable(item, error)
            else:
                kept.append(item)
                if stamps is not None and kept_stamps is not None:
                    kept_stamps += stamps[2 * i : 2 * i + 2]
        return kept, kept_stamps

    def _fitted(self, size: int, n: int) -> None:
        """Adapt the count bound to the bytes per stream record of a batch that fitted."""
        self._cap = max(1, min(MAX_BATCH, self._room * n // (2 * size)))

    def _reject(self, item: Any, size: int, partition: int) -> None:
        self.too_large += 1
        error = RecordTooLargeError(
            f"stream record of {size - DATA_HEADER_SIZE} bytes (encoded) cannot be written to "
            f"channel {self._topic}[{partition}]: its records hold at most {self._room} bytes",
            value=repr(item).encode(),
        )
        if self._on_too_large is None:
            raise error
        self._on_too_large(item, error)

    def barrier(self, checkpoint: int) -> None:
        """Flush, then write barrier `checkpoint` into each of this subtask's channels."""
        self.flush()
        data = encode_barrier(checkpoint, self._generation)
        for j in range(self._d):
            produce(self._producer, self._topic, data, None, self._base + j, kind="channel")
