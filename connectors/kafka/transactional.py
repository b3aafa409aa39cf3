"""Kafka source and sink.

`KafkaSource` reads a user topic; the runtime assigns its partitions statically
to source subtasks (partition p goes to subtask p % parallelism) and keeps the
offsets in checkpoints, never in consumer-group commits.

`KafkaSink` writes results to a user topic. Values may be ``(key, value)``
pairs or plain values (key None). Its writer follows the job's guarantee; the
exactly-once writer (`TransactionalWriter`) is the two-phase commit of the
checkpoint protocol, described in docs/architecture.md.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from kstream.dataflow.job import Sink, Source, StartPosition, Timestamps
from kstream.dataflow.serde import Serde, StrSerde, serde
from kstream.errors import (
    ConfigurationError,
    KafkaUnavailableError,
    ProducerFencedError,
    ProtocolError,
    RecordTooLargeError,
    TimestampError,
    TransactionExpiredError,
)
from kstream.infra.admin import Admin
from kstream.protocol.limits import (
    INTERNAL_TOPIC_MAX_BYTES,
    MAX_MESSAGE_BYTES,
    producer_limit,
    record_bytes,
)
from kstream.protocol.names import (
    LINEAGE_HEADERS,
    commit_topic,
    marker_reader_group,
    sink_transactional_id,
    slot_transactional_id,
)
from kstream.protocol.twophase import EpochLedger, Resume, Wait
from kstream.protocol.watermarks import (
    DEFAULT_IDLE_TIMEOUT_MS,
    DEFAULT_MAX_FUTURE_MS,
    DEFAULT_OUT_OF_ORDERNESS_MS,
    WatermarkConfig,
)
from kstream.runtime.kafka import (
    BATCHING,
    MANUAL_OFFSETS,
    READ_COMMITTED,
    TXN_TIMEOUT_S,
    client_config,
    connect,
    flush,
    produce,
    request,
    transact,
)
from kstream.runtime.sink import SinkContext, SinkSnapshot, SinkWriter

__all__ = ["LINEAGE_HEADERS", "KafkaSink", "KafkaSource", "TransactionalWriter"]

log = logging.getLogger("kstream.sink.kafka")

#: Transactional producers per sink subtask: one epoch may wait for its commit
#: while the next is written, with one spare for a checkpoint completing late.
POOL_SIZE = 3
#: Bound on aborting open transactions when a subtask closes.
CLOSE_TIMEOUT_S = 10.0
#: Commit markers read at once when a recovery looks for the newest committed one
#: (then 4x as many further back, until one is found).
MARKER_WINDOW = 256
#: How long one read of the marker partition may wait. A batch read returns only
#: when full or at its timeout (the partition's end does not cut it short), and a
#: recovery waits for this read (a one-second wait cost every recovery a second).
MARKER_POLL_S = 0.05
#: Warn when a pending transaction has used this share of its timeout.
WARN_FRACTION = 0.5

#: How long a flush at a checkpoint may take before the checkpoint is declined.
FLUSH_TIMEOUT_S = 60.0
#: How long an exactly-once sink's producer gathers records before sending a
#: batch. Its records become visible only when their transaction commits (once
#: per checkpoint), and the checkpoint's flush sends what is left at once, so
#: waiting longer than `BATCHING`'s 5 ms delays no output; it makes fewer,
#: larger produce requests, which cost the broker and the producer CPU per request.
SINK_LINGER_MS = 50


@dataclass(frozen=True)
class KafkaSource(Source):
    """Read `topic`, decoding values with `value_serde` (`str`, `bytes`, `json` or a Serde).

    `start` applies when there is no checkpoint to restore: from the earliest
    retained record or from the end.

    `timestamps` gives the records event time: ``"kafka"`` (each record's
    Kafka timestamp), a function of the decoded value returning an int of
    milliseconds (a float is refused), or None (no event time). Watermarks
    then trail each partition's largest timestamp by `out_of_orderness_ms`; a
    partition silent for `idle_timeout_ms` of processing time stops holding
    them back; a record without a usable timestamp, or more than
    `max_future_ms` ahead of its partition's watermark (a partition's first
    record: ahead of the wall clock), is a record error (`TimestampError`).

    `snapshot_every` (seconds): each subtask of the source starts a snapshot
    of the whole job itself at that interval, besides the coordinator's
    checkpoints (docs/architecture.md, "Snapshot ids").
    """

    topic: str
    value_serde: str | Serde = "str"
    start: StartPosition = "earliest"
    timestamps: Timestamps = None
    out_of_orderness_ms: int = DEFAULT_OUT_OF_ORDERNESS_MS
    idle_timeout_ms: int = DEFAULT_IDLE_TIMEOUT_MS
    max_future_ms: int = DEFAULT_MAX_FUTURE_MS
    snapshot_every: float | None = None

    def __post_init__(self) -> None:
        every = self.snapshot_every
        if every is not None and (
            isinstance(every, bool) or not (isinstance(every, int | float) and 0 < every < math.inf)
        ):
            raise ConfigurationError(
                f"snapshot_every must be a positive number of seconds or None, got {every!r}"
            )
        ts = self.timestamps
        if ts is not None and ts != "kafka" and not callable(ts):
            raise ConfigurationError(
                f"timestamps must be 'kafka', a function of the value or None, "
                f"got {self.timestamps!r}"
            )
        self.watermark_config()  # validates the durations

    def watermark_config(self) -> WatermarkConfig:
        return WatermarkConfig(self.out_of_orderness_ms, self.idle_timeout_ms, self.max_future_ms)

    @property
    def name(self) -> str:
        return f"kafka:{self.topic}"

    @property
    def serde(self) -> Serde:
        return serde(self.value_serde)

    def partitions(self, bootstrap: str) -> int:
        n = Admin(bootstrap).partitions(self.topic)
        if n is None:
            raise ConfigurationError(
                f"input topic {self.topic!r} does not exist on {bootstrap}; create it first"
            )
        return n


@dataclass(frozen=True)
class KafkaSink(Sink):
    """Write results to `topic` with key/value serdes (`str` by default).

    A result that is a 2-tuple is a (key, value) pair; anything else is a value
    without a key. The `str` serde writes text, bytes, numbers and values with
    their own ``__str__``; a dict, list, other tuple or set has no text form and
    is a record error (a dead letter by default) naming ``value_serde="json"``.

    The job's guarantee picks the writer: exactly-once (transactions, the
    default), at-least-once (flush at each checkpoint, replays after a
    recovery) or at-most-once (no flush, no replay).

    With `lineage=True` every output carries the position of the source record
    behind it in the `LINEAGE_HEADERS` (topic, partition, offset as decimal
    text), which `kstream audit --check lineage` verifies. Lineage needs the sink
    in its source's stage (no `key_by` before it): positions do not cross channels.
    """

    topic: str
    key_serde: str | Serde = "str"
    value_serde: str | Serde = "str"
    lineage: bool = False

    @property
    def name(self) -> str:
        return f"kafka:{self.topic}"

    def topics(self) -> tuple[str, ...]:
        return (self.topic,)

    def check(self, bootstrap: str) -> None:
        if Admin(bootstrap).partitions(self.topic) is None:
            raise ConfigurationError(
                f"output topic {self.topic!r} does not exist on {bootstrap}; create it first, "
                "or run with --create-topics"
            )

    def open(self, ctx: SinkContext) -> SinkWriter:
        if self.lineage and ctx.source_position is None:
            raise ConfigurationError(
                f"sink {self.topic!r}: lineage=True needs the sink in its source's stage "
                "(no key_by or rebalance before it)"
            )
        if ctx.guarantee == "exactly-once":
            return TransactionalWriter(self, ctx)
        return _PlainWriter(self, ctx, flush=ctx.guarantee == "at-least-once")


#: Kafka record headers, as confluent-kafka takes them.
Headers = list[tuple[str, str | bytes | None]]
#: One serialized output: key, value, headers (None without lineage) and its
#: Kafka timestamp (the result's event time on a stage with event time, else 0:
#: the producer's clock).
Row = tuple[bytes | None, bytes | None, Headers | None, int]


def _produce_row(producer: Producer, topic: str, row: Sequence[Any]) -> None:
    """Produce `row` (a `Row`, or a 3-tuple kept by a snapshot taken before timestamps)."""
    produce(
        producer, topic, row[1], row[0], headers=row[2], timestamp=row[3] if len(row) > 3 else 0
    )


def _produce_output(producer: Producer, topic: str, row: Row) -> None:
    """`_produce_row` with the common case inlined: no headers, the producer's timestamp.

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
    _produce_row(producer, topic, row)


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


class _Encoder:
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
        self, sink: KafkaSink, ctx: SinkContext, max_bytes: int, max_ahead: int | None = None
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
    """`_Encoder.row` without lineage, as one closure (see `_Encoder`)."""

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


class _PlainWriter(SinkWriter):
    """At-least-once (flush at each checkpoint) or at-most-once (never wait).

    Writes through the worker's shared idempotent producer, whose delivery
    errors the worker collects (`SinkContext.raise_if_undelivered`).
    """

    def __init__(self, sink: KafkaSink, ctx: SinkContext, *, flush: bool) -> None:
        self._topic = sink.topic
        self._row = _Encoder(sink, ctx, ctx.max_record_bytes, max_ahead_ms(ctx, sink.topic)).row
        self._producer = ctx.producer
        self._flush = flush
        self._raise_if_undelivered = ctx.raise_if_undelivered
        self.handed: int = 0

    def write(self, value: Any) -> None:
        self.handed += 1
        _produce_output(self._producer, self._topic, self._row(value))

    def pre_commit(self, epoch: int) -> SinkSnapshot:
        if self._flush:
            flush(self._producer, FLUSH_TIMEOUT_S, f"sink {self._topic}")
            self._raise_if_undelivered()
        return SinkSnapshot()


#: While an epoch's records are held back (see `TransactionalWriter`), whether the
#: previous epoch is delivered is asked once per this many records: asking costs
#: about as much as processing a record.
HELD_CHECK_EVERY = 64


class TransactionalWriter(SinkWriter):
    """Exactly-once Kafka output: one Kafka transaction per checkpoint epoch.

    The protocol (which slot, what to commit, what to replay) is decided by
    `kstream.protocol.twophase.EpochLedger`; this class does the Kafka I/O:

    * each epoch's records go into a transaction on one of `POOL_SIZE`
      producers (transactional ids ``kstream.<job>.<task>.<topic>.<slot>``), so
      epoch n+1 is written while epoch n waits for its checkpoint to complete,
      its records held back until epoch n's are acknowledged, so that no
      record of epoch n+1 lands before one of epoch n in a partition (two
      producers' batches race; per-key order and marker order depend on this);
    * `pre_commit(n)` writes epoch n's commit marker into the job's commit
      topic *in the same transaction*, flushes, and returns the records of
      every sealed, uncommitted epoch (the write-ahead copy the snapshot keeps);
    * `commit(n)` commits the transactions of all sealed epochs <= n;
    * `recover(n, kept)` fences every slot (`init_transactions` aborts what a
      crashed predecessor left open), reads this subtask's newest committed
      marker and re-publishes each kept epoch after it, so an epoch is committed
      exactly once even if the crash came after checkpoint n completed and
      before its commit.
    """

    def __init__(self, sink: KafkaSink, ctx: SinkContext) -> None:
        self._topic = sink.topic
        self._ctx = ctx
        self._tid = sink_transactional_id(ctx.job, ctx.task, sink.topic)
        self._marker_topic = commit_topic(ctx.job)
        # These producers write only the output topic and the commit markers: their
        # records may be as large as the output topic takes (`kstream.protocol.limits`).
        limits = {
            t: int(v)
            for t, v in Admin(ctx.bootstrap)
            .topic_config([sink.topic, self._marker_topic], MAX_MESSAGE_BYTES)
            .items()
        }
        self._max_bytes = producer_limit([limits.get(sink.topic, INTERNAL_TOPIC_MAX_BYTES)])
        self._marker_max_bytes = producer_limit(
            [limits.get(self._marker_topic, INTERNAL_TOPIC_MAX_BYTES)]
        )
        self._row = _Encoder(sink, ctx, self._max_bytes, max_ahead_ms(ctx, sink.topic)).row
        self._producers: dict[int, Producer] = {}
        self._ledger = EpochLedger(POOL_SIZE)
        #: The open epoch's producer and records (None: no transaction open).
        self._open: Producer | None = None
        self._rows: list[Row] = []
        self._began = 0.0
        #: The producer of the newest sealed epoch while its records may still be in
        #: flight; the open epoch's records are held back until it has delivered them.
        self._previous: Producer | None = None
        #: Sealed epochs' records (write-ahead copies) and when their transaction began.
        self._sealed: dict[int, tuple[list[Row], float]] = {}
        self._warned: set[int] = set()
        #: Offsets of this subtask's markers by epoch, from their delivery reports
        #: (served on the upload thread too: single dict stores, safe under the GIL).
        self._marker_offsets: dict[int, int] = {}
        #: The offset of the newest marker known to be committed: every marker
        #: before it can be purged (docs/architecture.md §6, "Bounded internal topics").
        self._committed_marker: int | None = None
        self.handed: int = 0

    # -- producers ----------------------------------------------------------

    def _producer(self, slot: int) -> Producer:
        producer = self._producers.get(slot)
        if producer is None:
            producer = self._producers[slot] = self._fenced_producer(slot)
        return producer

    def _fenced_producer(self, slot: int) -> Producer:
        """A new producer of `slot`, its transactions initialised (thread-safe)."""
        producer = Producer(
            client_config(
                self._ctx.bootstrap,
                BATCHING,
                {
                    "linger.ms": SINK_LINGER_MS,
                    "transactional.id": slot_transactional_id(self._tid, slot),
                    "transaction.timeout.ms": self._ctx.transaction_timeout_ms,
                    "message.max.bytes": self._max_bytes,
                    # Markers learn their offset from their delivery report; records
                    # without a callback of their own cost no Python call for theirs.
                    "delivery.report.only.error": False,
                },
            )
        )
        connect(producer, self._topic)
        # Fences any earlier producer with this id and aborts its open transaction.
        transact(producer.init_transactions, "init_transactions")
        return producer

    def _fence_all(self) -> None:
        """Open and fence every slot's producer, all at once.

        Each `init_transactions` waits for the broker to abort what a crashed
        predecessor left open, most of a recovery's sink time; the slots'
        waits overlap (librdkafka releases the GIL). Returns once every slot
        is fenced, or raises the first failure.
        """
        missing = [s for s in range(POOL_SIZE) if s not in self._producers]
        if not missing:
            return
        with ThreadPoolExecutor(len(missing), thread_name_prefix="fence") as pool:
            futures = {s: pool.submit(self._fenced_producer, s) for s in missing}
        failed: BaseException | None = None
        for slot, future in futures.items():
            exc = future.exception()
            if exc is None:
                self._producers[slot] = future.result()
            else:
                failed = failed or exc
        if failed is not None:
            raise failed

    def _marker(self, producer: Producer, epoch: int) -> None:
        value = json.dumps({"epoch": epoch, "generation": self._ctx.generation}).encode()
        key = self._tid.encode()
        # Tens of bytes plus the names of job, subtask and topic; never near a limit
        # unless those names are absurd, and then say so rather than fail the commit.
        if record_bytes(key, value) > min(self._marker_max_bytes, self._max_bytes):
            raise ConfigurationError(
                f"the commit marker of {self._tid} ({record_bytes(key, value)} bytes) exceeds "
                f"what {self._marker_topic} takes; shorten the job or topic name"
            )

        def delivered(err: KafkaError | None, msg: Message) -> None:
            if err is None and msg.offset() is not None:
                self._marker_offsets[epoch] = msg.offset() or 0

        produce(
            producer,
            self._marker_topic,
            value,
            key,
            self._ctx.marker_partition,
            kind="markers",
            on_delivery=delivered,
        )

    def _marker_committed(self, epoch: int) -> None:
        """Epoch `epoch`'s transaction committed: its marker is the newest committed one."""
        offset = self._marker_offsets.pop(epoch, None)
        if offset is not None:
            self._committed_marker = max(offset, self._committed_marker or 0)
        for e in [e for e in self._marker_offsets if e < epoch]:
            del self._marker_offsets[e]

    # -- the protocol -------------------------------------------------------

    def write(self, value: Any) -> None:
        self.handed += 1
        row = self._row(value)  # sized first: a too-large row never enters a transaction
        producer = self._open or self._begin()
        self._rows.append(row)
        if self._previous is None:
            # `_produce_output` inlined: this runs once per output.
            if row[2] is None and not row[3]:
                try:
                    producer.produce(self._topic, row[1], row[0])
                    return
                except (BufferError, KafkaException):
                    pass  # enqueued nothing: the general path waits for room or names the error
            _produce_row(producer, self._topic, row)
        elif not len(self._rows) % HELD_CHECK_EVERY and self._delivered(self._previous):
            self._release(producer)
        # Otherwise the row is held in `_rows` (the write-ahead copy holds it anyway).

    def _delivered(self, producer: Producer) -> bool:
        """Whether every record `producer` was given is acknowledged (non-blocking)."""
        producer.poll(0)  # serve delivery reports: until then they count as pending
        return len(producer) == 0

    def _release(self, producer: Producer) -> None:
        """Produce the rows held back while the previous epoch was in flight."""
        self._previous = None
        for row in self._rows:
            _produce_output(producer, self._topic, row)

    def _begin(self) -> Producer:
        action = self._ledger.write()
        while isinstance(action, Wait):
            # Every slot holds a sealed epoch: serve completions until one commits,
            # or aborts until the newest one's transaction may go on (`Resume`).
            self._ctx.pump()
            action = self._ledger.write()
        if action is None:
            raise ProtocolError(f"{self._tid}: a transaction is open but no producer holds it")
        producer = self._producer(action.slot)
        if isinstance(action, Resume):
            # The newest sealed epoch's checkpoint failed, and every slot is taken:
            # this epoch goes on in its transaction, which is still open (and began
            # then: its age counts towards the transaction timeout from there).
            resumed = max(self._sealed)
            self._began = self._sealed[resumed][1]
            log.debug(
                "%s: checkpoints keep failing; epoch %d's transaction goes on with the next",
                self._tid,
                resumed,
            )
            # Its rows are held until the sealed epoch's records are delivered, as
            # with another producer (`_previous`): the snapshot's flush of that epoch
            # must not wait for this one's records too.
            self._open = producer
            return producer
        producer.begin_transaction()
        self._open, self._began = producer, time.monotonic()
        return producer

    def pre_commit(self, epoch: int) -> SinkSnapshot:
        producer = self._open
        finish = None
        if self._ledger.pre_commit(epoch) is not None and producer is not None:
            if self._previous is not None:
                # This epoch's rows are still held: the previous epoch must be in the
                # log before them and before this epoch's marker.
                self._await_delivery(self._previous)
                self._release(producer)
            self._marker(producer, epoch)
            self._sealed[epoch] = (self._rows, self._began)
            self._open, self._rows = None, []
            # The next epoch writes to another producer, so waiting for this one's
            # acknowledgements can leave the processing thread: the ack waits for it.
            finish = functools.partial(self._await_delivery, producer)
            # But the next epoch's records must not overtake this one's in a
            # partition (per-key order): they are held until this one is delivered.
            self._previous = producer
        self._warn_if_old()
        meta: dict[str, Any] = {"pending": sorted(self._sealed)}
        if self._committed_marker is not None:
            meta["marker"] = [self._ctx.marker_partition, self._committed_marker]
        return SinkSnapshot(
            meta=meta,
            payload={e: rows for e, (rows, _) in self._sealed.items()} or None,
            finish=finish,
        )

    def _await_delivery(self, producer: Producer) -> None:
        flush(producer, FLUSH_TIMEOUT_S, f"sink {self._topic}")

    def commit(self, epoch: int) -> None:
        for action in self._ledger.complete(epoch):
            try:
                transact(self._producers[action.slot].commit_transaction, "commit")
            except ProducerFencedError:
                self._raise_if_expired(action.epoch)
                raise
            for e in (*action.earlier, action.epoch):
                del self._sealed[e]
                self._warned.discard(e)
                self._marker_committed(e)

    def _raise_if_expired(self, epoch: int) -> None:
        """Tell an expired transaction from a takeover: by its age.

        The broker aborts a transaction older than ``transaction.timeout.ms`` and
        bumps the producer's epoch, so the commit fails as if fenced. Re-publishing
        here would be wrong if a newer process really took over (it re-publishes
        the epoch itself); the rollback is right in both cases, and the message
        says which one this was.
        """
        _, began = self._sealed[epoch]
        age = time.monotonic() - began
        limit = self._ctx.transaction_timeout_ms / 1000
        if age >= limit:
            raise TransactionExpiredError(
                f"{self._tid}: the broker aborted the transaction of epoch {epoch} after "
                f"{age:.0f}s (transaction.timeout.ms is {limit:.0f}s); the job rolls back and "
                "re-publishes the epoch from the restored checkpoint's write-ahead copy"
            ) from None

    def abort(self, epoch: int) -> None:
        self._ledger.abort(epoch)
        if epoch in self._sealed:
            log.info("%s: checkpoint %d failed; its epoch waits for the next one", self._tid, epoch)

    def recover(self, epoch: int | None, kept: SinkSnapshot | None) -> None:
        self._fence_all()  # fence zombies, abort what they left open, before reading markers
        epochs: dict[int, list[Row]] = kept.payload if kept is not None and kept.payload else {}
        last = self._last_committed() if epochs else 0
        for action in self._ledger.recover(epoch, epochs, last):
            rows = epochs[action.epoch]
            producer = self._producers[0]
            producer.begin_transaction()
            for row in rows:
                _produce_row(producer, self._topic, row)
            self._marker(producer, action.epoch)
            transact(producer.commit_transaction, "commit")
            self._marker_committed(action.epoch)
            log.info(
                "%s: re-published epoch %d (%d records) after recovery",
                self._tid,
                action.epoch,
                len(rows),
            )

    def _last_committed(self) -> int:
        """The newest epoch whose commit marker is committed in this subtask's partition.

        Markers are written in epoch order (an epoch's marker waits until the
        previous epoch is acknowledged, see `write`, and a recovery re-publishes
        only epochs newer than any committed one), so the
        newest committed marker is the last committed one in the partition: read
        windows backwards from the end until one holds a committed marker, rather
        than the whole history of a long-running job.
        """
        consumer = Consumer(
            client_config(
                self._ctx.bootstrap,
                MANUAL_OFFSETS,
                READ_COMMITTED,
                {
                    "group.id": marker_reader_group(self._tid),
                    "enable.partition.eof": True,
                    # A purge may move the log start past a window after `low` was read
                    # (the runner purges on its own clock): go on from the new log start,
                    # where the newest committed marker still is, not from the end.
                    "auto.offset.reset": "earliest",
                },
            )
        )
        tp = TopicPartition(self._marker_topic, self._ctx.marker_partition)
        connect(consumer, tp.topic)
        try:
            low, end = request(
                lambda: consumer.get_watermark_offsets(tp, timeout=TXN_TIMEOUT_S, cached=False),
                f"cannot read the end of {tp.topic}[{tp.partition}]",
            )
            window = MARKER_WINDOW
            while end > low:
                start = max(low, end - window)
                last, offset = self._newest_marker(consumer, tp, start, end)
                if last:
                    self._committed_marker = offset
                    return last
                end, window = start, window * 4
            return 0
        finally:
            consumer.close()

    def _newest_marker(
        self, consumer: Consumer, tp: TopicPartition, start: int, end: int
    ) -> tuple[int, int]:
        """The newest epoch among this subtask's committed markers at offsets [start, end),
        and its marker's offset ((0, 0): none)."""
        # Only this subtask writes the partition, and every slot was just fenced,
        # so the last stable offset is the end: this read cannot stall.
        consumer.assign([TopicPartition(tp.topic, tp.partition, start)])
        key = self._tid.encode()
        last = at = 0
        deadline = time.monotonic() + TXN_TIMEOUT_S
        while time.monotonic() < deadline:
            for m in consumer.consume(500, MARKER_POLL_S):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        return last, at
                    continue
                if (m.offset() or 0) >= end:
                    return last, at
                if m.key() == key:
                    where = f"{m.topic()}[{m.partition()}]@{m.offset()}"
                    epoch = marker_epoch(m.value(), where)
                    if epoch >= last:
                        last, at = epoch, m.offset() or 0
        raise KafkaUnavailableError(
            f"cannot read {tp.topic}[{tp.partition}] within {TXN_TIMEOUT_S:.0f}s"
        )

    def _warn_if_old(self) -> None:
        limit = self._ctx.transaction_timeout_ms / 1000
        now = time.monotonic()
        for e, (_, began) in self._sealed.items():
            if now - began > WARN_FRACTION * limit and e not in self._warned:
                self._warned.add(e)
                log.warning(
                    "%s: the transaction of epoch %d is %.0fs old, near transaction.timeout.ms "
                    "(%.0fs): if it expires before checkpoint %d completes the broker aborts it",
                    self._tid,
                    e,
                    now - began,
                    limit,
                    e,
                )

    def close(self) -> None:
        # Open transactions would hold back read_committed readers of the topic
        # until they time out. Aborting them is safe: an epoch whose checkpoint
        # completed is re-published from its write-ahead copy at the next start.
        slots = set(self._ledger.sealed.values())
        if self._ledger.open_slot is not None:
            slots.add(self._ledger.open_slot)
        for slot in slots:
            try:
                self._producers[slot].abort_transaction(CLOSE_TIMEOUT_S)
            except KafkaException as exc:
                log.info("%s: abort on close failed (a successor fences it): %s", self._tid, exc)
        self._producers.clear()


def marker_epoch(value: bytes | None, where: str) -> int:
    """The epoch commit marker `value` (at `where`) names; `ProtocolError` if it is not one."""
    try:
        body = json.loads(value or b"{}")
        epoch = body.get("epoch", 0) if isinstance(body, dict) else None
    except (ValueError, RecursionError):
        epoch = None
    if type(epoch) is not int or epoch < 0:
        raise ProtocolError(
            f"commit marker {where} is malformed ({(value or b'')[:100]!r}):"
            " the marker topic is written only by kstream"
        )
    return epoch
