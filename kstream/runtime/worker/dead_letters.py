"""The job's error policy for records that fail, and the dead letters it writes.

A record fails when it cannot be decoded, when a user function raises on it,
when an output it led to is too large for its topic, or when a sink's
destination refuses a result (`SinkContext.refused`). The job's
``on_error`` decides: ``"fail"`` stops the job (`JobFailedError`), ``"skip"``
drops the record with a warning, ``"dead-letter"`` writes it, with why and
where it came from in headers (`kstream.protocol.names`), to the job's
dead-letter topic through the worker's shared producer.

That producer has no transactions, so dead letters are written at least once,
whatever the job's guarantee: after a recovery, a record that failed after the
restored checkpoint fails again and its dead letter is written again. The
source headers (topic, partition, offset) tell the repeats apart.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Message

from kstream.dataflow.types import ErrorPolicy
from kstream.errors import (
    JobFailedError,
    KStreamError,
    RecordError,
    RecordTooLargeError,
    UnsupportedTypeError,
)
from kstream.protocol.limits import Headers, fit_dead_letter
from kstream.protocol.names import (
    ERROR_HEADER,
    LINEAGE_OFFSET_HEADER,
    LINEAGE_PARTITION_HEADER,
    LINEAGE_TOPIC_HEADER,
    STACK_HEADER,
    TASK_HEADER,
    dead_letter_topic,
)
from kstream.runtime.kafka import produce

__all__ = ["RAW", "PolicyCounts", "RecordErrors"]

log = logging.getLogger("kstream.task")

#: Marks "the failing record is the Kafka record itself" in `RecordErrors.on_record_error`.
RAW = object()
#: Kept of an error's message and stack in the headers: a dead letter must stay small.
_ERROR_CHARS = 2000
_STACK_CHARS = 8000


@dataclass
class PolicyCounts:
    """What the policy did so far (a subtask's statistics extend these counts)."""

    dropped: int = 0
    dead_letters: int = 0
    #: The latest record sent to the dead-letter topic: where it came from and why.
    last_dead_letter: str = ""


@dataclass
class RecordErrors:
    """Applies ``on_error`` for subtask `task` of job `job_name`.

    Dead letters go through `producer` (the worker's shared producer) and are cut
    to fit `max_record_bytes`, the producer's ``message.max.bytes``. With `out`
    they are handed to ``out(topic, key, value, headers)`` instead (a
    broker-free run keeps them in memory; `producer` is then unused).
    """

    policy: ErrorPolicy
    job_name: str
    task: str
    producer: Any  # confluent_kafka.Producer
    max_record_bytes: int
    counts: PolicyCounts = field(default_factory=PolicyCounts)
    out: Callable[[str, bytes | None, bytes | None, Headers], None] | None = None

    def on_record_error(self, exc: BaseException, msg: Message, item: Any = RAW) -> None:
        """Apply the job's error policy to a record that failed to decode or process.

        `msg` is the Kafka record it came in: a source record, or a channel record
        holding a batch, in which case `item` is the failing stream record. A
        `RecordTooLargeError` (an output too large for its topic) keeps the
        output itself in the dead letter, with the input's position.

        Errors that are not the record's pass through and stop the worker: a
        `JobFailedError` (the policy of an operator further down) and any other
        `KStreamError` that is not a `RecordError` (kstream's own I/O failed,
        e.g. a produce; the job rolls back instead of blaming the record).
        """
        self.record_failed(
            exc, msg.topic() or "", msg.partition(), msg.offset(), msg.key(), msg.value(), item
        )

    def record_failed(
        self,
        exc: BaseException,
        topic: str,
        partition: int | None,
        offset: int | None,
        key: bytes | None,
        value: bytes | None,
        item: Any = RAW,
    ) -> None:
        """`on_record_error` for the record at `topic[partition]@offset` with `key`
        and `value` (its bytes), however it was read."""
        if isinstance(exc, KStreamError) and not isinstance(exc, RecordError):
            raise exc
        where = f"{topic}[{partition}]@{offset}"
        source: Headers = [
            (LINEAGE_TOPIC_HEADER, topic.encode()),
            (LINEAGE_PARTITION_HEADER, str(partition).encode()),
            (LINEAGE_OFFSET_HEADER, str(offset).encode()),
        ]
        payload: bytes | None
        if isinstance(exc, RecordTooLargeError):
            key, payload = exc.key, exc.value
        else:
            payload = value if item is RAW else repr(item).encode()
        self.apply(exc, f"record {where}", key, payload, source)

    def timer_failed(self, exc: Exception, domain: str, key: Any, ts: int) -> None:
        """A timer's ``on_timer`` raised `exc`: the timer's record error, with the key and
        time in the dead letter (`domain`: "event" or "processing")."""
        if isinstance(exc, KStreamError) and not isinstance(exc, RecordError):
            raise exc
        what = f"{domain}-time timer of key {key!r} at {ts}"
        self.apply(exc, what, None, repr((key, ts)).encode(), [])

    def on_channel_record_too_large(self, item: Any, exc: RecordTooLargeError) -> None:
        """A stream record too large for its channel (found when its batch is written).

        Batches span many input records, so which one emitted it is not known:
        the dead letter names no source position rather than a wrong one.
        """
        self.apply(exc, "a stream record", exc.key, exc.value, [])

    def on_channel_record_unencodable(self, item: Any, exc: UnsupportedTypeError) -> None:
        """A stream record of a type its channel's encoding cannot carry (found when written).

        The dead letter keeps the record's ``repr``: it has no encoding to keep.
        """
        self.apply(exc, "a stream record", None, repr(item).encode(), [])

    def on_sink_refused(self, sink: str, value: Any, exc: RecordError) -> None:
        """Result `value` of sink `sink` was refused by its destination (`SinkContext.refused`).

        Found when the sink writes a batch, after many inputs: the dead letter
        holds the result's ``repr`` and names no source position rather than a
        wrong one.
        """
        self.apply(exc, f"a result of sink {sink}", None, repr(value).encode(), [])

    def apply(
        self,
        exc: BaseException,
        what: str,
        key: bytes | None,
        payload: bytes | None,
        source: Headers,
    ) -> None:
        """Fail, skip or dead-letter `what` (described for messages), which failed with `exc`."""
        if self.policy == "fail":
            raise JobFailedError(
                f"{self.task}: {what} failed: {type(exc).__name__}: {exc}"
            ) from exc
        if self.policy == "skip":
            log.warning("%s: skipped %s: %s: %s", self.task, what, type(exc).__name__, exc)
            self.counts.dropped += 1
            return
        stack = "".join(traceback.format_exception(exc))[-_STACK_CHARS:]
        headers: Headers = [
            (ERROR_HEADER, f"{type(exc).__name__}: {exc}".encode()[:_ERROR_CHARS]),
            (TASK_HEADER, self.task.encode()),
            *source,
            (STACK_HEADER, stack.encode()),
        ]
        topic = dead_letter_topic(self.job_name)
        # The dead letter must fit where the record did not: cut to fit, marked.
        key, payload, headers = fit_dead_letter(key, payload, headers, self.max_record_bytes)
        if self.out is not None:
            self.out(topic, key, payload, headers)
        else:
            produce(self.producer, topic, payload, key, headers=headers, kind="dead-letter topic")
        self.counts.dead_letters += 1
        self.counts.last_dead_letter = f"{self.task}: {what}: {type(exc).__name__}: {exc}"[:300]
        log.warning("%s: %s sent to %s: %s: %s", self.task, what, topic, type(exc).__name__, exc)
