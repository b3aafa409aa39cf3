"""`TransactionalWriter`: the exactly-once Kafka sink, one transaction per checkpoint epoch.

The protocol (which producer slot, what to commit, what to replay) is decided by
`kstream.protocol.twophase.EpochLedger`; this module does its Kafka I/O: the
transactions, the commit markers in the job's commit topic, and reading the
newest committed marker back at a recovery. It is the two-phase commit of the
checkpoint protocol (:ref:`two-phase-commit`).
"""

from __future__ import annotations

import functools
import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from kstream.connectors.kafka.rows import (
    Encoder,
    OutputTopic,
    Row,
    max_ahead_ms,
    produce_output,
    produce_row,
)
from kstream.connectors.kafka.settings import (
    CLOSE_TIMEOUT_S,
    FLUSH_TIMEOUT_S,
    HELD_CHECK_EVERY,
    MARKER_POLL_S,
    MARKER_WINDOW,
    POOL_SIZE,
    SINK_LINGER_MS,
    WARN_FRACTION,
)
from kstream.dataflow.outputs import SinkContext, SinkSnapshot, SinkWriter
from kstream.errors import (
    ConfigurationError,
    KafkaUnavailableError,
    ProducerFencedError,
    ProtocolError,
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
    commit_topic,
    marker_reader_group,
    sink_transactional_id,
    slot_transactional_id,
)
from kstream.protocol.twophase import EpochLedger, Resume, Wait
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

__all__ = ["TransactionalWriter", "marker_epoch"]

log = logging.getLogger("kstream.sink.kafka")


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

    def __init__(self, sink: OutputTopic, ctx: SinkContext) -> None:
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
        self._row = Encoder(sink, ctx, self._max_bytes, max_ahead_ms(ctx, sink.topic)).row
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
        #: before it can be purged (docs/operations/internal-topics.md, "Bounds").
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
            produce_output(producer, self._topic, row)
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
            produce_output(producer, self._topic, row)

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
                produce_row(producer, self._topic, row)
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
