"""The control topic of a job: triggers, acks, completions, aborts, recoveries, heartbeats.

``kstream.<job>.control`` has one partition, so every reader sees one total
order of control messages. Messages are JSON objects with a ``type`` field;
their classes and fields are defined in `kstream.protocol.messages`, and this
module moves them (`ControlWriter.send` takes one, `ControlReader` yields them):

=============== ==================== ================================================
type            class                written by
=============== ==================== ================================================
recover         `Recovered`          coordinator (``fresh``: forget older checkpoints)
trigger         `Triggered`          coordinator (its own, or the relay of an `initiate`)
initiate        `Initiated`          source subtask that started a snapshot itself
                                     (flushed before its barriers)
ack             `Acked`              subtask (worker)
decline         `Declined`           subtask (worker)
complete        `Completed`          coordinator (with the `JobIdentity`)
abort           `Aborted`            coordinator (also for each pending checkpoint
                                     when the job stops cleanly)
heartbeat       `WorkerAlive`        worker (every few seconds, before each ack,
                                     and once more at a clean stop)
failed          `WorkerFailed`       worker (a fatal job error)
restore-failed  `RestoreFailed`      worker (checkpoint unusable)
coordinator     `Presence`           runner (at start, every second, and at a clean
                                     stop; see `kstream.protocol.presence`)
savepoint       `SavepointRequested` ``kstream savepoint`` (see
                                     `kstream.runtime.runner.savepoints`)
savepoint-done  `SavepointDone`      runner (the savepoint's URL, or why it failed)
=============== ==================== ================================================

The topic is the durable record of completed checkpoints: replaying it
rebuilds the coordinator's history (`kstream.protocol.coordinator.replay`). A checkpoint
pending when a newer ``recover`` arrives was rolled back; no ``abort`` says so
(`kstream.protocol.checkpoint_history` infers it). A heartbeat's counters are running
totals of one worker process (`kstream.protocol.counters`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from kstream.errors import (
    CoordinatorFencedError,
    KafkaUnavailableError,
    KStreamError,
    ProducerFencedError,
    ProtocolError,
)
from kstream.protocol.limits import DEFAULT_PRODUCER_BYTES, record_bytes
from kstream.protocol.messages import ControlMessage, decode, decode_all
from kstream.protocol.names import control_topic, history_group
from kstream.runtime.kafka import (
    FENCED_CODES,
    IDEMPOTENT,
    MANUAL_OFFSETS,
    READ_COMMITTED,
    client_config,
    connect,
    kafka_error,
    produce,
    request,
)
from kstream.runtime.kafka import flush as flush_producer

__all__ = ["ControlReader", "ControlWriter", "read_history", "read_log", "read_messages"]

log = logging.getLogger("kstream.control")

#: Control messages are few and small; a flush waits at most this long.
FLUSH_TIMEOUT_S = 30.0
#: A reason (an error's text, which may quote a record) is cut to this many
#: characters: enough to diagnose, and it keeps every control message small.
REASON_CHARS = 2000
#: A reader that got nothing for this long checks that it is not stuck (`ControlReader`).
STALL_S = 10.0
#: How long that check waits for the topic's end offset: it runs in the worker's loop.
STALL_CHECK_TIMEOUT_S = 2.0
#: How often `ControlReader.settled_end` asks whether a commit marker is written.
SETTLE_POLL_S = 0.02
#: How long the broker holds a reader's fetch while the topic has nothing new. A
#: fetch returns as soon as a record is appended, so this adds no latency to any
#: message; it only sets how often an idle reader asks. At 10 ms the three readers
#: of a two-worker job (coordinator and workers) made ~300 fetches per second, the
#: most frequent request the broker served for an idle job.
FETCH_WAIT_MS = 500
#: How long a message sent without a flush waits for others to share its produce
#: request (a plain writer's: the workers'). A worker's acks and the heartbeat
#: before them are sent that way, then flushed at once (librdkafka's flush ignores
#: ``linger.ms``): with 0, the heartbeat left alone, and each checkpoint cost the
#: broker a produce request more per subtask (and each control reader a fetch
#: more). Only heartbeats repeated by a worker's thread, with no flush after them,
#: wait this long, against a liveness timeout of seconds.
CONTROL_LINGER_MS = 50
#: A coordinator's transaction (one control message) aborts after this long.
CONTROL_TRANSACTION_TIMEOUT_S = 60.0
#: The largest control message: what its producer (librdkafka's default
#: ``message.max.bytes``) and the control topic (kstream creates it) take.
MAX_CONTROL_BYTES = DEFAULT_PRODUCER_BYTES


class ControlWriter:
    """Appends control messages; `send(..., flush=True)` returns once it is durable.

    With `transactional_id` (the coordinator's, `coordinator_transactional_id`)
    every message is in a transaction committed before `send` returns, its own
    unless earlier ones were sent with ``hold=True`` (then they share it; see
    `send`), and creating the writer fences every earlier writer of that id: a coordinator
    cut off from the cluster while a successor started finds, at its next send,
    that it was replaced (`CoordinatorFencedError`) and stops. Readers read the
    topic read_committed, so nothing a fenced coordinator had not committed is
    acted on.
    """

    def __init__(self, bootstrap: str, job: str, transactional_id: str | None = None) -> None:
        self.topic = control_topic(job)
        self.job = job
        self.transactional_id = transactional_id
        extra: dict[str, Any] = {"linger.ms": CONTROL_LINGER_MS}
        if transactional_id is not None:
            extra |= {
                "linger.ms": 0,
                "transactional.id": transactional_id,
                "transaction.timeout.ms": int(CONTROL_TRANSACTION_TIMEOUT_S * 1000),
            }
        self._producer = Producer(client_config(bootstrap, IDEMPOTENT, extra))
        #: Set once a transactional call failed for good (`_transact`).
        self._broken: KStreamError | None = None
        #: Whether a transaction is open: messages sent with ``hold=True`` wait in it.
        self._open = False
        connect(self._producer, self.topic)
        if transactional_id is not None:
            self._transact(self._producer.init_transactions, "init")

    def send(self, message: ControlMessage, *, flush: bool = True, hold: bool = False) -> None:
        """Append `message` (its ``reason`` cut to `REASON_CHARS`).

        With `hold`, a transactional writer leaves the transaction open: the
        message becomes visible with the next message sent without `hold`, or at
        `release`, in one commit with it (one commit round trip, one set of
        transaction requests and markers for several messages); a plain writer
        does not flush. Messages are small by construction; one that is not
        (offsets of thousands of partitions, say) raises `ProtocolError` naming
        its type and size rather than failing inside the producer.
        """
        body = message.to_dict()
        reason = body.get("reason")
        if isinstance(reason, str) and len(reason) > REASON_CHARS:
            body["reason"] = reason[:REASON_CHARS] + " [cut]"
        data = json.dumps(body).encode()
        if record_bytes(None, data) > MAX_CONTROL_BYTES:
            raise ProtocolError(
                f"control message {message.TYPE!r} of {len(data)} bytes exceeds the "
                f"{MAX_CONTROL_BYTES} bytes a record of {self.topic} may hold"
            )
        if self.transactional_id is not None:
            if not self._open:
                self._transact(lambda _t: self._producer.begin_transaction(), "begin")
                self._open = True
            try:
                produce(self._producer, self.topic, data, None, 0, kind="control topic")
            except ProducerFencedError as exc:
                self._broken = self._fenced(str(exc))
                raise self._broken from None
            if not hold:
                self.release()
            return
        produce(self._producer, self.topic, data, None, 0, kind="control topic")
        if flush and not hold:
            self.flush()
        else:
            self._producer.poll(0)

    def release(self) -> None:
        """Commit the messages sent with ``hold=True`` (a plain writer: flush them)."""
        if self.transactional_id is None:
            self.flush()
            return
        if self._open:
            self._transact(self._producer.commit_transaction, "commit")
            self._open = False

    def _transact(self, call: Callable[[float], None], what: str) -> None:
        """One transactional call, retried while librdkafka says retrying may help.

        A fenced producer raises `CoordinatorFencedError`; any other failure
        kstream's error for it (`kafka_error`: `KafkaUnavailableError`,
        `AuthorizationError`, ...). Either way the writer is broken from then on:
        every later `send` raises the same error at once (a transaction left
        half-way cannot be continued, and a fenced coordinator must not hang
        while it winds up).
        """
        if self._broken is not None:
            raise self._broken
        deadline = time.monotonic() + FLUSH_TIMEOUT_S
        while True:
            try:
                call(max(0.1, deadline - time.monotonic()))
                return
            except KafkaException as exc:
                err = exc.args[0]
                if not isinstance(err, KafkaError):
                    raise
                if err.code() in FENCED_CODES or (err.fatal() and "fenced" in err.str()):
                    self._broken = self._fenced(err.str())
                elif err.retriable() and time.monotonic() < deadline:
                    continue  # the same call again, as librdkafka asks
                else:
                    # Unreachable, refused by ACLs, ...: kstream's error for it.
                    self._broken = kafka_error(err, f"transactional {what} on {self.topic} failed")
                raise self._broken from None

    def _fenced(self, why: str) -> CoordinatorFencedError:
        return CoordinatorFencedError(
            f"job {self.job}: another coordinator started (transactional id "
            f"{self.transactional_id} fenced this one); this coordinator stops ({why})"
        )

    def flush(self) -> None:
        if self.transactional_id is not None:
            self.release()  # every other send committed already
            return
        flush_producer(self._producer, FLUSH_TIMEOUT_S, f"control messages to {self.topic}")


class ControlReader:
    """Reads the control topic from a given offset onwards.

    A reader that stops receiving is replaced: fault campaigns met librdkafka
    consumers (manually assigned) that, after a broker restart, returned nothing
    more for good while the topic grew. A worker whose control reader is stuck
    never hears of the next generation: it heartbeats in its old one, the
    coordinator finds it silent and rolls the job back every liveness timeout,
    forever. So when `poll` has returned nothing for `STALL_S` and the topic's
    end lies beyond the next offset to read, the consumer is closed and a new
    one assigned at that offset (only the coordinator writes in transactions,
    one record each: the end offset is at most one past the last record's
    plus one).
    """

    def __init__(self, bootstrap: str, job: str, group: str, start: int = 0) -> None:
        self.topic = control_topic(job)
        self._bootstrap, self._group = bootstrap, group
        self._consumer = self._new_consumer()
        connect(self._consumer, self.topic)
        #: The offset after the last record read: where a replacement starts.
        self._next = start
        # Assigned at the first read, not here: while the consumer fetches, its
        # fetch waits at the broker (up to FETCH_WAIT_MS) and a watermark request
        # queues behind it on the same connection, so `end_offset` before the
        # first read (`at_end`, `read_to_end`) took half a second.
        self._assigned = False
        self._quiet_since = time.monotonic()
        #: When `poll` last returned.
        self._asked = self._quiet_since
        #: How often a stuck consumer was replaced.
        self.replaced = 0

    def _new_consumer(self) -> Consumer:
        return Consumer(
            client_config(
                self._bootstrap,
                MANUAL_OFFSETS,
                # The coordinator writes in transactions: a fenced one's unfinished
                # writes are never read.
                READ_COMMITTED,
                {
                    "group.id": self._group,
                    "fetch.wait.max.ms": FETCH_WAIT_MS,
                    # The topic is purged behind what restarts read
                    # (`kstream.runtime.runner.purge`):
                    # a reader placed before its start (offset 0) reads on from the start.
                    "auto.offset.reset": "earliest",
                },
            )
        )

    @classmethod
    def at_end(cls, bootstrap: str, job: str, group: str) -> ControlReader:
        """A reader of the messages written from now on (the topic's end at this call)."""
        reader = cls(bootstrap, job, group)
        reader._next = reader.end_offset()
        return reader

    def _unstall(self) -> None:
        """Replace the consumer if the topic's end lies beyond what it returned.

        The end comes from a fresh client: a stuck consumer may be unable to
        answer even this (a long fault campaign's reader failed every such
        request for good while the cluster answered everyone else).
        """
        probe = Consumer(client_config(self._bootstrap, MANUAL_OFFSETS, {"group.id": self._group}))
        try:
            _, end = probe.get_watermark_offsets(
                TopicPartition(self.topic, 0), timeout=STALL_CHECK_TIMEOUT_S, cached=False
            )
        except KafkaException:
            return  # the broker does not answer: nothing to tell yet
        finally:
            probe.close()
        # The coordinator's transactions leave a commit marker after its record:
        # an end one past the next offset may be that marker alone.
        if end <= self._next + 1:
            return
        self._consumer.close()
        self._consumer = self._new_consumer()
        connect(self._consumer, self.topic)
        self._consumer.assign([TopicPartition(self.topic, 0, self._next)])
        self._assigned = True
        self.replaced += 1
        log.warning(
            "%s: the control reader returned nothing for %.0fs while the topic grew "
            "(offset %d, end %d); replaced it",
            self.topic,
            STALL_S,
            self._next,
            end,
        )

    def end_offset(self) -> int:
        _, high = request(
            lambda: self._consumer.get_watermark_offsets(
                TopicPartition(self.topic, 0), timeout=FLUSH_TIMEOUT_S, cached=False
            ),
            f"cannot read the end of {self.topic}",
            FLUSH_TIMEOUT_S,
        )
        return int(high)

    def poll(self, timeout: float = 0.0, limit: int = 500) -> list[tuple[int, ControlMessage]]:
        """Messages available now, with their offsets; if there are none, waits up
        to `timeout` for the first and returns as soon as it arrives.

        Records that are no message (`kstream.protocol.messages.decode`) are skipped.
        """
        return _decoded(self._records(timeout, limit))

    def _fetch(self, timeout: float, limit: int) -> list[Message]:
        """Up to `limit` records: those queued, or the first to arrive within `timeout`
        and those queued with it.

        Not ``consume(limit, timeout)`` alone: librdkafka's batch call waits out
        its whole timeout unless `limit` records arrive, and every control
        message read that way (an ack, a completion) waited with it.
        """
        if not self._assigned:
            self._consumer.assign([TopicPartition(self.topic, 0, self._next)])
            self._assigned = True
        msgs = self._consumer.consume(limit, 0)
        if msgs or timeout <= 0:
            return msgs
        first = self._consumer.poll(timeout)
        if first is None:
            return []
        if limit <= 1:
            return [first]
        return [first, *self._consumer.consume(limit - 1, 0)]

    def _records(self, timeout: float, limit: int) -> list[tuple[int, dict[str, Any]]]:
        """The JSON objects available now (or the first within `timeout`), with their offsets."""
        out: list[tuple[int, dict[str, Any]]] = []
        asked = time.monotonic()
        msgs = self._fetch(timeout, limit)
        now = time.monotonic()
        if max(asked - self._asked, now - asked - timeout) >= STALL_S / 2:
            # Not asked for a while, or this process stood still inside the fetch
            # (stopped, paused, starved): time the consumer could not have read in
            # is no sign that it is stuck.
            self._quiet_since = now
        if any(m.error() is None for m in msgs):
            self._quiet_since = now
        elif now - self._quiet_since >= STALL_S:
            self._quiet_since = now
            self._unstall()
        self._asked = time.monotonic()
        for msg in msgs:
            err = msg.error()
            if err is not None:
                if err.retriable() or not err.fatal():
                    continue
                raise kafka_error(err, f"cannot read {self.topic}")
            self._next = (msg.offset() or 0) + 1
            raw = msg.value()
            if raw is None:
                continue
            try:
                body = json.loads(raw)
            except (ValueError, RecursionError):
                # Not ours (not UTF-8 JSON, or nested deep enough to exhaust the
                # parser's recursion): the control topic is only written by kstream.
                continue
            if isinstance(body, dict):
                out.append((msg.offset() or 0, body))
        return out

    def read_to_end(
        self, timeout: float = 30.0, *, settle: float = 0.0
    ) -> Iterator[tuple[int, ControlMessage]]:
        """Every message up to the end offset as of this call.

        With `settle` > 0, also every message whose transaction was committed by
        this call but is not readable yet, waiting up to `settle` seconds for it
        (`settled_end`).
        """
        for offset, body in self._records_to_end(timeout, settle):
            message = decode(body)
            if message is not None:
                yield offset, message

    def settled_end(self, settle: float) -> int:
        """The end offset once every transaction open at this call has ended, or
        after `settle` seconds, whichever comes first.

        The coordinator's `commit_transaction` returns once the commit is decided;
        the broker writes the commit marker just after, and until then a
        read_committed reader's end (the last stable offset) stops before the
        message. A worker that stops cleanly reads the control topic to its end
        to commit what completed checkpoints cover: reading to the last stable
        offset alone, it could miss a completion the coordinator had committed
        just before stopping it, and leave that checkpoint's output to the next
        run. A transaction that never ends (its coordinator killed mid-send)
        holds the end back for the whole `settle`.
        """
        end = self.end_offset()
        if settle <= 0:
            return end
        high = _uncommitted_end(self._bootstrap, self.topic, self._group)
        deadline = time.monotonic() + settle
        while end < high and time.monotonic() < deadline:
            time.sleep(SETTLE_POLL_S)  # the broker writes the marker; nothing to wait on
            end = self.end_offset()
        if end < high:
            log.info(
                "%s: a transaction is still open after %.0fs (offsets %d-%d unread)",
                self.topic,
                settle,
                end,
                high,
            )
        return end

    def _records_to_end(
        self, timeout: float, settle: float = 0.0
    ) -> Iterator[tuple[int, dict[str, Any]]]:
        end = self.settled_end(settle)
        deadline = time.monotonic() + timeout
        # From where this reader stands, not from offset 0: a reader placed at the
        # end (`at_end`) that receives nothing has no consumer position to compare
        # (librdkafka reports none until a record is returned), and counting from 0
        # it waited out the whole timeout for records it had been placed after.
        while self._next < end:
            if time.monotonic() > deadline:
                raise KafkaUnavailableError(f"could not read {self.topic} to its end")
            yield from self._records(0.2, 500)
            # A commit marker ends the topic and is never returned: the position
            # steps past it.
            pos = self._consumer.position([TopicPartition(self.topic, 0)])[0].offset
            if pos >= end:
                break

    def close(self) -> None:
        self._consumer.close()


def _uncommitted_end(bootstrap: str, topic: str, group: str) -> int:
    """`topic`'s partition 0 high watermark, open transactions' records included."""
    probe = Consumer(
        client_config(
            bootstrap,
            MANUAL_OFFSETS,
            {"group.id": group, "isolation.level": "read_uncommitted"},
        )
    )
    try:
        _, high = request(
            lambda: probe.get_watermark_offsets(
                TopicPartition(topic, 0), timeout=FLUSH_TIMEOUT_S, cached=False
            ),
            f"cannot read the end of {topic}",
            FLUSH_TIMEOUT_S,
        )
    finally:
        probe.close()
    return int(high)


def read_history(bootstrap: str, job: str) -> list[dict[str, Any]]:
    """The control topic of `job` as it is written: JSON objects (empty if the job never ran)."""
    from kstream.infra.admin import Admin

    if Admin(bootstrap).partitions(control_topic(job)) is None:
        return []
    reader = ControlReader(bootstrap, job, group=history_group(job))
    try:
        return [body for _, body in reader._records_to_end(30.0)]
    finally:
        reader.close()


def read_messages(bootstrap: str, job: str) -> list[ControlMessage]:
    """All control messages of `job` so far, decoded (empty if the job never ran)."""
    return decode_all(read_history(bootstrap, job))


def read_log(bootstrap: str, job: str) -> list[tuple[int, ControlMessage]]:
    """The control messages of `job` so far with their offsets (empty if the job never ran)."""
    from kstream.infra.admin import Admin

    if Admin(bootstrap).partitions(control_topic(job)) is None:
        return []
    reader = ControlReader(bootstrap, job, group=history_group(job))
    try:
        return list(reader.read_to_end(30.0))
    finally:
        reader.close()


def _decoded(records: Iterable[tuple[int, object]]) -> list[tuple[int, ControlMessage]]:
    out = []
    for offset, body in records:
        message = decode(body)
        if message is not None:
            out.append((offset, message))
    return out
