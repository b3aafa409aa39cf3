"""`kstream.runtime.worker.ends`: a subtask's sinks and channel writers, opened as its chain
compiles, without Kafka (a producer that keeps what it is handed)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kstream import Job, KafkaSource, Sink
from kstream.dataflow.outputs import SinkContext, SinkSnapshot, SinkWriter
from kstream.dataflow.plan import TaskSpec, input_topic, plan
from kstream.runtime.channels.format import RECORD, BatchFormat, decode_batch, decode_header
from kstream.runtime.checkpoint.restore import Restored
from kstream.runtime.checkpoint.storage import LocalCheckpointStorage, SnapshotMeta
from kstream.runtime.state.element import ElementContext
from kstream.runtime.state.store import key_bytes
from kstream.runtime.worker.chain import compile_chain
from kstream.runtime.worker.context import TaskContext
from kstream.runtime.worker.dead_letters import PolicyCounts, RecordErrors
from kstream.runtime.worker.ends import Ends
from tests.ports import DetachedPorts


class KeepingProducer:
    """Keeps (topic, partition, value) of every record handed to it."""

    def __init__(self) -> None:
        self.records: list[tuple[str, int, bytes]] = []

    def produce(
        self, topic: str, value: bytes, key: bytes | None = None, partition: int = -1, **_: Any
    ) -> None:
        self.records.append((topic, partition, value))

    def poll(self, timeout: float = 0) -> int:
        return 0


class Writer(SinkWriter):
    def __init__(self, calls: list[str], counts_itself: bool) -> None:
        self.calls = calls
        self.written: list[Any] = []
        if counts_itself:
            self.handed = 0

    def write(self, value: Any) -> None:
        self.written.append(value)
        if self.handed is not None:
            self.handed += 1

    def recover(self, epoch: int | None, kept: SinkSnapshot | None) -> None:
        self.calls.append(f"recover {epoch} {kept}")

    def begin_epoch(self, epoch: int) -> None:
        self.calls.append(f"begin {epoch}")

    def pre_commit(self, epoch: int) -> SinkSnapshot:
        return SinkSnapshot()


@dataclass
class Recording(Sink):
    label: str
    counts_itself: bool = False
    contexts: list[SinkContext] = field(default_factory=list)
    writers: list[Writer] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"rec:{self.label}"

    @property
    def commit_markers(self) -> bool:
        return False  # it keeps no epochs

    def open(self, ctx: SinkContext) -> SinkWriter:
        self.contexts.append(ctx)
        self.writers.append(Writer(self.calls, self.counts_itself))
        return self.writers[-1]


@dataclass
class Counts:
    records_out: int = 0


@pytest.fixture
def executor() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(1) as pool:
        yield pool


def opened(
    job: Job, stage: int, tmp_path: Path, executor: ThreadPoolExecutor
) -> tuple[Any, Ends, Counts, KeepingProducer, DetachedPorts]:
    """Compile subtask 0 of `stage` with its ends opened, as a subtask does."""
    producer, ports, counts = KeepingProducer(), DetachedPorts(), Counts()
    ctx = TaskContext(
        bootstrap="nowhere:9092",
        plan=plan(job, 1),
        generation=3,
        producer=producer,
        storage=LocalCheckpointStorage(tmp_path / "checkpoints"),
        state_root=tmp_path / "state",
        executor=executor,
        ports=ports,
    )
    spec = TaskSpec(stage, 0, 1)
    element = ElementContext(timed=False)
    ends = Ends(
        ctx,
        spec,
        channel_producer=producer,
        errors=RecordErrors(job.on_error, job.name, spec.id, producer, 1 << 20, PolicyCounts()),
        element=element,
        batch_format=BatchFormat(job.channel_serde),
        key_bytes=key_bytes,
        max_parallelism=job.max_parallelism,
        counts=counts,
    )
    push = compile_chain(
        job.stages[stage].root,
        stage_index=stage,
        state=None,
        open_sink=ends.open_sink,
        open_edge=ends.open_edge,
        element=element,
    )
    return push, ends, counts, producer, ports


def branching() -> tuple[Job, Recording, Recording, Recording]:
    """Stage 0 writes two sinks and an edge; stage 1 one more sink."""
    plain, counting, after = Recording("plain"), Recording("counting", True), Recording("after")
    job = Job("ends")
    s = job.source(KafkaSource("in"))
    s.map(lambda v: v + 1).sink(plain)
    s.sink(counting)
    s.rebalance().sink(after)
    return job, plain, counting, after


def test_sinks_are_named_and_given_marker_partitions_in_compile_order(
    tmp_path: Path, executor: ThreadPoolExecutor
) -> None:
    job, plain, counting, after = branching()
    _, ends, _, _, ports = opened(job, 0, tmp_path, executor)
    assert list(ends.sinks) == ["rec:plain#0", "rec:counting#1"]
    assert ends.sinks["rec:plain#0"] is plain.writers[0]
    assert [c.marker_partition for c in plain.contexts + counting.contexts] == [0, 1]
    ctx = plain.contexts[0]
    assert (ctx.job, ctx.task, ctx.generation) == ("ends", "s0-0", 3)
    # The sink waits and checks deliveries through the worker.
    assert ctx.pump == ports.pump
    assert ctx.raise_if_undelivered == ports.raise_if_undelivered
    assert ctx.event_time is None  # no event time in this stage
    _, later, _, _, _ = opened(job, 1, tmp_path, executor)
    assert list(later.sinks) == ["rec:after#0"]
    assert after.contexts[0].marker_partition == 2


def test_results_of_sinks_that_do_not_count_them_are_counted(
    tmp_path: Path, executor: ThreadPoolExecutor
) -> None:
    job, plain, counting, _ = branching()
    push, _, counts, _, _ = opened(job, 0, tmp_path, executor)
    for v in [1, 2, 3]:
        push(v)
    assert plain.writers[0].written == [2, 3, 4]
    assert counting.writers[0].written == [1, 2, 3]
    # The counting sink counts its own (`handed`): only the plain sink's are added.
    assert counts.records_out == 3
    assert counting.writers[0].handed == 3


def test_an_edge_writes_batches_into_the_next_stages_channel(
    tmp_path: Path, executor: ThreadPoolExecutor
) -> None:
    job, _, _, _ = branching()
    push, ends, _, producer, _ = opened(job, 0, tmp_path, executor)
    assert len(ends.writers) == 1
    for v in [1, 2, 3]:
        push(v)
    assert producer.records == []  # batched until the subtask flushes
    ends.writers[0].flush()
    target = job.stages[1]
    [(topic, partition, value)] = producer.records
    assert topic == input_topic(job.name, 1, target.inputs[0])
    assert partition == 0
    assert decode_header(value) == (RECORD, 3)  # the generation's records
    assert decode_batch(value) == [1, 2, 3]


def test_start_recovers_each_sink_from_what_the_checkpoint_kept(
    tmp_path: Path, executor: ThreadPoolExecutor
) -> None:
    job, plain, counting, _ = branching()
    _, ends, _, _, _ = opened(job, 0, tmp_path, executor)
    kept = SinkSnapshot({"epoch": 4}, [b"wal"])
    meta = SnapshotMeta(4, 2, "s0-0", sink={"rec:plain#0": {"epoch": 4}})
    ends.start(Restored(4, meta, None, {"rec:plain#0": kept}))
    assert plain.calls == [f"recover 4 {kept}", "begin 5"]
    assert counting.calls == [f"recover 4 {SinkSnapshot({}, None)}", "begin 5"]


def test_start_from_scratch_recovers_nothing(tmp_path: Path, executor: ThreadPoolExecutor) -> None:
    job, plain, _, _ = branching()
    _, ends, _, _, _ = opened(job, 0, tmp_path, executor)
    ends.start(Restored(None))
    assert plain.calls == ["recover None None", "begin 1"]
