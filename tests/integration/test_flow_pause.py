"""How flow control holds a writer back (real broker): by not reading, not by pausing.

librdkafka (2.16) drops a paused partition's prefetched records and fetches
it again only on its next fetch round, up to a second after ``resume``. A
word count's source paused and resumed by flow control several times a
second therefore sat idle most of the time (3 M words: 115-125 k words/s
against 340 k words/s with the pause kept by not reading). So a gate's pause
must leave the consumer alone: `FlowControl.consume` reads nothing while
paused. Only a subtask that must read some inputs while paused (a loop head's
loop channels) pauses the consumer's other partitions.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kstream.dataflow.plan import TaskSpec, plan
from kstream.examples import wordcount
from kstream.infra.admin import Admin
from kstream.protocol.flow import FlowConfig
from kstream.runtime.channels.flow import FlowControl, written_channels
from kstream.runtime.kafka import client_config
from kstream.runtime.worker.consumers import (
    FETCH_WAIT_MS,
    LOOP_HEAD_FETCH_WAIT_MS,
    task_consumer,
)
from kstream.testing import unique_name

pytestmark = pytest.mark.broker

#: The bound of the gates here: a few channel records.
BOUND = 2


class _Recording:
    """A consumer that notes every pause, resume and consume it is asked for."""

    def __init__(self, consumer: Any) -> None:
        self._consumer = consumer
        self.calls: list[str] = []

    def pause(self, tps: list[TopicPartition]) -> None:
        self.calls.append("pause " + ",".join(f"{tp.topic}[{tp.partition}]" for tp in tps))
        self._consumer.pause(tps)

    def resume(self, tps: list[TopicPartition]) -> None:
        self.calls.append("resume " + ",".join(f"{tp.topic}[{tp.partition}]" for tp in tps))
        self._consumer.resume(tps)

    def consume(self, limit: int, timeout: float) -> list[Any]:
        self.calls.append("consume")
        return list(self._consumer.consume(limit, timeout))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._consumer, name)


def _produce(bootstrap: str, topic: str, partition: int, count: int) -> None:
    producer = Producer(client_config(bootstrap))
    for i in range(count):
        producer.produce(topic, b"r%d" % i, partition=partition)
    assert producer.flush(30) == 0


def _step_until(flow: FlowControl, consumer: Any, paused: bool) -> None:
    """Step `flow` until its gate is (not) paused: the probe answers on its own thread."""
    deadline = time.monotonic() + 30
    while flow.paused != paused:
        assert time.monotonic() < deadline, f"the gate never became paused={paused}"
        flow.step(time.monotonic(), consumer)
        time.sleep(0.02)  # pacing the steps while the probe thread asks the broker


@pytest.mark.parametrize("loop", [False, True], ids=["plain", "loop-head"])
def test_a_paused_writer_reads_nothing_and_only_a_loop_head_pauses_its_consumer(
    bootstrap: str, loop: bool
) -> None:
    job = unique_name("flowpause")
    p = plan(wordcount.job({"input": "in", "output": "out", "name": job}), 2)
    spec = TaskSpec(0, 0, 2)
    channels = written_channels(p, spec)
    channel_topic = next(iter(channels)).topic
    source, feedback = unique_name("flowpause-in"), unique_name("flowpause-loop")
    Admin(bootstrap).create_topics({channel_topic: 4, source: 1, feedback: 1})
    _produce(bootstrap, source, 0, 50)
    # The channel to the first counting subtask holds more than the bound, read by nobody.
    full = min(channels)
    _produce(bootstrap, full.topic, full.partition, BOUND + 3)

    never_paused = frozenset({(feedback, 0)}) if loop else frozenset()
    flow = FlowControl(bootstrap, p, spec, FlowConfig(max_lag=BOUND), never_paused=never_paused)
    # A loop head (a channel subtask) reads its feedback channels on while paused.
    consumer = task_consumer(
        bootstrap, job, spec.id, LOOP_HEAD_FETCH_WAIT_MS if loop else FETCH_WAIT_MS
    )
    consumer.assign([TopicPartition(source, 0, 0), TopicPartition(feedback, 0, 0)])
    recording = _Recording(consumer)
    try:
        _step_until(flow, recording, paused=True)  # a gate opens paused
        # and stays paused once the probe answers: the channel holds more than the bound.
        deadline = time.monotonic() + 30
        while flow.gate.probed_at is None:
            assert time.monotonic() < deadline, "the probe never answered"
            flow.step(time.monotonic(), recording)
            time.sleep(0.02)  # pacing the steps while the probe thread asks the broker
        assert flow.paused
        read = flow.consume(recording, 100, 0.05)
        if loop:
            # The loop channel is read on while paused; the other input is not.
            assert recording.calls[0] == f"pause {source}[0]"
            assert "consume" in recording.calls
            assert read == []  # the loop channel is empty, the source is paused
        else:
            assert read == []
            assert recording.calls == []  # neither paused nor read

        # The reader catches up: its group (the one the probe asks) holds the channel's end.
        reader = Consumer(client_config(bootstrap, {"group.id": channels[full]}))
        reader.commit(
            offsets=[TopicPartition(full.topic, full.partition, BOUND + 3)], asynchronous=False
        )
        reader.close()
        _step_until(flow, recording, paused=False)
        got: list[Any] = []
        deadline = time.monotonic() + 30
        while len(got) < 50 and time.monotonic() < deadline:
            got += [m for m in flow.consume(recording, 100, 0.5) if m.error() is None]
        assert [m.offset() for m in got] == list(range(50))
        if loop:
            assert any(c.startswith("resume") and f"{source}[0]" in c for c in recording.calls)
        else:
            assert not any(c.startswith(("pause", "resume")) for c in recording.calls)
    finally:
        flow.close()
        consumer.close()


def test_records_a_reader_drops_do_not_lower_the_fan_out(bootstrap: str) -> None:
    """A middle stage reads barriers, records dropped while aligning and stale
    copies after a seek: none of them makes output. Counted as read, a turn that
    read many of them and wrote one channel record looked like a fan-out near 0,
    and the next read, sized by it, overfilled the channels. Such a subtask
    counts only what went through its chain (`FlowControl.processed`)."""
    job = unique_name("flowfan")
    p = plan(wordcount.job({"input": "in", "output": "out", "name": job}), 2)
    spec = TaskSpec(0, 0, 2)
    channels = written_channels(p, spec)
    channel = min(channels)
    source = unique_name("flowfan-in")
    Admin(bootstrap).create_topics({channel.topic: 4, source: 1})
    _produce(bootstrap, source, 0, 50)
    flow = FlowControl(bootstrap, p, spec, FlowConfig(max_lag=1000))
    consumer = task_consumer(bootstrap, job, spec.id, FETCH_WAIT_MS)
    consumer.assign([TopicPartition(source, 0, 0)])
    writer = flow.counted(Producer(client_config(bootstrap)))
    try:
        _step_until(flow, consumer, paused=True)  # a gate opens paused
        _step_until(flow, consumer, paused=False)  # until its first probe answers

        def turn(read: int, processed: int, written: int) -> None:
            got: list[Any] = []
            deadline = time.monotonic() + 30
            while len(got) < read:
                assert time.monotonic() < deadline, "the records were not read back"
                got += flow.consume(consumer, read - len(got), 0.5, counted=False)
            flow.processed(processed)
            for _ in range(written):
                writer.produce(channel.topic, b"x", None, channel.partition)
            flow.step(time.monotonic(), consumer)

        turn(read=10, processed=10, written=5)  # 5 channel records for 10 input records
        assert flow.gate.fanout == pytest.approx(0.5)
        turn(read=40, processed=0, written=1)  # all dropped; the turn's partial batch
        # Unchanged: had the 40 counted as read, the estimate would have fallen.
        assert flow.gate.fanout == pytest.approx(0.5)
    finally:
        flow.close()
        consumer.close()
