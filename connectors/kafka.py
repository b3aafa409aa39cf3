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

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from kstream.admin import Admin
from kstream.errors import ConfigurationError, KafkaUnavailableError
from kstream.serde import Serde, serde
from kstream.sink import SinkContext, SinkSnapshot, SinkWriter

__all__ = ["LINEAGE_HEADERS", "KafkaSink", "KafkaSource", "TransactionalWriter"]

log = logging.getLogger("kstream.sink.kafka")

#: Transactional producers per sink subtask: one epoch may wait for its commit
#: while the next is written, with one spare for a checkpoint completing late.
POOL_SIZE = 3
#: Bound on one transactional call (init, commit) against a healthy broker.
TXN_TIMEOUT_S = 60.0
#: Bound on aborting open transactions when a subtask closes.
CLOSE_TIMEOUT_S = 10.0
#: Warn when a pending transaction has used this share of its timeout.
WARN_FRACTION = 0.5

#: Headers naming the source record behind an output (when `lineage=True`).
LINEAGE_HEADERS = ("kstream.src.topic", "kstream.src.partition", "kstream.src.offset")
#: How long a flush at a checkpoint may take before the checkpoint is declined.
FLUSH_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class KafkaSource:
    """Read `topic`, decoding values with `value_serde` (`str`, `bytes`, `json` or a Serde).

    `start` applies when there is no checkpoint to restore: from the earliest
    retained record or from the end.
    """

    topic: str
    value_serde: str | Serde = "str"
    start: Literal["earliest", "latest"] = "earliest"

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
class KafkaSink:
    """Write results to `topic` with key/value serdes (`str` by default).

    The job's guarantee picks the writer: exactly-once (transactions, the
    default), at-least-once (flush at each checkpoint, replays after a
    recovery) or at-most-once (no flush, no replay). With `lineage=True` every
    output carries the source position of the record behind it (exactly-once
    and at-least-once only), in the `LINEAGE_HEADERS`.
    """

    topic: str
    key_serde: str | Serde = "str"
    value_serde: str | Serde = "str"

    @property
    def name(self) -> str:
        return f"kafka:{self.topic}"

    def check(self, bootstrap: str) -> None:
        if Admin(bootstrap).partitions(self.topic) is None:
            raise ConfigurationError(
                f"output topic {self.topic!r} does not exist on {bootstrap}; create it first"
            )

    def open(self, ctx: SinkContext) -> SinkWriter:
        if ctx.guarantee == "exactly-once":
            return TransactionalWriter(self, ctx)
        return _PlainWriter(self, ctx.producer, flush=ctx.guarantee == "at-least-once")


def _split(value: Any) -> tuple[Any, Any]:
    if isinstance(value, tuple) and len(value) == 2:
        return value[0], value[1]
    return None, value


class _PlainWriter(SinkWriter):
    """At-least-once (flush at each checkpoint) or at-most-once (never wait)."""

    def __init__(self, sink: KafkaSink, producer: Producer, *, flush: bool) -> None:
        self._topic = sink.topic
        self._key = serde(sink.key_serde)
        self._value = serde(sink.value_serde)
        self._producer = producer
        self._flush = flush
        self._errors: list[KafkaError] = []

    def _on_delivery(self, err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            self._errors.append(err)

    def write(self, value: Any) -> None:
        key, val = _split(value)
        data = self._value.dumps(val)
        kdata = None if key is None else self._key.dumps(key)
        while True:
            try:
                self._producer.produce(self._topic, data, kdata, on_delivery=self._on_delivery)
                return
            except BufferError:
                self._producer.poll(0.05)  # local queue full: serve deliveries

    def pre_commit(self, epoch: int) -> SinkSnapshot:
        if self._flush and self._producer.flush(FLUSH_TIMEOUT_S):
            raise KafkaUnavailableError(f"sink {self._topic}: deliveries pending after flush")
        if self._errors:
            err = self._errors[0]
            self._errors.clear()
            raise KafkaUnavailableError(f"sink {self._topic}: delivery failed: {err.str()}")
        return SinkSnapshot()


@dataclass
class _Epoch:
    """A pre-committed epoch: its producer slot and its write-ahead records."""

    slot: int
    records: list[tuple[bytes | None, bytes | None]]
    began: float


class TransactionalWriter(SinkWriter):
    """Exactly-once Kafka output: one Kafka transaction per checkpoint epoch.

    * Epoch n's records go into a transaction on one of a small pool of
      producers (transactional ids ``kstream.<job>.<task>.<sink>.<slot>``), so
      epoch n+1 can start while n waits for the checkpoint to complete.
    * `pre_commit(n)` adds a commit marker (epoch n) for this sink subtask to
      the job's commit topic *in the same transaction*, flushes, and returns
      the records of every epoch not yet committed (write-ahead copy).
    * `commit(n)` commits the transactions of all pre-committed epochs <= n.
    * `recover(n, kept)` fences every slot (`init_transactions` aborts what a
      crashed predecessor left open), reads this subtask's last committed
      marker, and re-produces each kept epoch newer than it in a fresh
      transaction with its marker. So an epoch is committed exactly once even
      if the crash came after checkpoint n completed and before its commit.
    """

    def __init__(self, sink: KafkaSink, ctx: SinkContext) -> None:
        self._topic = sink.topic
        self._key = serde(sink.key_serde)
        self._value = serde(sink.value_serde)
        self._ctx = ctx
        self._tid = f"kstream.{ctx.job}.{ctx.task}.{sink.topic}"
        self._marker_topic = f"kstream.{ctx.job}.commits"
        self._producers: dict[int, Producer] = {}
        self._pending: dict[int, _Epoch] = {}
        self._slot: int | None = None
        self._records: list[tuple[bytes | None, bytes | None]] = []
        self._began = 0.0
        self._warned: set[int] = set()

    # -- producers ----------------------------------------------------------

    def _producer(self, slot: int) -> Producer:
        producer = self._producers.get(slot)
        if producer is None:
            producer = Producer(
                {
                    "bootstrap.servers": self._ctx.bootstrap,
                    "transactional.id": f"{self._tid}.{slot}",
                    "transaction.timeout.ms": self._ctx.transaction_timeout_ms,
                    "linger.ms": 5,
                    "batch.size": 1_000_000,
                    "compression.type": "lz4",
                    "queue.buffering.max.messages": 1_000_000,
                    "delivery.report.only.error": True,
                    "log_level": 0,
                }
            )
            # Fences any earlier producer with this id and aborts its open transaction.
            _retry(producer.init_transactions, "init_transactions")
            self._producers[slot] = producer
        return producer

    def _free_slot(self) -> int:
        busy = {e.slot for e in self._pending.values()}
        while True:
            for slot in range(POOL_SIZE):
                if slot not in busy:
                    return slot
            # Every slot holds a pre-committed epoch: wait for a checkpoint to complete.
            self._ctx.pump()
            busy = {e.slot for e in self._pending.values()}

    # -- the protocol -------------------------------------------------------

    def write(self, value: Any) -> None:
        if self._slot is None:
            self._slot = self._free_slot()
            self._producer(self._slot).begin_transaction()
            self._began = time.monotonic()
        key, val = _split(value)
        kdata = None if key is None else self._key.dumps(key)
        data = self._value.dumps(val)
        self._records.append((kdata, data))
        producer = self._producers[self._slot]
        while True:
            try:
                producer.produce(self._topic, data, kdata)
                return
            except BufferError:
                producer.poll(0.05)  # local queue full: serve deliveries

    def pre_commit(self, epoch: int) -> SinkSnapshot:
        if self._slot is not None:
            # Empty epochs open no transaction: there is nothing to commit.
            producer = self._producers[self._slot]
            producer.produce(
                self._marker_topic,
                json.dumps({"epoch": epoch, "generation": self._ctx.generation}).encode(),
                self._tid.encode(),
                partition=self._ctx.marker_partition,
            )
            if producer.flush(FLUSH_TIMEOUT_S):
                raise KafkaUnavailableError(f"sink {self._topic}: deliveries pending after flush")
            self._pending[epoch] = _Epoch(self._slot, self._records, self._began)
            self._slot = None
            self._records = []
        self._warn_if_old()
        return SinkSnapshot(
            meta={"pending": sorted(self._pending)},
            payload={e: p.records for e, p in self._pending.items()} or None,
        )

    def commit(self, epoch: int) -> None:
        for e in sorted(e for e in self._pending if e <= epoch):
            slot = self._pending[e].slot
            producer = self._producers[slot]
            _retry(producer.commit_transaction, "commit")
            del self._pending[e]

    def abort(self, epoch: int) -> None:
        # Checkpoint `epoch` failed, but the job goes on: the state already holds the
        # epoch's effects, so its output must not be dropped. It stays pending and is
        # committed with the next checkpoint that completes. Transactions that a
        # rollback discards are aborted by `recover` (fencing), not here.
        if epoch in self._pending:
            log.info("%s: checkpoint %d failed; its epoch waits for the next one", self._tid, epoch)

    def recover(self, epoch: int | None, kept: SinkSnapshot | None) -> None:
        for slot in range(POOL_SIZE):
            self._producer(slot)  # fence zombies, abort what they left open
        epochs: dict[int, list[tuple[bytes | None, bytes | None]]] = (
            kept.payload if kept is not None and kept.payload else {}
        )
        if not epochs:
            return
        last = self._last_committed()
        for e in sorted(epochs):
            if e <= last:
                continue
            if epoch is not None and e > epoch:
                continue  # not part of the restored checkpoint: regenerated by replay
            producer = self._producer(0)
            producer.begin_transaction()
            for kdata, data in epochs[e]:
                while True:
                    try:
                        producer.produce(self._topic, data, kdata)
                        break
                    except BufferError:
                        producer.poll(0.05)
            producer.produce(
                self._marker_topic,
                json.dumps({"epoch": e, "generation": self._ctx.generation}).encode(),
                self._tid.encode(),
                partition=self._ctx.marker_partition,
            )
            _retry(producer.commit_transaction, "commit")
            log.info(
                "%s: re-committed epoch %d (%d records) after recovery",
                self._tid,
                e,
                len(epochs[e]),
            )

    def _last_committed(self) -> int:
        """The newest epoch whose commit marker is committed in this subtask's partition."""
        consumer = Consumer(
            {
                "bootstrap.servers": self._ctx.bootstrap,
                "group.id": f"{self._tid}.recovery",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "log_level": 0,
            }
        )
        tp = TopicPartition(self._marker_topic, self._ctx.marker_partition)
        try:
            low, high = consumer.get_watermark_offsets(tp, timeout=TXN_TIMEOUT_S, cached=False)
            # Only this subtask writes the partition, and every slot was just fenced,
            # so the last stable offset is the end: this read cannot stall.
            consumer.assign([TopicPartition(tp.topic, tp.partition, low)])
            last = 0
            deadline = time.monotonic() + TXN_TIMEOUT_S
            while high > low:
                for m in consumer.consume(500, 1.0):
                    err = m.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            return last
                        continue
                    if m.key() == self._tid.encode():
                        last = max(last, int(json.loads(m.value() or b"{}").get("epoch", 0)))
                if time.monotonic() > deadline:
                    raise KafkaUnavailableError(f"cannot read {self._marker_topic}")
            return last
        finally:
            consumer.close()

    def _warn_if_old(self) -> None:
        limit = self._ctx.transaction_timeout_ms / 1000
        now = time.monotonic()
        for e, p in self._pending.items():
            if now - p.began > WARN_FRACTION * limit and e not in self._warned:
                self._warned.add(e)
                log.warning(
                    "%s: the transaction of epoch %d is %.0fs old, near transaction.timeout.ms "
                    "(%.0fs): if it expires before checkpoint %d completes the broker aborts it",
                    self._tid,
                    e,
                    now - p.began,
                    limit,
                    e,
                )

    def close(self) -> None:
        # Open transactions would hold back read_committed readers of the topic
        # until they time out. Aborting them is safe: an epoch whose checkpoint
        # completed is re-committed from its write-ahead copy at the next start.
        slots = {e.slot for e in self._pending.values()}
        if self._slot is not None:
            slots.add(self._slot)
        for slot in slots:
            try:
                self._producers[slot].abort_transaction(CLOSE_TIMEOUT_S)
            except KafkaException as exc:
                log.info("%s: abort on close failed (a successor fences it): %s", self._tid, exc)
        self._producers.clear()


def _retry(call: Callable[[float], None], what: str) -> None:
    """Run a transactional call, retrying the errors librdkafka marks retriable.

    Anything else (fenced, fatal, abortable) is raised as `KafkaUnavailableError`:
    the worker dies and the job recovers, which re-commits from the write-ahead copy.
    """
    deadline = time.monotonic() + TXN_TIMEOUT_S
    while True:
        try:
            call(TXN_TIMEOUT_S)
            return
        except KafkaException as exc:
            err = exc.args[0]
            if not (isinstance(err, KafkaError) and err.retriable()) or time.monotonic() > deadline:
                raise KafkaUnavailableError(f"transactional {what} failed: {err}") from None
