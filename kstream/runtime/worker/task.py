"""A running subtask: consumer, fused operator chain, state, outputs and its snapshots.

Two kinds, by what feeds the stage:

* `SourceTask` reads user topic partitions. It snapshots between two batches,
  recording its next offsets, when a checkpoint is triggered or when it starts
  one itself (its source's `snapshot_every_ms`, or `kstream.request_snapshot()`
  in its stage): `kstream.protocol.initiation` decides.
* `ChannelTask` reads the channel partitions of every input of its stage and
  aligns barriers over all of them with one `kstream.protocol.barrier.Aligner`;
  it snapshots when the aligner says so.

Both push records through the stage's fused chain (`kstream.runtime.worker.chain`),
opening its ends here (sink writers, channel writers), apply the job's error
policy to records that fail (`kstream.runtime.worker.dead_letters`), and hand
finished snapshots to the worker, which sends the acks once they are durable.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, assert_never

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    TIMESTAMP_NOT_AVAILABLE,
    Message,
    TopicPartition,
)

from kstream.dataflow import snapshot_request
from kstream.dataflow.graph import Node
from kstream.dataflow.inputs import snapshot_every_ms
from kstream.dataflow.outputs import Guarantee, SinkContext, SinkSnapshot, SinkWriter
from kstream.dataflow.plan import Plan, TaskSpec, input_topic
from kstream.dataflow.state.timers import TimerDomain
from kstream.errors import (
    CheckpointError,
    DecodeError,
    JobFailedError,
    KStreamError,
    ProtocolError,
    RecordError,
    TimestampError,
)
from kstream.protocol.barrier import (
    AbandonAlignment,
    Action,
    Aligner,
    Alignment,
    AlignmentTimedOut,
    BarrierArrived,
    Block,
    Channel,
    ChannelStateComplete,
    CheckpointAborted,
    Drop,
    Process,
    RecordArrived,
    Replay,
    TakeSnapshot,
    Unblock,
)
from kstream.protocol.counters import WorkerCounters
from kstream.protocol.cuts import Cut, CutKind
from kstream.protocol.flow import FlowConfig
from kstream.protocol.initiation import Decline, Ignore, SourceInitiation, Take
from kstream.protocol.limits import DEFAULT_PRODUCER_BYTES
from kstream.protocol.messages import ControlMessage, Declined, Initiated
from kstream.protocol.snapshot_id import LamportClock, source_initiator
from kstream.protocol.watermarks import InputWatermarks, SourceWatermarks, Unusable
from kstream.runtime.channels.flow import FlowControl, PositionReport
from kstream.runtime.channels.format import (
    BARRIER,
    RECORD,
    TIMED,
    BatchFormat,
    barrier_checkpoint,
    decode_header,
    decode_timed,
)
from kstream.runtime.channels.writer import ChannelWriter
from kstream.runtime.checkpoint.storage import CheckpointStorage, SnapshotMeta, check_state_serde
from kstream.runtime.kafka import connect, request
from kstream.runtime.state.element import ElementContext, now_ms
from kstream.runtime.state.store import KEY_FORMAT, StateStore, key_encoder
from kstream.runtime.worker.chain import (
    TimerOperator,
    compile_chain,
    fire_due,
    has_process,
    input_pushes,
)
from kstream.runtime.worker.consumers import task_consumer
from kstream.runtime.worker.dead_letters import RAW, PolicyCounts, RecordErrors
from kstream.runtime.worker.faults import Faults

__all__ = ["ChannelTask", "PendingAck", "SourceTask", "Subtask", "TaskRuntime", "open_task"]

log = logging.getLogger("kstream.task")

_V = TypeVar("_V")

#: Records fetched per `consume` call: large batches amortise the Python call overhead.
BATCH = 1000
#: A source with a trigger waiting reads at most this many records before its
#: snapshot: those fetched already join this checkpoint, but a full batch's
#: work (a backlog's) would hold every barrier of the checkpoint back.
TRIGGERED_BATCH = 100
#: A gap between two polls of a source counts at most this much towards idleness
#: (ms): more than a poll's wait, far less than any sensible idle timeout.
MAX_POLL_GAP_MS = 100


@dataclass
class TaskRuntime:
    """What every subtask of one worker shares in one generation."""

    bootstrap: str
    plan: Plan
    generation: int
    producer: Any  # confluent_kafka.Producer (shared, idempotent)
    storage: CheckpointStorage
    state_root: Path
    executor: Executor
    send_control: Callable[[ControlMessage], None]
    faults: Faults = field(default_factory=Faults)
    guarantee: Guarantee = "exactly-once"
    transaction_timeout_ms: int = 600_000
    #: Serve pending complete/abort control messages (see `SinkContext.pump`).
    pump: Callable[[], None] = lambda: None
    #: Raise if the shared producer lost a record (see `SinkContext`).
    raise_if_undelivered: Callable[[], None] = lambda: None
    #: The shared producer's ``message.max.bytes``: no record it writes (channel
    #: record, plain sink output, dead letter) may be larger (`kstream.protocol.limits`).
    max_record_bytes: int = DEFAULT_PRODUCER_BYTES
    #: `JobIdentity.fingerprint` of the job, recorded in every snapshot.
    identity: str = ""
    #: Flow control: how much the channels a subtask writes may hold
    #: (`kstream.runtime.channels.flow`).
    flow: FlowConfig = field(default_factory=FlowConfig)
    #: How a subtask with several input channels snapshots (`kstream.protocol.barrier`).
    alignment: Alignment = Alignment.ALIGNED
    #: Seconds an alignment may last before it switches to unaligned (None: never).
    alignment_timeout_s: float | None = None
    #: The worker's snapshot clock: the largest checkpoint id it has seen.
    clock: LamportClock = field(default_factory=LamportClock)
    #: Seconds between the snapshots each source subtask starts itself, for every
    #: source (``--source-snapshot-interval``; None: each source's `snapshot_every_ms`).
    source_snapshot_every: float | None = None
    #: Tells this worker's subtasks at once that a source subtask of it started a
    #: snapshot (`Subtask.announced`), before its `Initiated` comes back through the
    #: control topic: a sibling source polled next would otherwise start one too.
    announce: Callable[[int], None] = field(default=lambda _: None)
    #: Concurrent snapshots (unaligned; `--concurrent`): up to this many in flight,
    #: taken in any id order where no sink needs id order (0: off).
    concurrent: int = 0


@dataclass(frozen=True)
class _Taken:
    """A snapshot taken but not yet stored: its meta, staged state and sinks' parts."""

    meta: SnapshotMeta
    staged: Path | None
    #: The RocksDB checkpoint into `staged`, being created on the executor (its size).
    state: Future[int] | None
    payloads: dict[str, Any]
    finishers: list[Callable[[], None]]
    #: How the subtask joined the snapshot (`kstream.protocol.cuts.Cut.encode`).
    cut_on: str = ""


@dataclass
class PendingAck:
    """A snapshot whose durable copy is being written; ack once `future` is done.

    The future gives the stored meta (with the state's size, known only then).
    """

    meta: SnapshotMeta
    future: Future[SnapshotMeta]
    task: str
    #: Taken by the unaligned rule (`Acked.unaligned`), holding `in_flight` channel records.
    unaligned: bool = False
    in_flight: int = 0
    #: How the subtask joined the snapshot (`Acked.cut_on`).
    cut_on: str = ""


@dataclass
class _Stats(PolicyCounts):
    records: int = 0
    snapshots: int = 0
    last_sync_ms: float = 0.0
    outputs: dict[str, int] = field(default_factory=dict)
    #: Results handed to those of this subtask's sinks that do not count them
    #: (`SinkWriter.handed`; `Subtask.records_out` is the total).
    records_out: int = 0
    #: Old-generation channel records processed as recorded channel state (replay windows).
    replayed: int = 0


class Subtask:
    """Common machinery: state, the chain's outputs, snapshots, control of the sinks."""

    #: The record being pushed through the chain (a source record, or a channel
    #: record of a channel subtask): lineage headers, reports of stuck calls.
    _current: Message | None = None

    def __init__(self, rt: TaskRuntime, spec: TaskSpec, restore_from: int | None) -> None:
        self.rt = rt
        self.spec = spec
        self.id = spec.id
        self.job = rt.plan.job
        self.stage = rt.plan.stage(spec)
        self.stats = _Stats()
        self.writers: list[ChannelWriter] = []
        self.sinks: dict[str, SinkWriter] = {}
        self.pending: list[PendingAck] = []
        #: Unaligned snapshots taken whose channel state is still being recorded.
        self._held: dict[int, _Taken] = {}
        self._epoch = (restore_from or 0) + 1
        self._staging = rt.state_root / "staging"
        db_path = rt.state_root / "tasks" / self.id / "db"
        self.restored: SnapshotMeta | None = None
        self.state: StateStore | None = None
        try:
            if restore_from is not None:
                self.restored = rt.storage.load(restore_from, self.id)
                check_state_serde(self.restored, self.job.state_serde.name)
            if has_process(self.stage.root):
                if restore_from is not None:
                    found = rt.storage.fetch_db(restore_from, self.id, db_path)
                    if not found and self.restored is not None and self.restored.has_state:
                        # An empty database here would silently reset every key's state.
                        raise CheckpointError(
                            f"checkpoint {restore_from} lost the state database of {self.id}"
                        )
                else:
                    StateStore.wipe(db_path)
                self.state = StateStore(db_path, self.job.state_serde)
        except CheckpointError:
            raise
        except Exception as exc:
            if restore_from is None:
                raise
            # RocksDB reports a damaged copy as a bare exception: name the checkpoint.
            raise CheckpointError(
                f"{self.id} cannot be restored from checkpoint {restore_from}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        #: Pauses reading while the channels this subtask writes hold too much.
        self.flow = FlowControl(
            rt.bootstrap,
            rt.plan,
            spec,
            rt.flow,
            held=self._held_inputs,
            on_resume=self._on_flow_resume,
            # A loop head reads its loop channels on while paused (see `written_channels`).
            never_paused=frozenset(rt.plan.loop_channels(spec)),
        )
        self.errors = RecordErrors(
            self.job.on_error, self.job.name, self.id, rt.producer, rt.max_record_bytes, self.stats
        )
        #: Event time of what is being processed (`kstream.runtime.state.timers`).
        self.element = ElementContext(self.stage.timed)
        #: Keyed operators with timers to fire, in compile order.
        self.timer_operators: list[TimerOperator] = []
        # A resumed job keeps the key format of its checkpoint: its state and
        # its routing were written with it (`kstream.runtime.state.store`).
        self.key_format = KEY_FORMAT if self.restored is None else self.restored.key_format
        self.key_bytes = key_encoder(self.key_format)
        self.batch_format = BatchFormat(self.job.channel_serde)
        self.push: Callable[..., None] = compile_chain(
            self.stage.root,
            stage_index=self.stage.index,
            state=self.state,
            open_sink=self._open_sink,
            open_edge=self._open_edge,
            element=self.element,
            timer_operators=self.timer_operators,
            key_bytes=self.key_bytes,
        )
        for name, writer in self.sinks.items():
            kept = None
            if self.restored is not None and restore_from is not None:
                kept = SinkSnapshot(
                    self.restored.sink.get(name, {}),
                    rt.storage.load_payload(restore_from, self.id, name),
                )
            writer.recover(restore_from, kept)
            writer.begin_epoch(self._epoch)
        self.consumer = task_consumer(rt.bootstrap, self.job.name, self.id)

    # -- the chain's ends ---------------------------------------------------

    def _open_sink(self, node: Node) -> Callable[[Any], None]:
        """Open the writer of sink `node` (numbered in compile order) and count its results."""
        assert node.sink is not None
        ordinal = len(self.sinks)
        writer: SinkWriter = node.sink.open(
            SinkContext(
                self.rt.bootstrap,
                self.job.name,
                self.id,
                self.rt.generation,
                self.rt.producer,
                guarantee=self.rt.guarantee,
                marker_partition=self.rt.plan.marker_partition(self.spec, ordinal),
                transaction_timeout_ms=self.rt.transaction_timeout_ms,
                pump=self.rt.pump,
                raise_if_undelivered=self.rt.raise_if_undelivered,
                source_position=self._source_position(),
                max_record_bytes=self.rt.max_record_bytes,
                event_time=self._event_time() if self.element.timed else None,
            )
        )
        self.sinks[f"{node.sink.name}#{ordinal}"] = writer
        write, stats = writer.write, self.stats
        if writer.handed is not None:
            # It counts its results itself (`records_out`): no wrapper call per result.
            return write

        def counted(value: Any) -> None:
            stats.records_out += 1
            write(value)

        return counted

    def _open_edge(self, node: Node) -> Callable[[Any], None]:
        """Open the channel writer of edge `node` to the next stage."""
        assert node.edge_to is not None
        target = node.edge_to
        cw = ChannelWriter(
            self.flow.counted(self.rt.producer),
            input_topic(self.job.name, target.index, target.inputs[node.edge_input]),
            self.spec.index,
            self.rt.plan.parallelism[target.index],
            self.rt.generation,
            target.inputs[node.edge_input].key_fn,
            max_bytes=self.rt.max_record_bytes,
            on_too_large=self.errors.on_channel_record_too_large,
            element=self.element if self.element.timed else None,
            batch_format=self.batch_format,
            on_unencodable=self.errors.on_channel_record_unencodable,
            key_bytes=self.key_bytes,
        )
        self.writers.append(cw)
        return cw.send

    def _event_time(self) -> Callable[[], int | None]:
        element = self.element

        def event_time() -> int | None:
            return element.timestamp

        return event_time

    def _source_position(self) -> Callable[[], tuple[str, int, int] | None] | None:
        """How sinks of this stage learn the source record behind a result (sources only)."""
        return None

    def on_record_error(self, exc: BaseException, msg: Message, item: Any = RAW) -> None:
        """Apply the job's error policy (see `RecordErrors.on_record_error`)."""
        self.errors.on_record_error(exc, msg, item)

    def fire_timers(self, domain: TimerDomain, time: int) -> int:
        """Fire the timers of `domain` due at `time` (`fire_due`); how many fired.

        An exception of ``on_timer`` is the timer's record error: the job's
        error policy, with the key and time in the dead letter.
        """

        def failed(exc: Exception, key: Any, ts: int) -> None:
            if isinstance(exc, KStreamError) and not isinstance(exc, RecordError):
                raise exc
            what = f"{domain.name.lower()}-time timer of key {key!r} at {ts}"
            self.errors.apply(exc, what, None, repr((key, ts)).encode(), [])

        return fire_due(self.timer_operators, domain, time, failed)

    def watermarks(self) -> dict[str, Any]:
        """What a snapshot keeps of this subtask's watermarks (`SnapshotMeta.watermarks`)."""
        return {}

    # -- checkpoints --------------------------------------------------------

    def snapshot(
        self,
        checkpoint: int,
        *,
        source_offsets: dict[str, dict[int, int]] | None = None,
        channel_offsets: dict[str, dict[int, int]] | None = None,
        alignment_ms: float = 0.0,
        hold: bool = False,
        cut_on: Cut | None = None,
    ) -> None:
        """Take checkpoint `checkpoint` now: state, sinks' pre-commit, barriers downstream.

        The synchronous part moves cached state changes into RocksDB's memtable,
        pre-commits the sinks and sends the barriers; the RocksDB checkpoint
        (flush + hard links, synced) and the durable copy are made on the
        executor (`StateStore.checkpoint_later`), and the worker acks once
        both are done. With `hold` (an unaligned snapshot whose channel state
        is still being recorded) the copy waits for `store_held`, or is dropped
        by `drop_held`: it must not be acked before. `cut_on`: how the subtask
        joined the snapshot, told in its ack.
        """
        t0 = time.perf_counter()
        staged: Path | None = None
        state: Future[int] | None = None
        if self.state is not None:
            staged = self._staging / f"chk-{checkpoint}-{self.id}-{time.monotonic_ns()}"
            state = self.state.checkpoint_later(staged, self.rt.executor)
        self.rt.faults.hit("snapshotting", checkpoint)
        kept = {name: w.pre_commit(checkpoint) for name, w in self.sinks.items()}
        self.rt.faults.hit("pre-committed", checkpoint)
        for cw in self.writers:
            cw.barrier(checkpoint)
        self._epoch = checkpoint + 1
        for w in self.sinks.values():
            w.begin_epoch(self._epoch)
        sync_ms = (time.perf_counter() - t0) * 1000
        meta = SnapshotMeta(
            checkpoint=checkpoint,
            generation=self.rt.generation,
            task=self.id,
            source_offsets=source_offsets or {},
            channel_offsets=channel_offsets or {},
            has_state=staged is not None,
            alignment_ms=alignment_ms,
            sync_ms=sync_ms,
            sink={name: k.meta for name, k in kept.items()},
            identity=self.rt.identity,
            state_serde=self.job.state_serde.name if staged is not None else "",
            watermarks=self.watermarks(),
            key_format=self.key_format,
        )
        self.stats.snapshots += 1
        self.stats.last_sync_ms = sync_ms
        taken = _Taken(
            meta,
            staged,
            state,
            {name: k.payload for name, k in kept.items()},
            [k.finish for k in kept.values() if k.finish is not None],
            "" if cut_on is None else cut_on.encode(),
        )
        if hold:
            self._held[checkpoint] = taken
        else:
            self._store(taken)

    def _store(self, taken: _Taken, *, unaligned: bool = False, in_flight: int = 0) -> None:
        """Write the durable copy on the executor; the worker acks once it is done."""
        self.pending.append(
            PendingAck(
                taken.meta,
                self.rt.executor.submit(
                    _finish_and_store,
                    self.rt.storage,
                    taken.meta,
                    taken.staged,
                    taken.state,
                    taken.payloads,
                    taken.finishers,
                ),
                self.id,
                unaligned,
                in_flight,
                taken.cut_on,
            )
        )

    def store_held(
        self,
        checkpoint: int,
        channel_offsets: dict[str, dict[int, int]],
        channel_replay: dict[str, dict[int, list[list[int]]]],
        alignment_ms: float,
        in_flight: int = 0,
    ) -> None:
        """The channel state of held snapshot `checkpoint` is complete: store it, then ack.

        `in_flight`: the channel records its recorded ranges hold.
        """
        taken = self._held.pop(checkpoint)
        meta = dataclasses.replace(
            taken.meta,
            channel_offsets=channel_offsets,
            channel_replay=channel_replay,
            alignment_ms=alignment_ms,
        )
        self._store(dataclasses.replace(taken, meta=meta), unaligned=True, in_flight=in_flight)

    def drop_held(self, checkpoint: int) -> None:
        """Held snapshot `checkpoint` will never be complete: forget it (never acked)."""
        taken = self._held.pop(checkpoint, None)
        if taken is not None and taken.staged is not None:
            # On the executor, after the checkpoint being created there (first in, first out).
            self.rt.executor.submit(shutil.rmtree, taken.staged, ignore_errors=True)

    def decline(self, checkpoint: int, reason: str) -> None:
        self.rt.send_control(Declined(checkpoint, self.rt.generation, self.id, reason))

    def trigger(self, checkpoint: int) -> None:
        """A checkpoint was triggered (only sources act on it)."""

    def announced(self, checkpoint: int) -> None:
        """A source subtask started a checkpoint itself (only sources act on it)."""

    def on_complete(self, checkpoint: int) -> None:
        for w in self.sinks.values():
            w.commit(checkpoint)

    def on_abort(self, checkpoint: int) -> None:
        for w in self.sinks.values():
            w.abort(checkpoint)

    def flush(self) -> None:
        """After a processed batch: send channel batches, write state changes to RocksDB."""
        for cw in self.writers:
            cw.flush()
        if self.state is not None:
            self.state.flush()

    def poll(self, timeout: float) -> int:
        raise NotImplementedError

    def _held_inputs(self) -> set[tuple[str, int]]:
        """Input partitions held paused apart from flow control (a flow resume skips them)."""
        return set()

    def _on_flow_resume(self) -> None:
        """Flow control resumed reading."""

    def current_record(self) -> str:
        """Where the record being processed comes from (``topic[partition]@offset``),
        for reports of a call that does not return (`kstream.runtime.worker.stuck`);
        "" before the first record."""
        m = self._current
        if m is None:
            return ""
        return f"{m.topic()}[{m.partition()}]@{m.offset()}"

    def counters(self) -> WorkerCounters:
        """What this subtask did so far (see `kstream.protocol.counters`)."""
        return WorkerCounters(0, self.records_out, self.stats.dead_letters, self.stats.replayed)

    @property
    def records_out(self) -> int:
        """Results handed to this subtask's sinks (replays after a recovery count again)."""
        return self.stats.records_out + sum(w.handed or 0 for w in self.sinks.values())

    def close(self) -> None:
        for w in self.sinks.values():
            w.close()
        self.flow.close()
        self.consumer.close()
        if self.state is not None:
            self.state.close()


def _finish_and_store(
    storage: CheckpointStorage,
    meta: SnapshotMeta,
    staged: Path | None,
    state: Future[int] | None,
    payloads: dict[str, Any],
    finishers: list[Callable[[], None]],
) -> SnapshotMeta:
    """The asynchronous part of a snapshot: the sinks' finishing work, then the copy.

    Runs on the executor after the state's checkpoint (submitted before it), so
    `state` is done: its failure fails the snapshot, with its own cause.
    """
    if state is not None:
        meta = dataclasses.replace(meta, size=state.result())
    for finish in finishers:
        finish()
    storage.store(meta, staged, payloads)
    return meta


class SourceTask(Subtask):
    """Reads the input partitions p with p % parallelism == index of a Kafka source."""

    def __init__(self, rt: TaskRuntime, spec: TaskSpec, restore_from: int | None) -> None:
        self._current = None
        super().__init__(rt, spec, restore_from)
        source = self.stage.source
        assert source is not None
        self.topic = source.topic
        self.loads = source.serde.loads
        n = source.partitions(rt.bootstrap)
        start = OFFSET_END if source.start == "latest" else OFFSET_BEGINNING
        self.positions: dict[int, int] = {
            p: start for p in range(n) if p % spec.parallelism == spec.index
        }
        if self.restored is not None:
            self.positions.update(self.restored.source_offsets.get(self.topic, {}))
        self._at_most_once = rt.guarantee == "at-most-once"
        if self._at_most_once and self.positions:
            # Never replay: resume after the last record handed to processing, as
            # committed before processing it, if that is past the checkpoint.
            committed = request(
                lambda: self.consumer.committed(
                    [TopicPartition(self.topic, p) for p in self.positions], timeout=30
                ),
                f"cannot read the committed offsets of {self.topic}",
                30,
            )
            for tp in committed:
                if tp.offset >= 0 and tp.offset > self.positions.get(tp.partition, -1):
                    self.positions[tp.partition] = tp.offset
        self._triggered: list[int] = []
        sources = [t for t in rt.plan.tasks if rt.plan.stage(t).source is not None]
        every_ms = snapshot_every_ms(source)
        every = rt.source_snapshot_every or (None if every_ms is None else every_ms / 1000)
        #: When this subtask snapshots (`kstream.protocol.initiation`). A source's
        #: interval is its first subtask's: one snapshot per interval, not one per subtask.
        self.initiation = SourceInitiation(
            source_initiator(sources.index(spec)),
            restore_from or 0,
            every if spec.index == 0 else None,
            time.monotonic(),
            concurrent=rt.concurrent > 0,
            max_in_flight=max(1, rt.concurrent),
            ordered=bool(self.sinks),
        )
        if self.positions:
            # Logical offsets (the beginning, the end) wait half a second otherwise.
            connect(self.consumer, self.topic)
            self.consumer.assign(
                [TopicPartition(self.topic, p, o) for p, o in self.positions.items()]
            )
        self.timestamps = source.timestamps
        #: The source's watermarks (None: no event time, or no partitions to read).
        self.source_watermarks: SourceWatermarks | None = None
        if self.element.timed:
            self._open_watermarks(source.watermark_config())

    def _open_watermarks(self, config: Any) -> None:
        #: Processing time as idleness sees it (`_idle_clock`), and when it was last read.
        self._polled_ms = 0
        self._last_poll: int | None = None
        now = self._polled_ms
        kept = self.restored.watermarks.get("source") if self.restored is not None else None
        if not self.positions:
            # Nothing to read: idle for good, so readers leave this subtask out.
            self.element.idle = True
        elif kept is not None:
            self.source_watermarks = SourceWatermarks.restore(config, self.positions, kept, now)
        else:
            self.source_watermarks = SourceWatermarks(config, self.positions, now)
        if self.source_watermarks is not None:
            self.element.watermark = self.source_watermarks.watermark
            self.element.idle = self.source_watermarks.idle

    def watermarks(self) -> dict[str, Any]:
        if self.source_watermarks is None:
            return {}
        return {"source": self.source_watermarks.snapshot()}

    def trigger(self, checkpoint: int) -> None:
        self._triggered.append(checkpoint)

    def announced(self, checkpoint: int) -> None:
        self.initiation.on_announced(checkpoint)

    def on_complete(self, checkpoint: int) -> None:
        self._forget(checkpoint)
        self.initiation.on_complete(checkpoint)
        super().on_complete(checkpoint)

    def on_abort(self, checkpoint: int) -> None:
        self._forget(checkpoint)
        self.initiation.on_abort(checkpoint)
        super().on_abort(checkpoint)

    def _forget(self, checkpoint: int) -> None:
        """Concurrent snapshots: a trigger of `checkpoint` still queued is stale (it
        completed, so this subtask took it, or was aborted); in id order the
        initiation's watermark tells that."""
        if self.rt.concurrent and checkpoint in self._triggered:
            self._triggered.remove(checkpoint)

    def _snapshot_between_batches(self) -> None:
        """Take the snapshots triggered, then one this subtask starts itself, if due."""
        while self._triggered:
            n = self._triggered.pop(0)
            match self.initiation.on_trigger(n):
                case Take():
                    # No channel reaches a source: a trigger is an injection.
                    self.snapshot(
                        n,
                        source_offsets={self.topic: dict(self.positions)},
                        cut_on=Cut(CutKind.INJECTED),
                    )
                case Decline(reason=reason):
                    self.decline(n, reason)
                case Ignore():
                    pass
                case answer:
                    assert_never(answer)
        own = self.initiation.start(time.monotonic(), self.rt.clock)
        if own is not None:
            # Durable before any barrier of it exists: every ack follows it in the
            # control topic, so the coordinator knows the id before its first ack.
            self.rt.send_control(Initiated(own, self.rt.generation, self.id, time.time()))
            self.rt.announce(own)
            self.snapshot(
                own,
                source_offsets={self.topic: dict(self.positions)},
                cut_on=Cut(CutKind.STARTED),
            )

    def counters(self) -> WorkerCounters:
        return WorkerCounters(self.stats.records, self.records_out, self.stats.dead_letters)

    def _source_position(self) -> Callable[[], tuple[str, int, int] | None] | None:
        def position() -> tuple[str, int, int] | None:
            m = self._current
            if m is None:
                return None
            return (m.topic() or "", m.partition() or 0, m.offset() or 0)

        return position

    def poll(self, timeout: float) -> int:
        # The stage's functions may ask for a snapshot (`kstream.request_snapshot`).
        served = snapshot_request.server.set(self.initiation.request)
        try:
            # A trigger read already waits for no input, and for a short batch only.
            read = self._read(0.0, TRIGGERED_BATCH) if self._triggered else self._read(timeout)
        finally:
            snapshot_request.server.reset(served)
        # Snapshots are taken between batches: a batch is all-before or all-after.
        # After the batch, not before it: the records already fetched when the
        # trigger was read are in its checkpoint, rather than waiting for the next.
        self._snapshot_between_batches()
        return read

    def _read(self, timeout: float, limit: int = BATCH) -> int:
        """Read one batch and push it through the chain; how many records were read."""
        self.flow.step(time.monotonic(), self.consumer)
        if not self.positions:
            if self.element.timed:
                self._publish_watermark()
            return 0
        if self.element.timed:
            return self._poll_timed(timeout, limit)
        msgs = self.flow.consume(self.consumer, limit, timeout)
        if self._at_most_once and msgs:
            last: dict[int, int] = {}
            for m in msgs:
                last[m.partition() or 0] = (m.offset() or 0) + 1
            offsets = [TopicPartition(self.topic, p, o) for p, o in last.items()]
            request(
                lambda: self.consumer.commit(offsets=offsets, asynchronous=False),
                f"cannot commit the offsets of {self.topic}",
            )
        push, loads, positions = self.push, self.loads, self.positions
        # Counted before they are processed: a worker that dies of one of them (a
        # user function exiting the process) still reports what it read.
        self.stats.records += len(msgs)
        for m in msgs:
            if m.error() is not None:
                _raise_if_fatal(m)
                continue
            self._current = m
            try:
                push(loads(m.value()))
            except Exception as exc:
                self.on_record_error(exc, m)
            positions[m.partition() or 0] = (m.offset() or 0) + 1
        return len(msgs)

    def _poll_timed(self, timeout: float, limit: int = BATCH) -> int:
        """`poll` of a source with timestamps: stamp each record, then advance watermarks."""
        sw = self.source_watermarks
        assert sw is not None
        msgs = self.flow.consume(self.consumer, limit, timeout)
        if self._at_most_once and msgs:
            self._commit_consumed(msgs)
        now = self._idle_clock()
        # Judges each partition's first record (`SourceWatermarks.observe`).
        wall = now_ms()
        push, loads, positions, element = self.push, self.loads, self.positions, self.element
        from_kafka = self.timestamps == "kafka"
        fn = self.timestamps
        self.stats.records += len(msgs)  # before they are processed, as in `_read`
        for m in msgs:
            if m.error() is not None:
                _raise_if_fatal(m)
                continue
            self._current = m
            partition = m.partition() or 0
            try:
                value = loads(m.value())
                if from_kafka:
                    kind, ts = m.timestamp()
                    at: object = ts if kind != TIMESTAMP_NOT_AVAILABLE else None
                else:
                    assert callable(fn)
                    at = fn(value)
                verdict = sw.observe(partition, at, now, wall)
                if isinstance(verdict, Unusable):
                    # Neither stalls nor jumps the watermark: a record error.
                    raise TimestampError(verdict.reason)
                element.timestamp = verdict.timestamp
                element.stamp = verdict.partition_watermark
                push(value)
            except Exception as exc:
                self.on_record_error(exc, m)
            positions[partition] = (m.offset() or 0) + 1
        # Every poll, not only empty ones: one partition's silence must be noticed
        # while the others keep delivering.
        sw.tick(now)
        element.watermark, element.idle = sw.watermark, sw.idle
        if not msgs:
            self._publish_watermark()
        return len(msgs)

    def _idle_clock(self) -> int:
        """Processing time for idleness: the time spent polling, not all time.

        A gap between two polls counts for at most `MAX_POLL_GAP_MS`: a subtask
        that did not ask for records (opening, restoring, waiting in a sink,
        its worker busy with other subtasks) has no evidence that a partition
        is silent, and marking it idle then would let the watermark pass
        records it has not read yet. Nor does time while flow control holds the
        source's partitions paused: they deliver nothing then, silent or not.
        """
        now = _monotonic_ms()
        if self._last_poll is not None and not self.flow.paused:
            self._polled_ms += min(now - self._last_poll, MAX_POLL_GAP_MS)
        self._last_poll = now
        return self._polled_ms

    def _publish_watermark(self) -> None:
        """Flush a watermark (or idleness) that changed while nothing was read.

        The worker flushes after batches that read something; a watermark moved
        by the clock alone is flushed here (a timed writer writes only into
        channels whose last record carried another watermark).
        """
        for cw in self.writers:
            cw.flush()

    def _commit_consumed(self, msgs: list[Message]) -> None:
        last: dict[int, int] = {}
        for m in msgs:
            last[m.partition() or 0] = (m.offset() or 0) + 1
        offsets = [TopicPartition(self.topic, p, o) for p, o in last.items()]
        request(
            lambda: self.consumer.commit(offsets=offsets, asynchronous=False),
            f"cannot commit the offsets of {self.topic}",
        )


def _monotonic_ms() -> int:
    """The clock idleness is measured with (processing time, never set back)."""
    return time.monotonic_ns() // 1_000_000


class ChannelTask(Subtask):
    """Reads its channels (per input of its stage, one per upstream subtask) and aligns
    barriers over all of them: a barrier goes on once every channel of every input
    delivered it, so the snapshot is one consistent cut across the inputs."""

    def __init__(self, rt: TaskRuntime, spec: TaskSpec, restore_from: int | None) -> None:
        super().__init__(rt, spec, restore_from)
        inputs = rt.plan.input_channels(spec)
        self.channels = {(t, p): Channel(t, p) for t, parts in inputs for p in parts}
        #: Per channel topic, the push function of its input (a co-process's side).
        self.pushes = dict(
            zip((t for t, _ in inputs), input_pushes(self.stage, self.push), strict=True)
        )
        replay: dict[Channel, tuple[Replay, ...]] = {}
        if self.restored is not None:
            for topic, recorded in self.restored.channel_replay.items():
                for p, windows in recorded.items():
                    if (topic, p) not in self.channels:
                        raise CheckpointError(
                            f"checkpoint {restore_from} of {self.id} replays {topic}[{p}], "
                            "which is not one of its inputs"
                        )
                    replay[self.channels[topic, p]] = tuple(Replay(e, g) for e, g in windows)
        #: The feedback channels of a loop head: logged, never aligned or paused.
        self.loops = {self.channels[tp] for tp in rt.plan.loop_channels(spec)}
        self.aligner = Aligner.over(
            self.channels.values(),
            rt.generation,
            restore_from or 0,
            rt.alignment,
            replay,
            logged=self.loops,
            # A snapshot a source started is cut on its marker (`Aligner.reach`).
            reach={
                source_initiator(k): [self.channels[c] for c in path]
                for k, path in rt.plan.marker_paths(spec).items()
            },
            concurrent=rt.concurrent > 0 and rt.alignment is Alignment.UNALIGNED,
            # Sinks seal their epochs in id order.
            ordered=bool(self.sinks),
        )
        #: Per channel, the upstream subtask writing it (an ack names the one cut on).
        self._upstream = {self.channels[c]: w.id for c, w in rt.plan.input_writers(spec).items()}
        assigned = []
        #: Per channel, the next offset to process: an unaligned snapshot's range
        #: starts there (`BarrierArrived.positions`).
        self._positions: dict[Channel, int] = {}
        for topic, parts in inputs:
            offsets = dict.fromkeys(parts, OFFSET_BEGINNING)
            if self.restored is not None:
                offsets.update(self.restored.channel_offsets.get(topic, {}))
            assigned += [TopicPartition(topic, p, o) for p, o in offsets.items()]
            self._positions.update({self.channels[topic, p]: o for p, o in offsets.items()})
        self._resume: dict[Channel, int] = {}
        #: Channels the aligner unblocked while flow control paused reading: they
        #: stay paused (their records skipped) until reading resumes, then are re-read.
        self._deferred: set[Channel] = set()
        self._report = PositionReport(self.consumer)
        self._align_started: float | None = None
        #: Held snapshot -> when its first barrier arrived (its channel state is recorded).
        self._recording_since: dict[int, float] = {}
        if assigned:
            # Channels start at their beginning, a logical offset (see `connect`).
            connect(self.consumer, assigned[0].topic)
        self.consumer.assign(assigned)
        for tp in assigned:
            self._report.placed(tp.topic, tp.partition, tp.offset)
        #: The input watermark over every channel (None: no event time).
        self.input_watermarks: InputWatermarks | None = None
        if self.element.timed:
            kept = self.restored.watermarks.get("input") if self.restored is not None else None
            order = list(self.channels.values())
            self.input_watermarks = (
                InputWatermarks(order) if kept is None else InputWatermarks.restore(order, kept)
            )
            self.element.watermark = self.input_watermarks.watermark
            self.element.idle = self.input_watermarks.idle

    def watermarks(self) -> dict[str, Any]:
        if self.input_watermarks is None:
            return {}
        return {"input": self.input_watermarks.snapshot()}

    def on_abort(self, checkpoint: int) -> None:
        self._run(self.aligner.handle(CheckpointAborted(checkpoint)), set())
        super().on_abort(checkpoint)

    def poll(self, timeout: float) -> int:
        now = time.monotonic()
        self._report.step(now)
        self.flow.step(now, self.consumer)
        # Processing-time timers fire between batches (and count as work done,
        # so the worker flushes what they emitted).
        fired = self.fire_timers(TimerDomain.PROCESSING, now_ms()) if self.timer_operators else 0
        self._check_alignment_timeout()
        msgs = self.flow.consume(self.consumer, BATCH, timeout, counted=False)
        aligner, positions = self.aligner, self._positions
        pushes, channels = self.pushes, self.channels
        decode = self.batch_format.decode
        keyed = self.stage.keyed
        # Channels re-positioned (seek) during this batch, or waiting for flow
        # control to resume them: the rest of their records in it are stale
        # copies that will be fetched again in order.
        reseeked: set[Channel] = set(self._deferred)
        processed = replayed = pushed = 0
        for m in msgs:
            if m.error() is not None:
                _raise_if_fatal(m)
                continue
            topic = m.topic() or ""
            ch = channels[topic, m.partition() or 0]
            if ch in reseeked:
                continue
            offset = m.offset() or 0
            positions[ch] = offset + 1
            self._current = m
            value = m.value() or b""
            try:
                kind, gen = decode_header(value)
                checkpoint = barrier_checkpoint(value) if kind == BARRIER else 0
            except ProtocolError as exc:
                # Not a channel record (nothing of kstream writes one this short).
                self.on_record_error(DecodeError(str(exc)), m)
                continue
            if kind == RECORD:
                # The aligner's fast path (`Aligner.open_generation`): no event per record.
                if gen != aligner.open_generation:
                    action = aligner.handle(RecordArrived(ch, offset, gen))[0]
                    if not isinstance(action, Process):
                        self.stats.dropped += 1
                        continue
                    replayed += gen != aligner.generation
                try:
                    items = decode(value, keyed)
                except DecodeError as exc:
                    # Malformed or untrusted: the policy keeps the whole record.
                    self.on_record_error(exc, m)
                    continue
                push = pushes[topic]
                pushed += 1
                if keyed:
                    for key, item in items:
                        try:
                            push(key, item)
                        except Exception as exc:
                            self.on_record_error(exc, m, (key, item))
                else:
                    for item in items:
                        try:
                            push(item)
                        except Exception as exc:
                            self.on_record_error(exc, m, item)
                processed += len(items)
            elif kind == BARRIER:
                # The positions dict is read during `handle` only: no copy.
                event = BarrierArrived(ch, offset, checkpoint, gen, positions)
                self._run(aligner.handle(event), reseeked)
            elif kind == TIMED:
                # A record for the aligner like any data record (a watermark-only one too).
                if gen != aligner.open_generation:
                    action = aligner.handle(RecordArrived(ch, offset, gen))[0]
                    if not isinstance(action, Process):
                        self.stats.dropped += 1
                        continue
                    replayed += gen != aligner.generation
                pushed += 1
                processed += self._timed(m, ch, value, pushes[topic], keyed)
        # Channel records that went through the chain: only those make output.
        self.flow.processed(pushed)
        self.stats.records += processed
        if replayed:
            self.stats.replayed += replayed
            log.info("%s: replayed %d records of recorded channel state", self.id, replayed)
        return len(msgs) + fired

    def _timed(self, m: Message, ch: Channel, value: bytes, push: Any, keyed: bool) -> int:
        """Process a timed channel record: its items, then its watermark, then due timers."""
        try:
            timed = decode_timed(value, self.batch_format, keyed)
        except (DecodeError, ProtocolError) as exc:
            # Malformed or untrusted: the policy keeps the whole record (and its
            # watermark is not applied: a forged one could fire every timer).
            self.on_record_error(DecodeError(str(exc)), m)
            return 0
        element, stamps = self.element, timed.stamps
        for i, item in enumerate(timed.items):
            element.timestamp = stamps[2 * i]
            element.stamp = stamps[2 * i + 1]
            try:
                if keyed:
                    push(*item)
                else:
                    push(item)
            except Exception as exc:
                self.on_record_error(exc, m, item)
        iw = self.input_watermarks
        assert iw is not None
        iw.observe(ch, timed.watermark, timed.idle)
        element.watermark, element.idle = iw.watermark, iw.idle
        if self.timer_operators:
            # Before the next record: a timer registered at or below the watermark
            # fires here too, after the record that registered it.
            self.fire_timers(TimerDomain.EVENT, iw.watermark)
        return len(timed.items)

    def _run(self, actions: list[Action], reseeked: set[Channel]) -> None:
        for action in actions:
            match action:
                case Process():
                    pass  # only a record's own event asks to process it (see `poll`)
                case Drop():
                    self.stats.dropped += 1
                case Block():
                    if self._align_started is None:
                        self._align_started = time.perf_counter()
                    self._resume[action.channel] = action.resume_offset
                    self.rt.faults.hit("aligning", self.aligner.aligning or 0)
                    self.consumer.pause(
                        [TopicPartition(action.channel.topic, action.channel.partition)]
                    )
                case TakeSnapshot():
                    now = time.perf_counter()
                    started = self._align_started
                    alignment_ms = 0.0 if started is None else (now - started) * 1000
                    self._align_started = None
                    if action.recording:
                        self._recording_since[action.checkpoint] = started or now
                    on = action.cut_on
                    self.snapshot(
                        action.checkpoint,
                        channel_offsets=_by_topic(action.channel_offsets),
                        alignment_ms=alignment_ms,
                        hold=bool(action.recording),
                        cut_on=Cut(CutKind.TIMEOUT)
                        if on is None
                        else Cut.marker(str(on), self._upstream[on]),
                    )
                    if action.recording:
                        self.rt.faults.hit("recording", action.checkpoint)
                case ChannelStateComplete():
                    # From the first barrier to the last, as for an aligned snapshot.
                    since = self._recording_since.pop(action.checkpoint)
                    self.store_held(
                        action.checkpoint,
                        _by_topic(action.channel_offsets),
                        {
                            topic: {
                                p: [[w.end, w.generation] for w in ws] for p, ws in parts.items()
                            }
                            for topic, parts in _by_topic(action.replay).items()
                        },
                        (time.perf_counter() - since) * 1000,
                        # A range runs from where the channel stood at the snapshot
                        # (its restore offset) to its barrier, the newest window's end.
                        sum(
                            max(w.end for w in windows) - action.channel_offsets[c]
                            for c, windows in action.replay.items()
                        ),
                    )
                case Unblock():
                    self._positions[action.channel] = self._resume[action.channel]
                    if self.flow.paused:
                        self._deferred.add(action.channel)
                    else:
                        self._unblock(action.channel)
                    reseeked.add(action.channel)
                case AbandonAlignment():
                    self._align_started = None
                    self._recording_since.pop(action.checkpoint, None)
                    self.drop_held(action.checkpoint)
                    self.decline(action.checkpoint, "alignment abandoned")
                case _:
                    assert_never(action)

    def _check_alignment_timeout(self) -> None:
        """Switch an alignment that lasted longer than the job's timeout to unaligned."""
        limit, started = self.rt.alignment_timeout_s, self._align_started
        if limit is None or started is None or time.perf_counter() - started < limit:
            return
        n = self.aligner.aligning
        if n is not None:
            self._run(self.aligner.handle(AlignmentTimedOut(n, self._positions)), set())

    def _unblock(self, channel: Channel) -> None:
        """Read `channel` again, from just after the barrier that blocked it."""
        tp = TopicPartition(channel.topic, channel.partition)
        offset = self._resume.pop(channel)
        self.consumer.resume([tp])
        self.consumer.seek(TopicPartition(tp.topic, tp.partition, offset))
        # The consumer knows no position after a seek (see `PositionReport`).
        self._report.placed(tp.topic, tp.partition, offset)

    def _held_inputs(self) -> set[tuple[str, int]]:
        return {(c.topic, c.partition) for c in self._resume}

    def _on_flow_resume(self) -> None:
        for channel in sorted(self._deferred):
            self._unblock(channel)
        self._deferred.clear()


def _by_topic(by_channel: Mapping[Channel, _V]) -> dict[str, dict[int, _V]]:
    """Per-channel values as the snapshot keeps them: topic -> partition -> value."""
    out: dict[str, dict[int, _V]] = {}
    for c, v in by_channel.items():
        out.setdefault(c.topic, {})[c.partition] = v
    return out


def _raise_if_fatal(msg: Message) -> None:
    err = msg.error()
    if err is not None and err.fatal():
        raise JobFailedError(f"consumer error on {msg.topic()}[{msg.partition()}]: {err.str()}")
    log.debug("consumer notice: %s", err)


def open_task(rt: TaskRuntime, spec: TaskSpec, restore_from: int | None) -> Subtask:
    """Build the subtask for `spec`, restored from checkpoint `restore_from` (None: fresh)."""
    if rt.plan.stage(spec).source is not None:
        return SourceTask(rt, spec, restore_from)
    return ChannelTask(rt, spec, restore_from)
