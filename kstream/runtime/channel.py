"""Channels: the partitions of internal topics, each one FIFO stream between two subtasks.

The edge into stage `s` of job `J` is the topic ``kstream.J.s<s>`` with U*D
partitions for U upstream and D downstream subtasks; partition ``i*D + j`` is
written only by upstream subtask i and read only by downstream subtask j, so
every partition is exactly one Chandy-Lamport channel.

Wire format of a channel record's value (the key is unused)::

    byte 0      kind: 0 = data, 1 = barrier
    bytes 1-4   generation of the writer (big-endian u32)
    rest        data: pickle of a list of (key, value) pairs (hash edges) or of
                values (rebalance edges); barrier: checkpoint id (u64)

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
from typing import Any

from confluent_kafka import Producer

from kstream.errors import ProtocolError, RecordTooLargeError
from kstream.protocol.limits import DEFAULT_PRODUCER_BYTES, RECORD_OVERHEAD
from kstream.runtime.kafka import produce
from kstream.runtime.state import key_bytes

__all__ = [
    "BARRIER",
    "RECORD",
    "ChannelWriter",
    "decode_header",
    "encode_barrier",
]

RECORD = 0
BARRIER = 1
#: Stream records per channel record at most: enough to amortise a produce call.
#: Records of some kilobytes lower the bound (see the module docstring).
MAX_BATCH = 500
_HEADER = struct.Struct(">BI")
_CHECKPOINT = struct.Struct(">Q")
HEADER_SIZE = _HEADER.size


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


def decode_batch(value: bytes) -> list[Any]:
    """The stream records of a data channel record."""
    items: list[Any] = pickle.loads(memoryview(value)[HEADER_SIZE:])
    return items


class ChannelWriter:
    """Writes one upstream subtask's outputs into the channels of one edge.

    `send` routes by key (hash edge) or round-robin (rebalance edge) into a
    per-channel batch; `flush` writes the batches (the worker calls it after
    every processed input batch); `barrier` flushes, then writes a barrier
    into every channel this subtask owns. The shared producer is idempotent,
    so each partition keeps the order of `produce` calls.

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
    ) -> None:
        self._producer = producer
        self._topic = topic
        self._base = upstream * downstream_count
        self._d = downstream_count
        self._prefix = _HEADER.pack(RECORD, generation)
        self._generation = generation
        self._key_fn = key_fn
        self._next = upstream % downstream_count
        self._batches: list[list[Any]] = [[] for _ in range(downstream_count)]
        #: Channel records have no key and no headers: the value may take the rest.
        self._room = max_bytes - RECORD_OVERHEAD
        self._on_too_large = on_too_large
        #: Stream records per batch now (adapts to their size, see `_fitted`).
        self._cap = MAX_BATCH
        self.sent = 0
        self.too_large = 0

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

    def flush(self) -> None:
        """Write every non-empty batch."""
        for j, batch in enumerate(self._batches):
            if batch:
                self._write(j)

    def _write(self, j: int) -> None:
        self._write_batch(self._batches[j], self._base + j)
        self._batches[j] = []

    def _write_batch(self, batch: list[Any], partition: int) -> None:
        """Produce `batch` as one channel record, or in order as several that fit."""
        data = self._prefix + pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL)
        size, n = len(data), len(batch)
        if size <= self._room:
            self._fitted(size, n)
            produce(self._producer, self._topic, data, None, partition, kind="channel")
            self.sent += n
        elif n == 1:
            self._reject(batch[0], size, partition)
        else:
            # Parts of about half the limit each: one more encoding pass, mostly.
            step = -(-n // min(n, 2 * size // self._room + 1))
            for i in range(0, n, step):
                self._write_batch(batch[i : i + step], partition)

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
