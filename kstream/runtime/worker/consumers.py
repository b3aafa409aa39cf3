"""The consumer a subtask reads its input with (source partitions or channels).

Offsets are the snapshots' business, not the group's: the consumer is assigned
its partitions at the positions a checkpoint recorded and commits nothing by
itself (an at-most-once source commits explicitly, before processing).
"""

from __future__ import annotations

from confluent_kafka import Consumer

from kstream.protocol.names import task_group
from kstream.runtime.kafka import MANUAL_OFFSETS, READ_COMMITTED, client_config

__all__ = ["FETCH_WAIT_MS", "LOOP_HEAD_FETCH_WAIT_MS", "task_consumer"]

#: How long a task consumer's fetch waits for data when none comes. Long: data
#: arriving ends a waiting fetch at once, so the wait only sets how often an idle
#: subtask asks the broker (twice a second instead of twenty times). It would
#: delay a partition resumed after `Consumer.pause` (one fetch is in flight per
#: broker, and the resumed partition joins the next): flow control pauses by not
#: reading, and alignment holds a blocked channel's records instead of pausing it
#: (internals, "Holding a blocked channel") but for an overflow.
FETCH_WAIT_MS = 500
#: The same for a loop head, whose flow control pauses and resumes its forward
#: channels in the consumer (it reads its loop channels on): short, so that a
#: resumed channel is fetched soon.
LOOP_HEAD_FETCH_WAIT_MS = 50
#: Prefetched data per consumer: enough for several full batches.
QUEUED_KBYTES = 32768


def task_consumer(bootstrap: str, job_name: str, task: str, fetch_wait_ms: int) -> Consumer:
    """A read-committed consumer in subtask `task`'s own group, storing no offsets
    itself, whose fetches wait at most `fetch_wait_ms` for data, and which reads
    from the oldest record kept when its offset is gone."""
    return Consumer(
        client_config(
            bootstrap,
            MANUAL_OFFSETS,
            READ_COMMITTED,
            {
                "group.id": task_group(job_name, task),
                "enable.auto.offset.store": False,
                "fetch.wait.max.ms": fetch_wait_ms,
                "queued.max.messages.kbytes": QUEUED_KBYTES,
                # An offset the log no longer holds (retention deleted it while the
                # job was stopped, or between resolving "the beginning" and the
                # first fetch) reads on from the oldest record kept, not from the
                # end: librdkafka's default skipped every record still there.
                "auto.offset.reset": "earliest",
            },
        )
    )
