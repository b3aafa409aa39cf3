"""The Kafka client mechanics of kstream, in one place.

* **Presets**: the configuration layers the runtime's clients share
  (`client_config`, from `kstream.infra.client_settings`, merges them with the
  cluster's security settings), so a setting and its reason are written once.
* **Produce with backpressure**: `produce` hands one record to a producer and,
  while the producer's local queue is full, serves delivery reports until there
  is room, instead of failing with `BufferError`.
* **Flush**: `flush` waits for acknowledgements within a bound.
* **Requests**: `request` (offsets, metadata) and `transact` (transactional
  calls) retry what librdkafka marks retriable, until a deadline.
* **Connect**: `connect` readies a new client before its first real work, so
  that work does not wait out librdkafka's fixed half-second retry.
* **Errors**: `kafka_error` turns a Kafka error into kstream's tree
  (`kstream.errors`): denied by ACLs -> `AuthorizationError`; fenced ->
  `ProducerFencedError`; a transaction that must
  abort because a record of it failed -> `RecordLostError`; anything else ->
  `KafkaUnavailableError`. No `KafkaException` leaves these helpers.

`produce` adds no work per record on the path that succeeds: one call and a
``try`` (free in CPython until something is raised); it passes ``headers`` only
when there are some (an explicit ``headers=None`` costs the binding about a
microsecond per call, more than the rest of the produce).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, TypeVar, cast

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from kstream.dataflow.outputs import Producer as ProducerCalls
from kstream.errors import (
    AuthorizationError,
    JobFailedError,
    KafkaUnavailableError,
    KStreamError,
    ProducerFencedError,
    RecordLostError,
)
from kstream.infra.admin import ACL_HINT, AUTHORIZATION_CODES, retrying
from kstream.infra.client_settings import client_config

log = logging.getLogger("kstream.kafka")

__all__ = [
    "BATCHING",
    "FENCED_CODES",
    "IDEMPOTENT",
    "MANUAL_OFFSETS",
    "PARTITION_UA",
    "READ_COMMITTED",
    "TXN_TIMEOUT_S",
    "Config",
    "client_config",
    "concrete_offsets",
    "connect",
    "flush",
    "kafka_error",
    "produce",
    "raise_if_fatal",
    "request",
    "transact",
]

T = TypeVar("T")

#: How long `connect` waits for a broker of the cluster's metadata at most.
CONNECT_TIMEOUT_S = 5.0
#: Between two metadata requests of `connect`.
CONNECT_RETRY_S = 0.005

#: A librdkafka configuration.
Config = dict[str, Any]

#: A producer that retries without duplicating or reordering records.
IDEMPOTENT: Mapping[str, Any] = {"enable.idempotence": True}
#: Producers that write many records: a produce call costs microseconds when
#: records are batched, compressed and queued deeply. Only failed deliveries
#: call back (a callback per record would cost a Python call each).
BATCHING: Mapping[str, Any] = {
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "compression.type": "lz4",
    "queue.buffering.max.messages": 1_000_000,
    "delivery.report.only.error": True,
}
#: Consumers whose positions live in checkpoints (or nowhere), never in
#: automatic group commits.
MANUAL_OFFSETS: Mapping[str, Any] = {"enable.auto.commit": False, "enable.partition.eof": False}
#: Consumers that see only committed transactions.
READ_COMMITTED: Mapping[str, Any] = {"isolation.level": "read_committed"}

#: librdkafka's "no partition given": the producer's partitioner picks one
#: (confluent-kafka's own constant is missing from its type stubs).
PARTITION_UA = -1

#: Bound on one transactional call (init, commit) against a healthy broker.
TXN_TIMEOUT_S = 60.0
#: While a producer's local queue is full, serve delivery reports this long
#: before trying again (they free the queue).
BACKPRESSURE_POLL_S = 0.05

#: Codes saying a newer producer initialised this transactional id.
FENCED_CODES = frozenset(
    {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}
)


def kafka_error(error: KafkaException | KafkaError, what: str) -> KStreamError:
    """kstream's error for a Kafka error met while doing `what` (a short phrase)."""
    err = error.args[0] if isinstance(error, KafkaException) else error
    if not isinstance(err, KafkaError):
        return KafkaUnavailableError(f"{what}: {err}")
    if err.code() in AUTHORIZATION_CODES:
        return AuthorizationError(f"{what}: {err.str()} ({ACL_HINT})")
    if err.code() in FENCED_CODES:
        return ProducerFencedError(
            f"{what}: {err.str()} (another process took over this producer's transactional id)"
        )
    if err.txn_requires_abort():
        return RecordLostError(f"{what}: {err.str()} (a record of the transaction failed)")
    return KafkaUnavailableError(f"{what}: {err.str()}")


def produce(
    producer: Producer | ProducerCalls,
    topic: str,
    value: bytes | None,
    key: bytes | None = None,
    partition: int = PARTITION_UA,
    headers: Sequence[tuple[str, str | bytes | None]] | None = None,
    *,
    kind: str = "topic",
    timestamp: int = 0,
    on_delivery: Callable[[KafkaError | None, Message], None] | None = None,
) -> None:
    """Hand one record to `producer`, waiting while its local queue is full.

    Raises kstream's error (`kafka_error`) if the producer refuses the record
    (an unknown partition, a fatal producer state); `kind` names the destination
    in the message ("channel", "dead-letter topic"). Callers size records
    beforehand, so a refusal is kstream's own I/O failing, never a record's
    fault: it stops the worker rather than feeding the job's error policy.
    Delivery failures arrive later, through the producer's callback.
    A positive `timestamp` (ms) is the record's Kafka timestamp; otherwise the
    producer stamps it. `on_delivery` replaces the producer's delivery callback
    for this record (e.g. to learn its offset).
    """
    while True:
        try:
            # `headers=None` costs librdkafka's binding more than the produce itself.
            if on_delivery is not None:
                producer.produce(
                    topic,
                    value,
                    key,
                    partition,
                    headers=cast(Any, headers),
                    on_delivery=on_delivery,
                )
            elif timestamp > 0:
                # Kafka timestamps are positive ms; 0 means "when produced".
                producer.produce(
                    topic, value, key, partition, headers=cast(Any, headers), timestamp=timestamp
                )
            elif headers is None:
                producer.produce(topic, value, key, partition)
            else:
                # The binding reads any sequence; its stubs say list.
                producer.produce(topic, value, key, partition, headers=cast(Any, headers))
            return
        except BufferError:
            producer.poll(BACKPRESSURE_POLL_S)
        except KafkaException as exc:
            place = topic if partition == PARTITION_UA else f"{topic}[{partition}]"
            raise kafka_error(exc, f"cannot write to {kind} {place}") from None


def flush(producer: Producer | ProducerCalls, timeout: float, what: str) -> None:
    """Wait until every record of `producer` is acknowledged, at most `timeout` seconds.

    Raises `KafkaUnavailableError` (naming `what`) if some are still pending.
    """
    pending = producer.flush(timeout)
    if pending:
        raise KafkaUnavailableError(
            f"{what}: {pending} deliveries pending after waiting {timeout:.0f}s"
        )


def connect(client: Any, topic: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Return once `client` (a producer, consumer or admin client) reads the
    cluster's metadata from a broker it learned, not from a bootstrap address;
    at most `timeout` seconds, and never raises.

    Why: librdkafka (2.16) drops its bootstrap connections as soon as the
    first metadata names the brokers, and what a new client asks for in that
    moment finds no broker up and is retried on a fixed 500 ms timer: the
    producer id of an idempotent producer (its first record waits), the
    coordinator of ``init_transactions``, a partition's leader for a logical
    offset (``OFFSET_BEGINNING``) or for watermark offsets. Measured on one
    broker: first delivery 0.50 s, 1 ms after `connect` (which took 55-60 ms);
    ``init_transactions`` 0.5 s in 4 of 6 new processes, 4 ms after it. Asking
    for one topic's metadata until a learned broker answers waits exactly for
    that connection. A call that cannot tell (the cluster is unreachable) leaves
    the error to the client's real work, which names it.
    """
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        try:
            if client.list_topics(topic, timeout=left).orig_broker_id >= 0:
                return
        except KafkaException:
            return
        # A bootstrap answer comes at once: ask again shortly, not in a hot loop.
        time.sleep(CONNECT_RETRY_S)


def concrete_offsets(
    consumer: Any, topic: str, positions: Mapping[int, int], timeout: float = TXN_TIMEOUT_S
) -> dict[int, int]:
    """`positions` (partition -> offset to read next) with librdkafka's logical
    offsets replaced by the offsets they stand for now: ``OFFSET_BEGINNING`` by
    the partition's first offset, ``OFFSET_END`` by its end (for a read_committed
    `consumer`, the last stable offset). Other offsets are kept.

    Why resolve them before assigning: a logical offset is resolved after the
    consumer's first fetch has gone out without its partition, and with a long
    fetch wait (a source's, 500 ms) the partition is fetched only when that
    fetch returns: a new job's first records waited up to half a second. And a
    position kept concrete means the same records after a recovery: a source that
    had read nothing of a partition when a checkpoint was taken restored "the
    end" as of the recovery, and skipped what had arrived in between.
    """
    out = dict(positions)
    for partition, offset in positions.items():
        if offset not in (OFFSET_BEGINNING, OFFSET_END):
            continue
        tp = TopicPartition(topic, partition)
        low, high = request(
            partial(consumer.get_watermark_offsets, tp, timeout=timeout, cached=False),
            f"cannot read the offsets of {topic} [{partition}]",
            timeout,
        )
        out[partition] = int(low if offset == OFFSET_BEGINNING else high)
    return out


def request(call: Callable[[], T], what: str, timeout: float = TXN_TIMEOUT_S) -> T:
    """Run one request to the cluster (offsets, metadata) and return its answer.

    Transient errors (retriable, or a leader not known yet) are retried until
    `timeout`; anything else, or the last, is raised as kstream's error
    (`kafka_error`) for doing `what`.
    """
    try:
        return retrying(call, timeout)
    except KafkaException as exc:
        raise kafka_error(exc, what) from None


def transact(call: Callable[[float], None], what: str, timeout: float = TXN_TIMEOUT_S) -> None:
    """Run a transactional call (``init_transactions``, ``commit_transaction``...).

    Errors librdkafka marks retriable are retried until `timeout`; anything else
    (fenced, fatal, abortable) is raised as kstream's error (`kafka_error`): the
    worker dies and the job recovers, which re-commits from the write-ahead copy.
    """
    request(lambda: call(timeout), f"transactional {what} failed", timeout)


def raise_if_fatal(msg: Message) -> None:
    """Raise `JobFailedError` if consumed `msg` carries a fatal error; log any other
    (a consumer reports partition ends and transient errors as messages too)."""
    err = msg.error()
    if err is not None and err.fatal():
        raise JobFailedError(f"consumer error on {msg.topic()}[{msg.partition()}]: {err.str()}")
    log.debug("consumer notice: %s", err)
