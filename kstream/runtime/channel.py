"""Channels: the partitions of internal topics, each one FIFO stream between two subtasks.

The edge into stage `s` of job `J` is the topic ``kstream.J.s<s>`` with U*D
partitions for U upstream and D downstream subtasks; partition ``i*D + j`` is
written only by upstream subtask i and read only by downstream subtask j, so
every partition is exactly one Chandy-Lamport channel.

Wire format of a channel record's value (the key is unused)::

    byte 0      kind: 0 = data, 1 = barrier, 2 = timed data
    bytes 1-4   generation of the writer (big-endian u32)
    rest        data: the items (`encode_items`: a list of (key, value) pairs
                for hash edges, of values for rebalance edges);
                barrier: checkpoint id (u64);
                timed data: the writer's watermark (i64), idle flag (u8), item
                count n (u32), n (timestamp, partition stamp) pairs (2n i64),
                then the items as for data (nothing when n is 0)

Channels of a timed stage (one whose records carry event time) use timed data
records only; the timestamps, stamps and watermark travel beside the items in
fixed-size binary, so the item codec never sees them. The watermark of a timed
record is its writer's watermark *after* its items: the reader applies it once
the items are processed. A writer whose watermark (or idleness) changed with
nothing to send writes one record with no items per channel and flush.

One Kafka record carries a small batch of stream records: a produce call, a
broker write and a fetch per stream record would cost more than the work
itself. A batch never straddles a barrier (`barrier` flushes first), so FIFO
order and the before/after split of each checkpoint hold per stream record.

A batch is bounded by count (`MAX_BATCH`) and by size: its encoded record must
fit `max_bytes` (see `kstream.protocol.limits`). Sizing each stream record would cost
more than pickling it, so the writer sizes only what it encodes anyway: the
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

from kstream.errors import ProtocolError, RecordTooLargeError
from kstream.protocol.limits import DEFAULT_PRODUCER_BYTES, RECORD_OVERHEAD
from kstream.protocol.watermarks import MIN_WATERMARK
from kstream.runtime.event_time import ElementContext
from kstream.runtime.kafka import produce
from kstream.runtime.state import key_bytes

__all__ = [
    "BARRIER",
    "RECORD",
    "TIMED",
    "ChannelWriter",
    "Timed",
    "decode_header",
    "decode_items",
    "decode_timed",
    "encode_barrier",
    "encode_items",
]

RECORD = 0
BARRIER = 1
TIMED = 2
#: Stream records per channel record at most: enough to amortise a produce call.
#: Records of some kilobytes lower the bound (see the module docstring).
MAX_BATCH = 500
_HEADER = struct.Struct(">BI")
_CHECKPOINT = struct.Struct(">Q")
HEADER_SIZE = _HEADER.size
#: A timed record after its header: watermark, idle flag, item count.
_TIMED = struct.Struct(">qBI")
TIMED_SIZE = HEADER_SIZE + _TIMED.size
#: Bytes per item of a timed record besides its encoding: timestamp and stamp.
STAMP_BYTES = 16


def decode_header(value: bytes) -> tuple[int, int]:
    """(kind, generation) of a channel record."""
    if len(value) < HEADER_SIZE:
        raise ProtocolError(f"channel record of {len(value)} bytes has no header")
    kind, generation = _HEADER.unpack_from(value)
    return kind, generation


def encode_barrier(checkpoint: int, generation: int) -> bytes:
    return _HEADER.pack(BARRIER, generation) + _CHECKPOINT.pack(checkpoint)


def barrier_checkpoint(value: bytes) -> int:
    (n,) = _CHECKPOINT.unpack_from(value, HEADER_SIZE)
    return int(n)


def encode_items(items: list[Any]) -> bytes:
    """The payload of a data record: its stream records (the one place they are encoded)."""
    return pickle.dumps(items, protocol=pickle.HIGHEST_PROTOCOL)


def decode_items(payload: bytes | memoryview) -> list[Any]:
    """The inverse of `encode_items` (the one place stream records are decoded)."""
    items: list[Any] = pickle.loads(payload)
    return items


def decode_batch(value: bytes) -> list[Any]:
    """The stream records of a data channel record."""
    return decode_items(memoryview(value)[HEADER_SIZE:])


class Timed(NamedTuple):
    """A decoded timed record: its writer's watermark and idleness, applied after
    its items; ``stamps[2i]`` and ``stamps[2i + 1]`` are item i's timestamp and
    partition stamp."""

    watermark: int
    idle: bool
    stamps: tuple[int, ...]
    items: list[Any]


def encode_timed(
    prefix: bytes, watermark: int, idle: bool, stamps: list[int], items: list[Any]
) -> bytes:
    """A timed record (`prefix` is its header) of `items`, stamped by `stamps`."""
    n = len(items)
    head = prefix + _TIMED.pack(watermark, idle, n)
    if not n:
        return head
    return head + struct.pack(f">{2 * n}q", *stamps) + encode_items(items)


def decode_timed(value: bytes) -> Timed:
    """The watermark, idleness, stamps and items of a timed record."""
    if len(value) < TIMED_SIZE:
        raise ProtocolError(f"timed channel record of {len(value)} bytes is too short")
    watermark, idle, n = _TIMED.unpack_from(value, HEADER_SIZE)
    if not n:
        return Timed(watermark, bool(idle), (), [])
    stamps = struct.unpack_from(f">{2 * n}q", value, TIMED_SIZE)
    items = decode_items(memoryview(value)[TIMED_SIZE + STAMP_BYTES * n :])
    if len(items) != n:
        raise ProtocolError(f"timed channel record says {n} items, holds {len(items)}")
    return Timed(watermark, bool(idle), stamps, items)


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
        element: ElementContext | None = None,
    ) -> None:
        self._producer = producer
        self._topic = topic
        self._base = upstream * downstream_count
        self._d = downstream_count
        self._generation = generation
        self._element = element
        self._prefix = _HEADER.pack(RECORD if element is None else TIMED, generation)
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
            j = zlib.crc32(key_bytes(key)) % self._d
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
            j = zlib.crc32(key_bytes(key)) % self._d
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

    def _encode(self, batch: list[Any], stamps: list[int] | None) -> bytes:
        if stamps is None:
            return self._prefix + encode_items(batch)
        return encode_timed(self._prefix, *self._mark, stamps, batch)

    def _write_batch(self, batch: list[Any], stamps: list[int] | None, partition: int) -> None:
        """Produce `batch` as one channel record, or in order as several that fit."""
        data = self._encode(batch, stamps)
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

    def _fitted(self, size: int, n: int) -> None:
        """Adapt the count bound to the bytes per stream record of a batch that fitted."""
        self._cap = max(1, min(MAX_BATCH, self._room * n // (2 * size)))

    def _reject(self, item: Any, size: int, partition: int) -> None:
        self.too_large += 1
        error = RecordTooLargeError(
            f"stream record of {size - HEADER_SIZE} bytes (pickled) cannot be written to channel "
            f"{self._topic}[{partition}]: its records hold at most {self._room} bytes",
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
