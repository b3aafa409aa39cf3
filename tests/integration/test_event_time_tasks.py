"""A channel subtask with event time on a real broker: timed channel records in,
timers fired by the watermark, and a restore that keeps the input watermark and the
pending timers (judged from what the restored subtask emits)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kstream.connectors.kafka import KafkaSource
from kstream.dataflow.job import Job
from kstream.dataflow.plan import TaskSpec, plan
from kstream.dataflow.state.api import KeyedContext
from kstream.infra.admin import Admin
from kstream.protocol.names import channel_topic
from kstream.runtime.channels.writer import ChannelWriter
from kstream.runtime.checkpoint.storage import LocalCheckpointStorage
from kstream.runtime.state.element import ElementContext
from kstream.runtime.worker.channel_task import ChannelTask
from kstream.runtime.worker.context import TaskContext
from kstream.runtime.worker.process import open_task
from kstream.testing import RecordingSink, unique_name
from tests.ports import DetachedPorts

pytestmark = pytest.mark.broker

REACH_TIMEOUT_S = 60.0


def note(key: str, value: int, ctx: KeyedContext) -> Iterator[tuple[str, str, int, int]]:
    assert ctx.timestamp is not None
    ctx.timers.register(ctx.timestamp + 100)
    yield ("record", key, ctx.timestamp, ctx.watermark)


def fired(key: str, ts: int, ctx: KeyedContext) -> Iterator[tuple[str, str, int, int]]:
    yield ("timer", key, ts, ctx.watermark)


def test_a_restored_channel_subtask_keeps_its_input_watermark_and_pending_timers(
    bootstrap: str, tmp_path: Path
) -> None:
    sink = RecordingSink()
    job = Job(unique_name("et-task"))
    source = KafkaSource(unique_name("et-unused"), timestamps="kafka")
    job.source(source).key_by(str).process(note, on_timer=fired, name="note").sink(sink)
    p = plan(job, 1)
    Admin(bootstrap).create_topics({source.topic: 1, **p.internal_topics()})
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    storage = LocalCheckpointStorage(tmp_path / "checkpoints")
    element = ElementContext(timed=True)

    def upstream(generation: int) -> ChannelWriter:
        """What the upstream subtask of `generation` writes into the channel."""
        return ChannelWriter(
            producer, channel_topic(job.name, 1), 0, 1, generation, str, element=element
        )

    def send(writer: ChannelWriter, key: str, ts: int, watermark: int) -> None:
        element.timestamp, element.stamp, element.watermark = ts, ts, watermark
        writer.send(key)
        writer.flush()
        assert producer.flush(30) == 0

    def poll_until(task: ChannelTask, n: int) -> None:
        deadline = time.monotonic() + REACH_TIMEOUT_S
        while len(sink.writes) < n:
            assert time.monotonic() < deadline, f"only {sink.writes}"
            task.poll(0.5)

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
            )
            task = open_task(rt, TaskSpec(1, 0, 1), restore_from)
            assert isinstance(task, ChannelTask)
            return task

        first = open_channel_task(1, None)
        w1 = upstream(1)
        send(w1, "a", 1_000, 500)
        send(w1, "b", 1_050, 1_100)  # the watermark after b fires a's timer at 1 100
        poll_until(first, 3)
        assert sink.writes == [
            ("record", "a", 1_000, -(2**63)),  # applied after the record: none yet
            ("record", "b", 1_050, 500),
            ("timer", "a", 1_100, 1_100),
        ]
        first.snapshot(1, channel_offsets={channel_topic(job.name, 1): {0: 2}})
        first.pending[0].future.result(timeout=60)
        first.close()
        sink.writes.clear()

        restored = open_channel_task(2, 1)
        try:
            w2 = upstream(2)
            # A record whose batch carries an older watermark: the restored input
            # watermark (1 100) must hold, not start again from nothing.
            send(w2, "c", 1_120, 0)
            send(w2, "d", 1_300, 1_200)  # fires b's timer, restored from RocksDB
            poll_until(restored, 3)
            assert sink.writes == [
                ("record", "c", 1_120, 1_100),
                ("record", "d", 1_300, 1_100),
                ("timer", "b", 1_150, 1_200),
            ]
        finally:
            restored.close()
    producer.flush(30)
