"""A rollback that arrives while a sink waits leaves the subtask, never the error policy.

A sink's `write` may wait in `SinkContext.pump` (every producer slot of a
transactional sink holds a pre-committed epoch); if a rollback arrives meanwhile,
`pump` raises `RollbackInterrupt` and the subtask is about to be replaced. The
record being processed did not fail: it must reach neither the dead-letter topic
nor a "skip", nor fail the job under ``on_error="fail"``.

These tests drive the real record path — a subtask opened by `open_task` on a
real broker, its compiled operator chain and its error policy — for both kinds
of subtask: one reading a source topic, one reading a channel.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from kstream.connectors.kafka import KafkaSource
from kstream.dataflow.job import Job
from kstream.dataflow.outputs import RollbackInterrupt, Sink, SinkContext, SinkSnapshot, SinkWriter
from kstream.dataflow.plan import TaskSpec, plan
from kstream.dataflow.state.api import ValueState
from kstream.dataflow.types import ErrorPolicy
from kstream.infra.admin import Admin
from kstream.protocol.names import channel_topic, dead_letter_topic
from kstream.runtime.channels.writer import ChannelWriter
from kstream.runtime.checkpoint.storage import LocalCheckpointStorage
from kstream.runtime.worker.context import TaskContext
from kstream.runtime.worker.process import open_task
from kstream.runtime.worker.subtask import Subtask
from kstream.testing import produce, read_all, unique_name
from tests.ports import DetachedPorts

pytestmark = pytest.mark.broker

#: How long a record may take to reach the sink through a real broker (CI is slow).
REACH_TIMEOUT_S = 60.0
GENERATION = 1


@dataclass
class WaitingSink(Sink):
    """A sink whose writer waits in `pump` before every write, as a full sink does."""

    name: str = "waiting"
    writes: list[Any] = field(default_factory=list)

    def open(self, ctx: SinkContext) -> SinkWriter:
        return _WaitingWriter(self, ctx)

    @property
    def commit_markers(self) -> bool:
        return False  # it keeps no epochs


class _WaitingWriter(SinkWriter):
    def __init__(self, sink: WaitingSink, ctx: SinkContext) -> None:
        self._sink = sink
        self._pump = ctx.pump

    def write(self, value: Any) -> None:
        self._sink.writes.append(value)
        self._pump()  # the rollback arrives during this wait

    def pre_commit(self, epoch: int) -> SinkSnapshot:
        return SinkSnapshot()


class RollbackArrives(DetachedPorts):
    """The ports of a worker that has just read a `recover` of a newer generation."""

    def pump(self) -> None:
        raise RollbackInterrupt


def count(word: str, _: str, state: ValueState) -> Iterator[tuple[str, int]]:
    n: int = state.get(0) + 1
    state.set(n)
    yield word, n


@dataclass
class Opened:
    rt: TaskContext
    task: Subtask


@pytest.fixture
def opened(bootstrap: str, tmp_path: Path) -> Iterator[Callable[[Job, int], Opened]]:
    """Opens subtask 0 of a stage as a worker does, with a pump that reports a rollback.

    The job's internal topics are created as the runner creates them.
    """
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    tasks: list[Subtask] = []
    with ThreadPoolExecutor(1) as executor:

        def open_stage(job: Job, stage: int) -> Opened:
            rt = TaskContext(
                bootstrap=bootstrap,
                plan=plan(job, 1),
                generation=GENERATION,
                producer=producer,
                storage=LocalCheckpointStorage(tmp_path / "checkpoints"),
                state_root=tmp_path / "state",
                executor=executor,
                ports=RollbackArrives(),
            )
            Admin(bootstrap).create_topics(rt.plan.internal_topics())
            tasks.append(open_task(rt, TaskSpec(stage, 0, 1), None))
            return Opened(rt, tasks[-1])

        yield open_stage
        for task in tasks:
            task.close()
    producer.flush(30)


def poll_until_written(task: Subtask, sink: WaitingSink) -> None:
    """Poll until the record reached the sink (returns only if polling survived it)."""
    deadline = time.monotonic() + REACH_TIMEOUT_S
    while not sink.writes:
        assert time.monotonic() < deadline, "the record never reached the sink"
        task.poll(1.0)


def assert_no_dead_letter(opened: Opened, job: Job) -> None:
    rt, task = opened.rt, opened.task
    assert task.stats.dead_letters == 0
    assert task.stats.dropped == 0
    assert rt.producer.flush(30) == 0
    assert read_all(rt.bootstrap, dead_letter_topic(job.name), isolation="read_uncommitted") == []


POLICIES: tuple[ErrorPolicy, ...] = ("dead-letter", "skip", "fail")


@pytest.mark.parametrize("on_error", POLICIES)
def test_a_source_subtask_lets_the_rollback_through(
    bootstrap: str, opened: Callable[[Job, int], Opened], on_error: ErrorPolicy
) -> None:
    source = unique_name("rollback-src")
    Admin(bootstrap).create_topics({source: 1})
    produce(bootstrap, source, [(None, b"hello")])
    sink = WaitingSink()
    job = Job(unique_name("rollback-src-job"), on_error=on_error)
    job.source(KafkaSource(source)).map(str.upper).sink(sink)
    subtask = opened(job, 0)
    with pytest.raises(RollbackInterrupt):
        poll_until_written(subtask.task, sink)
    assert sink.writes == ["HELLO"]
    assert_no_dead_letter(subtask, job)


@pytest.mark.parametrize("on_error", POLICIES)
def test_a_channel_subtask_lets_the_rollback_through(
    bootstrap: str, opened: Callable[[Job, int], Opened], on_error: ErrorPolicy
) -> None:
    source = unique_name("rollback-unused")
    Admin(bootstrap).create_topics({source: 1})
    sink = WaitingSink()
    job = Job(unique_name("rollback-ch-job"), on_error=on_error)
    job.source(KafkaSource(source)).key_by(lambda w: w).process(count, name="count").sink(sink)
    subtask = opened(job, 1)
    # What the upstream subtask of the same generation writes into the channel.
    producer = subtask.rt.producer
    writer = ChannelWriter(producer, channel_topic(job.name, 1), 0, 1, GENERATION, lambda w: w)
    writer.send("hello")
    writer.flush()
    assert producer.flush(30) == 0
    with pytest.raises(RollbackInterrupt):
        poll_until_written(subtask.task, sink)
    assert sink.writes == [("hello", 1)]
    assert_no_dead_letter(subtask, job)
