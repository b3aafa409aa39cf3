"""The writing end of a subtask's output channels: `ChannelWriter` batches stream
records and barriers into channel records (the wire format of
`kstream.runtime.channels.format`) and produces them in order, bounded by count
and size as that module describes.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

from confluent_kafka import Producer

from kstream.errors import RecordTooLargeError, UnsupportedTypeError
from kstream.protocol.codec import ITEMS
from kstream.protocol.key_groups import owner_table
from kstream.protocol.limits import DEFAULT_PRODUCER_BYTES, RECORD_OVERHEAD
from kstream.protocol.watermarks import MIN_WATERMARK
from kstream.runtime.channels.format import (
    DATA_HEADER,
    DATA_HEADER_SIZE,
    FORMAT_NAMES,
    HEADER,
    MAX_BATCH,
    RECORD,
    SAFE_FORMAT,
    TIMED,
    BatchFormat,
    encode_barrier,
    encode_timed,
    unencodable,
)
from kstream.runtime.kafka import produce
from kstream.runtime.state.element import ElementContext
from kstream.runtime.state.store import key_bytes

__all__ = ["ChannelWriter"]


class ChannelWriter:
    """Writes one upstream subtask's outputs into the channels of one edge.

    `send` routes by key (hash edge) or round-robin (rebalance edge) into a
    per-channel batch; a key goes to the owner of its key group
    (`kstream.protocol.key_groups`) of `max_parallelism` groups, or, when that
    is 0 (key formats 1 and 2), to channel ``crc32 % downstream_count``.
    `flush` writes the batches (the worker calls it after every processed
    input batch); `barrier` flushes, then writes a barrier
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

    With `out`, channel records are handed to ``out(partition, value)`` in
    produce order instead of being produced (`producer` is then unused): a
    broker-free run (`kstream.testing.harness`) reads them back from memory.
    """

    def __init__(
        self,
        producer: Producer | None,
        topic: str,
        upstream: int,
        downstream_count: int,
        generation: int,
        key_fn: Callable[[Any], Any] | None,
        *,
        max_bytes: int = DEFAULT_PRODUCER_BYTES,
        on_too_large: Callable[[Any, RecordTooLargeError], None] | None = None,
        batch_format: BatchFormat = SAFE_FORMAT,
        on_unencodable: Callable[[Any, UnsupportedTypeError], None] | None = None,
        key_bytes: Callable[[Any], bytes] = key_bytes,
        max_parallelism: int = 0,
        element: ElementContext | None = None,
        out: Callable[[int, bytes], None] | None = None,
    ) -> None:
        self._producer = producer
        self._topic = topic
        self._out = out
        self._base = upstream * downstream_count
        self._d = downstream_count
        # The per-record path is a crc32, a modulo and an index into the owner
        # table; without key groups the table is the identity on crc32 % D.
        self._k = max_parallelism or downstream_count
        self._owner = (
            owner_table(max_parallelism, downstream_count)
            if max_parallelism
            else tuple(range(downstream_count))
        )
        self._prefixes = {f: DATA_HEADER.pack(RECORD, generation, f) for f in FORMAT_NAMES}
        self._format = batch_format
        self._on_unencodable = on_unencodable
        self._key_bytes = key_bytes
        self._generation = generation
        self._element = element
        #: The header of a timed record (a data record's is in `_prefixes`, by format).
        self._timed_prefix = HEADER.pack(TIMED, generation)
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
            j = self._owner[zlib.crc32(kb) % self._k]
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
            j = self._owner[zlib.crc32(self._key_bytes(key)) % self._k]
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
            self._produce(partition, data)
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
            self._produce(self._base + j, data)

    def _produce(self, partition: int, data: bytes) -> None:
        """Write channel record `data` into `partition` (or hand it to `out`)."""
        if self._out is not None:
            self._out(partition, data)
            return
        assert self._producer is not None
        produce(self._producer, self._topic, data, None, partition, kind="channel")
