"""A control reader whose consumer stops returning records is replaced (real broker).

Fault campaigns met librdkafka consumers that, after a broker restart, returned
nothing more while the control topic grew; a worker with such a reader never
joined the next generation and the job rolled back every 15 s forever. The
broker restart that triggers it is not reproducible on demand, so here the
consumer is made to stop returning records by pausing its partition, which
from the reader's side looks the same.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from kstream.infra.admin import Admin
from kstream.protocol.messages import Aborted
from kstream.protocol.names import control_topic
from kstream.runtime import control
from kstream.runtime.control import ControlReader, ControlWriter
from kstream.runtime.kafka import MANUAL_OFFSETS, client_config
from kstream.testing import unique_name

pytestmark = pytest.mark.broker


def read_until(reader: ControlReader, count: int, timeout: float) -> list[int]:
    """Checkpoint ids of the `Aborted` messages read, until `count` arrived or `timeout`."""
    got: list[int] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        got += [m.checkpoint for _, m in reader.poll(0.2) if isinstance(m, Aborted)]
    return got


def stall_prone(
    bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[str, ControlWriter, ControlReader]:
    """A job's control topic, a writer and a reader that checks for a stall after 1 s."""
    monkeypatch.setattr(control, "STALL_S", 1.0)
    job = unique_name("stall")
    Admin(bootstrap).create_topics({control_topic(job): 1})
    return job, ControlWriter(bootstrap, job), ControlReader(bootstrap, job, unique_name("group"))


def test_a_control_reader_that_stops_receiving_is_replaced_and_misses_nothing(
    bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    job, writer, reader = stall_prone(bootstrap, monkeypatch)
    try:
        for n in range(3):
            writer.send(Aborted(n, 1, "before"))
        assert read_until(reader, 3, 60) == [0, 1, 2]
        # The consumer goes quiet for good, as the stuck ones did.
        reader._consumer.pause([TopicPartition(control_topic(job), 0)])
        for n in range(3, 6):
            writer.send(Aborted(n, 1, "while stuck"))
        assert read_until(reader, 3, 60) == [3, 4, 5]
        assert reader.replaced == 1
        # A reader that is merely idle (nothing new) is left alone.
        assert read_until(reader, 1, 3) == []
        assert reader.replaced == 1
    finally:
        reader.close()


def test_a_control_reader_whose_consumer_cannot_answer_at_all_is_replaced(
    bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The stuck reader of a long campaign failed even the end-offset query its own
    # consumer was asked: whether the topic grew must be asked by a fresh client.
    job, writer, reader = stall_prone(bootstrap, monkeypatch)
    try:
        for n in range(2):
            writer.send(Aborted(n, 1, "before"))
        assert read_until(reader, 2, 60) == [0, 1]
        # A consumer with no broker behind it: nothing returned, nothing answered.
        dead = Consumer(client_config("127.0.0.1:1", MANUAL_OFFSETS, {"group.id": "g"}))
        dead.assign([TopicPartition(control_topic(job), 0, 2)])
        reader._consumer.close()
        reader._consumer = dead
        for n in range(2, 4):
            writer.send(Aborted(n, 1, "while stuck"))
        assert read_until(reader, 2, 60) == [2, 3]
        assert reader.replaced == 1
    finally:
        reader.close()
