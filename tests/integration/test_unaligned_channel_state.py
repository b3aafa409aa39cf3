"""An unaligned snapshot of a channel subtask on a real broker, and its restore.

Deterministic by construction: upstream a's barrier is written while upstream
b's channel holds only what was already processed, so the snapshot is taken
with b's position just after that; b's records and barrier follow. The
in-flight records of b become the snapshot's channel state (an offset range),
the snapshot is acked only once b's barrier came, and a restore into the next
generation processes exactly that range (old generation, named by the
snapshot) - and not the old generation's record after b's barrier, which the
upstream regenerates.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kstream import ValueState
from kstream.connectors.kafka import KafkaSource
from kstream.dataflow.job import Job
from kstream.dataflow.plan import TaskSpec, plan
from kstream.infra.admin import Admin
from kstream.protocol.barrier import Alignment
from kstream.protocol.names import channel_topic
from kstream.runtime.channels.writer import ChannelWriter
from kstream.runtime.checkpoint.storage import LocalCheckpointStorage
from kstream.runtime.worker.channel_task import ChannelTask
from kstream.runtime.worker.context import TaskContext
from kstream.runtime.worker.process import open_task
from kstream.testing import RecordingSink, unique_name
from tests.ports import DetachedPorts

pytestmark = pytest.mark.broker

REACH_TIMEOUT_S = 60.0


def count(word: str, _: str, state: ValueState) -> Iterator[tuple[str, int]]:
    n: int = state.get(0) + 1
    state.set(n)
    yield word, n


def poll_until(task: ChannelTask, done: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + REACH_TIMEOUT_S
    while not done():
        assert time.monotonic() < deadline, f"never reached: {what}"
        task.poll(0.2)


def test_in_flight_records_are_recorded_as_a_range_and_replayed_by_the_restore(
    bootstrap: str, tmp_path: Path
) -> None:
    sink = RecordingSink()
    job = Job(unique_name("ua-task"))
    source = KafkaSource(unique_name("ua-unused"))
    job.source(source).key_by(str).process(count, name="count").sink(sink)
    p = plan(job, 2)
    Admin(bootstrap).create_topics({source.topic: 2, **p.internal_topics()})
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    storage = LocalCheckpointStorage(tmp_path / "checkpoints")
    topic = channel_topic(job.name, 1)
    # Subtask s1-0 reads partition 0 (from upstream a = 0) and 2 (from upstream b = 1);
    # the words d, e, f and g are routed to it.
    a_channel, b_channel = 0, 2

    def upstream(index: int, generation: int) -> ChannelWriter:
        return ChannelWriter(producer, topic, index, 2, generation, str)

    def send(writer: ChannelWriter, *words: str) -> None:
        for word in words:
            writer.send(word)
            writer.flush()  # one channel record per word
        assert producer.flush(30) == 0

    def barrier(writer: ChannelWriter, n: int) -> None:
        writer.barrier(n)
        assert producer.flush(30) == 0

    with ThreadPoolExecutor(1) as executor:

        def open_channel_task(generation: int, restore_from: int | None) -> ChannelTask:
            rt = TaskContext(
                bootstrap=bootstrap,
                plan=p,
                generation=generation,
                producer=producer,
                storage=storage,
                state_root=tmp_path / f"state-{generation}",
                executor=executor,
                ports=DetachedPorts(),
                alignment=Alignment.UNALIGNED,
            )
            task = open_task(rt, TaskSpec(1, 0, 2), restore_from)
            assert isinstance(task, ChannelTask)
            return task

        first = open_channel_task(1, None)
        a1, b1 = upstream(0, 1), upstream(1, 1)
        send(a1, "d")
        send(b1, "u")
        poll_until(first, lambda: len(sink.writes) == 2, "the records before the barriers")
        barrier(a1, 1)
        poll_until(first, lambda: bool(first.aligner.recording), "the snapshot at a's barrier")
        assert sorted(sink.writes) == [("d", 1), ("u", 1)]
        # Taken, not acked: b's channel state is still being recorded.
        assert first.pending == []
        send(b1, "d", "e")  # in flight: after the snapshot, before b's barrier
        barrier(b1, 1)
        send(b1, "f")  # after b's barrier: the upstream regenerates it after a restore
        poll_until(first, lambda: bool(first.pending), "the complete channel state")
        meta = first.pending[0].meta
        assert meta.checkpoint == 1
        # b's range starts where b stood at the snapshot (after u) and ends at its
        # barrier (offset 3); a resumes after its barrier.
        assert meta.channel_offsets == {topic: {a_channel: 2, b_channel: 1}}
        assert meta.channel_replay == {topic: {b_channel: [[3, 1]]}}
        first.pending[0].future.result(timeout=60)
        poll_until(first, lambda: len(sink.writes) == 5, "the record after b's barrier")
        assert sink.writes[2:] == [("d", 2), ("e", 1), ("f", 1)]
        first.close()
        sink.writes.clear()

        restored = open_channel_task(2, 1)
        try:
            send(upstream(1, 2), "g")  # the new generation's own output
            poll_until(restored, lambda: len(sink.writes) >= 3, "the replay and g")
            # The state holds d = 1 (processed before the snapshot); the range
            # replays d and e; the old f after the barrier stays dropped.
            assert sink.writes == [("d", 2), ("e", 1), ("g", 1)]
            assert restored.stats.replayed == 2
        finally:
            restored.close()
    producer.flush(30)
