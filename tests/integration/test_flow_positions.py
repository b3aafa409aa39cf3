"""A reader's position report after a seek (real broker).

A channel reader that aligned a barrier seeks back to just after it. From
then on librdkafka knows no position for that partition until it consumes a
record of it, and a channel sought to its end consumes none until its writer
writes again. A report that left such partitions out kept an older position
in the group for good; the writer, paused on that phantom lag, never wrote
again, and the job stopped (a three-stage word count hung this way about once
in twenty runs).
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from kstream.infra.admin import Admin
from kstream.protocol.names import task_group
from kstream.runtime.channels.flow import REPORT_INTERVAL_S, PositionReport
from kstream.runtime.kafka import client_config
from kstream.runtime.worker.consumers import FETCH_WAIT_MS, task_consumer
from kstream.testing import unique_name

pytestmark = pytest.mark.broker


def _produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer(client_config(bootstrap))
    for i in range(count):
        producer.produce(topic, b"r%d" % i, partition=0)
    assert producer.flush(30) == 0


def _consume(consumer: Consumer, count: int) -> list[int]:
    offsets: list[int] = []
    deadline = time.monotonic() + 60
    while len(offsets) < count and time.monotonic() < deadline:
        offsets += [m.offset() or 0 for m in consumer.consume(100, 0.5) if m.error() is None]
    return offsets


def _reported(
    bootstrap: str, group: str, topic: str, report: PositionReport, want: int
) -> int | None:
    """Step `report` until the group holds `want` for `topic`[0] (or 30 s pass); the last seen."""
    admin = AdminClient(client_config(bootstrap))
    request = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])]
    seen = None
    now = time.monotonic()
    deadline = now + 30
    while time.monotonic() < deadline:
        now += REPORT_INTERVAL_S
        report.step(now)
        time.sleep(0.1)  # pacing the polls of the group's offsets, within the deadline
        answer = admin.list_consumer_group_offsets(request)[group].result(10)
        seen = answer.topic_partitions[0].offset
        if seen == want:
            break
    return seen


def test_a_partition_sought_to_its_end_reports_where_it_was_placed(bootstrap: str) -> None:
    topic = unique_name("positions")
    job = unique_name("job")
    Admin(bootstrap).create_topics({topic: 1})
    consumer = task_consumer(bootstrap, job, "s1-0", FETCH_WAIT_MS)
    group = task_group(job, "s1-0")
    report = PositionReport(consumer)
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        report.placed(topic, 0, 0)
        _produce(bootstrap, topic, 10)
        assert _consume(consumer, 10) == list(range(10))
        assert _reported(bootstrap, group, topic, report, 10) == 10
        # A barrier at 19 blocks the channel: records after it are dropped, the
        # partition paused; the alignment ends and the reader seeks to just after
        # the barrier, which is the channel's end: nothing more comes.
        _produce(bootstrap, topic, 10)
        assert _consume(consumer, 10) == list(range(10, 20))
        tp = TopicPartition(topic, 0)
        consumer.pause([tp])
        consumer.resume([tp])
        consumer.seek(TopicPartition(topic, 0, 20))
        report.placed(topic, 0, 20)
        assert consumer.position([tp])[0].offset < 0  # what librdkafka knows now
        assert _reported(bootstrap, group, topic, report, 20) == 20
        # A seek back (re-reading after a barrier) reports the lower offset, then,
        # once records are consumed, the consumer's own position again.
        consumer.seek(TopicPartition(topic, 0, 15))
        report.placed(topic, 0, 15)
        assert _reported(bootstrap, group, topic, report, 15) == 15
        assert _consume(consumer, 5) == list(range(15, 20))
        assert _reported(bootstrap, group, topic, report, 20) == 20
    finally:
        consumer.close()
