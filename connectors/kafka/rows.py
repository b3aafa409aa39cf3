"""A Kafka sink's rows: each result encoded once, sized, and produced.

Both writers (`kstream.connectors.kafka.plain`, `kstream.connectors.kafka.transactional`)
turn a result into a `Row` with `Encoder.row` and hand it to a producer with
`produce_output` (or `produce_row` for one replayed from a snapshot). A `Row` is
also the write-ahead copy a snapshot keeps, so its shape is a stored format:
`(key, value, headers, timestamp)`, or the 3-tuple of snapshots taken before
timestamps. Encoding refuses a row the topic would refuse (too large,
`RecordTooLargeError`; a timestamp too far ahead, `TimestampError`) before any
producer sees it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from confluent_kafka import KafkaException

from kstream.dataflow.outputs import Producer, SinkContext
from kstream.dataflow.serde import Serde, StrSerde, serde
from kstream.errors import RecordTooLargeError, TimestampError
from kstream.infra.admin import Admin
from kstream.protocol.limits import record_bytes
from kstream.protocol.names import LINEAGE_HEADERS
from kstream.runtime.kafka import produce

__all__ = [
    "AHEAD_SETTINGS",
    "Encoder",
    "Headers",
    "OutputTopic",
    "Row",
    "max_ahead_ms",
    "produce_output",
    "produce_row",
]


class OutputTopic(Protocol):
    """What rows are made by: the sink's topic, serdes and lineage (a `KafkaSink`)."""

    @property
    def topic(self) -> str: ...
    @property
    def key_serde(self) -> str | Serde: ...
    @property
    def value_serde(self) -> str | Serde: ...
    @property
    def lineage(self) -> bool: ...


#: Kafka record headers, as confluent-kafka takes them.
Headers = list[tuple[str, str | bytes | None]]
#: One serialized output: key, value, headers (None without lineage) and its
#: Kafka timestamp (the result's event time on a stage with event time, else 0:
#: the producer's clock).
Row = tuple[bytes | None, bytes | None, Headers | None, int]


def produce_row(producer: Producer, topic: str, row: Sequence[Any]) -> None:
    """Produce `row` (a `Row`, or a 3-tuple kept by a snapshot taken before timestamps)."""
    produce(
        producer, topic, row[1], row[0], headers=row[2], timestamp=row[3] if len(row) > 3 else 0
    )


def produce_output(producer: Producer, topic: str, row: Row) -> None:
    """`produce_row` with the common case inlined: no headers, the producer's timestamp.

    An output costs one C call here instead of two more Python calls; a refused
    attempt enqueued nothing, so the general path (which waits for room in the
    queue and names the error) simply tries again.
    """
    if row[2] is None and not row[3]:
        try:
            producer.produce(topic, row[1], row[0])
            return
        except (BufferError, KafkaException):
            pass
    produce_row(producer, topic, row)


#: The topic settings (newest first) bounding how far ahead of the broker's clock
#: a record's timestamp may be; Kafka 4 brokers default to one hour.
AHEAD_SETTINGS = ("message.timestamp.after.max.ms", "message.timestamp.difference.max.ms")


def max_ahead_ms(ctx: SinkContext, topic: str) -> int | None:
    """How far ahead of the clock `topic` takes a record's timestamp (None: any amount).

    Asked only of sinks on stages with event time: their records carry it.
    """
    if ctx.event_time is None:
        return None
    admin = Admin(ctx.bootstrap)
    if admin.topic_config([topic], "message.timestamp.type").get(topic) == "LogAppendTime":
        return None  # the broker stamps records itself
    for name in AHEAD_SETTINGS:
        value = admin.topic_config([topic], name).get(topic)
        if value is not None and 0 <= int(value) < 2**63 - 1:
            return int(value)
    return None


def _future_guard(topic: str, max_ahead: int | None) -> Callable[[int], None] | None:
    """A check refusing an output timestamp more than `max_ahead` ms ahead of the clock.

    The broker would refuse it too, but inside a transaction that is the whole
    epoch, at every replay: the job would roll back for ever. The clock is read
    only for a timestamp past the bound last computed (the bound only grows).
    """
    if max_ahead is None:
        return None
    bound = [-(2**63)]

    def guard(ts: int) -> None:
        if ts <= bound[0]:
            return
        now = time.time_ns() // 1_000_000
        bound[0] = now + max_ahead
        if ts > bound[0]:
            raise TimestampError(
                f"output event time {ts} is more than {max_ahead} ms ahead of the wall clock "
                f"({now}): topic {topic} refuses such timestamps "
                "(message.timestamp.after.max.ms)"
            )

    return guard


class Encoder:
    """Turns a result into a `Row`: serdes, and lineage headers when asked for.

    A row larger than `max_bytes` raises `RecordTooLargeError`: it is checked
    here, before any producer sees it, so it can neither fail a produce call
    nor be rejected by the broker inside a transaction. So is a row whose
    event time is further ahead of the clock than the topic takes
    (`max_ahead` ms; `TimestampError`).

    `row` runs once per output. Without lineage it is one closure
    (`_rows`) with the `str` serde's common cases (a str, an int) inlined; it
    returns exactly what the serdes would (`StrSerde.dumps`), so outputs and
    the write-ahead copies snapshots keep are unchanged.
    """

    def __init__(
        self, sink: OutputTopic, ctx: SinkContext, max_bytes: int, max_ahead: int | None = None
    ) -> None:
        self._topic = sink.topic
        key_serde, value_serde = serde(sink.key_serde), serde(sink.value_serde)
        self._key = key_serde.dumps
        self._value = value_serde.dumps
        self._position = ctx.source_position if sink.lineage else None
        self._max_bytes = max_bytes
        self._event_time = ctx.event_time
        self._guard = _future_guard(sink.topic, max_ahead)
        self.row: Callable[[Any], Row] = (
            self._lineage_row
            if self._position is not None
            else _rows(
                self._key,
                self._value,
                str_key=type(key_serde) is StrSerde,
                str_value=type(value_serde) is StrSerde,
                event_time=self._event_time,
                max_bytes=max_bytes,
                check=self.check_size,
                guard=self._guard,
            )
        )

    def _lineage_row(self, value: Any) -> Row:
        kdata, data, headers = self._encode(value)
        event_time = self._event_time
        row = (kdata, data, headers, 0 if event_time is None else event_time() or 0)
        if self._guard is not None:
            self._guard(row[3])
        # len() of both is cheap; only a row near the limit is sized exactly (the
        # only headers, lineage, are a few hundred bytes at most).
        if len(data or b"") + len(kdata or b"") + 1024 > self._max_bytes:
            self.check_size(kdata, data, headers)
        return row

    def check_size(self, kdata: bytes | None, data: bytes | None, headers: Headers | None) -> None:
        """Raise `RecordTooLargeError` if the record is larger than the limit."""
        size = record_bytes(kdata, data, headers or ())
        if size > self._max_bytes:
            raise RecordTooLargeError(
                f"output record of {size} bytes (key, value and headers) cannot be written "
                f"to {self._topic}: it takes records of at most {self._max_bytes} bytes",
                key=kdata,
                value=data or b"",
            )

    def _encode(self, value: Any) -> tuple[bytes | None, bytes | None, Headers | None]:
        if isinstance(value, tuple) and len(value) == 2:
            key, val = value
            kdata = None if key is None else self._key(key)
        else:
            kdata, val = None, value
        if self._position is None:
            return (kdata, self._value(val), None)
        headers: Headers | None = None
        where = self._position()
        if where is not None:
            topic, partition, offset = where
            headers = [
                (LINEAGE_HEADERS[0], topic.encode()),
                (LINEAGE_HEADERS[1], str(partition).encode()),
                (LINEAGE_HEADERS[2], str(offset).encode()),
            ]
        return (kdata, self._value(val), headers)


def _rows(
    kdumps: Callable[[Any], bytes | None],
    vdumps: Callable[[Any], bytes | None],
    *,
    str_key: bool,
    str_value: bool,
    event_time: Callable[[], int | None] | None,
    max_bytes: int,
    check: Callable[[bytes | None, bytes | None, Headers | None], None],
    guard: Callable[[int], None] | None = None,
) -> Callable[[Any], Row]:
    """`Encoder.row` without lineage, as one closure (see `Encoder`)."""

    def row(value: Any) -> Row:
        if isinstance(value, tuple) and len(value) == 2:
            key, val = value
            kdata: bytes | None
            if key is None:
                kdata = None
            elif str_key and type(key) is str:
                kdata = key.encode()
            else:
                kdata = kdumps(key)
        else:
            kdata, val = None, value
        if str_value and type(val) is str:
            data: bytes | None = val.encode()
        elif str_value and type(val) is int:
            data = str(val).encode()
        else:
            data = vdumps(val)
        # len() of both is cheap; only a row near the limit is sized exactly.
        if len(data or b"") + len(kdata or b"") + 1024 > max_bytes:
            check(kdata, data, None)
        if event_time is None:
            return (kdata, data, None, 0)
        ts = event_time() or 0
        if guard is not None:
            guard(ts)
        return (kdata, data, None, ts)

    return row
