"""A loop head on a real broker: its loop channel logged as channel state, and replayed.

Deterministic by construction: the test writes the head's forward channel (as
its upstream stage would) and its loop channel (as the loop's tail would),
and drives the head subtask. Barrier 1 on the forward channel makes the head
snapshot at once (its only aligned channel) while its loop channel holds only
what it already processed; the records fed back afterwards, before the loop's
own barrier 1, are the snapshot's channel state (an offset range), the
snapshot is acked only once that barrier came back, and a restore into the
next generation processes exactly that range, not the old generation's record
after the barrier (the restored tail regenerates it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kstream.connectors.kafka import KafkaSource
from kstream.dataflow.job import Job
from kstream.dataflow.plan import TaskSpec, plan
from kstream.infra.admin import Admin
from kstream.protocol.barrier import Alignment
from kstream.protocol.flow import FlowConfig
from kstream.protocol.names import channel_topic, loop_topic
from kstream.runtime.channels.writer import ChannelWriter
from kstream.runtime.checkpoint.storage import LocalCheckpointStorage
from kstream.runtime.worker.channel_task import ChannelTask
from kstream.runtime.worker.context import TaskContext
from kstream.runtime.worker.process import open_task
from kstream.testing import RecordingSink, unique_name
from tests.ports import DetachedPorts

pytestmark = pytest.mark.broker

REACH_TIMEOUT_S = 60.0


def poll_until(task: ChannelTask, done: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + REACH_TIMEOUT_S
    while not done():
        assert time.monotonic() < deadline, f"never reached: {what}"
        task.poll(0.2)
        task.flush()


def minus_one(n: int) -> int:
    return n - 1


def positive(n: int) -> bool:
    return n > 0


@pytest.mark.parametrize("alignment", [Alignment.ALIGNED, Alignment.UNALIGNED])
def test_the_loop_channel_is_recorded_from_the_snapshot_to_its_barrier_and_replayed(
    bootstrap: str, tmp_path: Path, alignment: Alignment
) -> None:
    sink = RecordingSink()
    job = Job(unique_name("loop-task"))
    source = KafkaSource(unique_name("loop-unused"))
    head = job.source(source).iterate("count-down")
    head.sink(sink)  # what the head processed, in order
    tail = head.map(minus_one).rebalance()
    head.feed_back(tail.filter(positive))
    p = plan(job, 1)
    Admin(bootstrap).create_topics({source.topic: 1, **p.internal_topics()})
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    storage = LocalCheckpointStorage(tmp_path / "checkpoints")
    forward, loop = channel_topic(job.name, 1), loop_topic(job.name, 1)

    def writer(topic: str, generation: int) -> ChannelWriter:
        return ChannelWriter(producer, topic, 0, 1, generation, None)

    def send(w: ChannelWriter, *values: int) -> None:
        for v in values:
            w.send(v)
            w.flush()  # one channel record per value
        assert producer.flush(30) == 0

    def barrier(w: ChannelWriter, n: int) -> None:
        w.barrier(n)
        assert producer.flush(30) == 0

    with ThreadPoolExecutor(1) as executor:

        def open_head(generation: int, restore_from: int | None) -> ChannelTask:
            rt = TaskContext(
                bootstrap=bootstrap,
                plan=p,
                generation=generation,
                producer=producer,
                storage=storage,
                state_root=tmp_path / f"state-{generation}",
                executor=executor,
                ports=DetachedPorts(),
                alignment=alignment,
                flow=FlowConfig(max_lag=0),
            )
            task = open_task(rt, TaskSpec(1, 0, 1), restore_from)
            assert isinstance(task, ChannelTask)
            return task

        first = open_head(1, None)
        fwd1, loop1 = writer(forward, 1), writer(loop, 1)
        send(fwd1, 10)
        poll_until(first, lambda: len(sink.writes) == 1, "the first record")
        send(loop1, 20)  # fed back before the snapshot, and processed before it
        poll_until(first, lambda: len(sink.writes) == 2, "the records before the barrier")
        barrier(fwd1, 1)
        poll_until(first, lambda: bool(first.aligner.recording), "the snapshot at the barrier")
        assert first.aligner.recording == {1: frozenset({first.channels[loop, 0]})}
        # Taken, not acked: the loop channel's state is still being recorded.
        assert first.pending == []
        send(loop1, 30, 31)  # fed back after the snapshot, before barrier 1 came around
        barrier(loop1, 1)
        send(loop1, 40)  # after it: the restored tail regenerates it
        poll_until(first, lambda: bool(first.pending), "the complete loop channel state")
        meta = first.pending[0].meta
        assert meta.checkpoint == 1
        # The loop's range starts after 20 (offset 1) and ends at its barrier (offset 3).
        assert meta.channel_offsets == {forward: {0: 2}, loop: {0: 1}}
        assert meta.channel_replay == {loop: {0: [[3, 1]]}}
        first.pending[0].future.result(timeout=60)
        poll_until(first, lambda: len(sink.writes) == 5, "the record after the loop's barrier")
        assert sink.writes == [10, 20, 30, 31, 40]
        first.close()
        sink.writes.clear()

        restored = open_head(2, 1)
        try:
            send(writer(loop, 2), 50)  # the new generation's tail feeds back
            poll_until(restored, lambda: len(sink.writes) >= 3, "the replay and 50")
            # 10 and 20 are in the restored state; the range replays 30 and 31;
            # the old 40 after the loop's barrier stays dropped.
            assert sink.writes == [30, 31, 50]
            assert restored.stats.replayed == 2
        finally:
            restored.close()
    producer.flush(30)
