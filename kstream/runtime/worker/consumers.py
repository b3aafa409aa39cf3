"""The consumer a subtask reads its input with (source partitions or channels).

Offsets are the snapshots' business, not the group's: the consumer is assigned
its partitions at the positions a checkpoint recorded and commits nothing by
itself (an at-most-once source commits explicitly, before processing).
"""

from __future__ import annotations

from confluent_kafka import Consumer

from kstream.protocol.names import task_group
from kstream.runtime.kafka import MANUAL_OFFSETS, READ_COMMITTED, client_config

__all__ = ["task_consumer"]

#: How long a fetch waits for data: short, so barriers and control messages are served soon.
FETCH_WAIT_MS = 50
#: Prefetched data per consumer: enough for several full batches.
QUEUED_KBYTES = 32768


def task_consumer(bootstrap: str, job_name: str, task: str) -> Consumer:
    """A read-committed consumer in subtask `task`'s own group, storing no offsets itself."""
    return Consumer(
        client_config(
            bootstrap,
            MANUAL_OFFSETS,
            READ_COMMITTED,
            {
                "group.id": task_group(job_name, task),
                "enable.auto.offset.store": False,
                "fetch.wait.max.ms": FETCH_WAIT_MS,
                "queued.max.messages.kbytes": QUEUED_KBYTES,
            },
        )
    )
