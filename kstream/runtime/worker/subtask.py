"""The shell both kinds of subtask share: chain, error policy, counters, timers, snapshots.

A subtask is restored (`kstream.runtime.checkpoint.restore`), compiles its
stage's fused chain (`kstream.runtime.worker.chain`) with its ends opened
(`kstream.runtime.worker.ends`), applies the job's error policy to records
that fail (`kstream.runtime.worker.dead_letters`), and takes snapshots
(`kstream.runtime.checkpoint.take`), held while their channel state is
recorded (`kstream.runtime.checkpoint.held`) and stored on the executor
(`kstream.runtime.checkpoint.finish`); the worker acks them once stored.

What feeds the stage is the kind's: `SourceTask` reads source partitions,
`ChannelTask` the channels of its inputs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Message

from kstream.dataflow.outputs import SinkWriter
from kstream.dataflow.plan import TaskSpec
from kstream.dataflow.state.timers import TimerDomain
from kstream.errors import KStreamError, RecordError
from kstream.protocol.counters import WorkerCounters
from kstream.protocol.cuts import Cut
from kstream.protocol.messages import Declined
from kstream.protocol.worker_alive import SubtaskAlignment
from kstream.runtime.channels.flow import FlowControl
from kstream.runtime.channels.format import BatchFormat
from kstream.runtime.channels.writer import ChannelWriter
from kstream.runtime.checkpoint.finish import PendingAck, finish
from kstream.runtime.checkpoint.held import HeldSnapshots
from kstream.runtime.checkpoint.restore import Restored, restore
from kstream.runtime.checkpoint.storage import SnapshotMeta
from kstream.runtime.checkpoint.take import Subject, Taken, take_snapshot
from kstream.runtime.state.element import ElementContext
from kstream.runtime.state.store import KEY_FORMAT, StateStore, key_encoder
from kstream.runtime.worker.chain import TimerOperator, compile_chain, fire_due, has_process
from kstream.runtime.worker.consumers import FETCH_WAIT_MS, LOOP_HEAD_FETCH_WAIT_MS, task_consumer
from kstream.runtime.worker.context import TaskContext
from kstream.runtime.worker.dead_letters import RAW, PolicyCounts, RecordErrors
from kstream.runtime.worker.ends import Ends
from kstream.runtime.worker.epochs import SinkEpochs

__all__ = ["Subtask"]


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
    #: Timers fired (processing and event time).
    fired: int = 0


class Subtask:
    """Common machinery: state, the chain's outputs, snapshots, control of the sinks."""

    #: The record being pushed through the chain (a source record, or a channel
    #: record of a channel subtask): lineage headers, reports of stuck calls.
    _current: Message | None = None

    def __init__(self, rt: TaskContext, spec: TaskSpec, restore_from: int | None) -> None:
        self.rt = rt
        self.spec = spec
        self.id = spec.id
        self.job = rt.plan.job
        self.stage = rt.plan.stage(spec)
        self.stats = _Stats()
        #: `activity` when this subtask last acked a snapshot (None: not yet).
        self.acked_activity: int | None = None
        self.pending: list[PendingAck] = []
        #: Unaligned snapshots taken whose channel state is still being recorded.
        self._held = HeldSnapshots(rt.executor)
        keeps_state = has_process(self.stage.root)
        #: Where this subtask starts: its checkpoint's meta, state and sinks' parts.
        self.restored_from: Restored = restore(
            rt.storage,
            restore_from,
            self.id,
            state_db=rt.state_root / "tasks" / self.id / "db" if keeps_state else None,
            state_serde=self.job.state_serde,
            inputs=None
            if self.stage.source is not None
            else {(t, p) for t, parts in rt.plan.input_channels(spec) for p in parts},
            max_parallelism=self.job.max_parallelism,
            layout=(spec.stage, spec.index, rt.plan.parallelism),
        )
        self.restored: SnapshotMeta | None = self.restored_from.meta
        self.state: StateStore | None = self.restored_from.state
        # A loop head's feedback channels (none for any other subtask).
        loops = frozenset(rt.plan.loop_channels(spec))
        #: Pauses reading while the channels this subtask writes hold too much.
        self.flow = FlowControl(
            rt.bootstrap,
            rt.plan,
            spec,
            rt.flow,
            held=self._held_inputs,
            on_resume=self._on_flow_resume,
            # A loop head reads its loop channels on while paused (see `written_channels`).
            never_paused=loops,
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
        self.key_format = self.restored_from.key_format
        self.key_bytes = key_encoder(self.key_format)
        #: Key groups of routing and state (0: key formats 1 and 2 have none).
        self.max_parallelism = self.job.max_parallelism if self.key_format == KEY_FORMAT else 0
        self.batch_format = BatchFormat(self.job.channel_serde)
        ends = Ends(
            rt,
            spec,
            channel_producer=self.flow.counted(rt.producer, rt.ports.delivery_failed),
            errors=self.errors,
            element=self.element,
            batch_format=self.batch_format,
            key_bytes=self.key_bytes,
            max_parallelism=self.max_parallelism,
            counts=self.stats,
            source_position=self._source_position(),
        )
        self.push: Callable[..., None] = compile_chain(
            self.stage.root,
            stage_index=self.stage.index,
            state=self.state,
            open_sink=ends.open_sink,
            open_edge=ends.open_edge,
            element=self.element,
            timer_operators=self.timer_operators,
            key_bytes=self.key_bytes,
        )
        self.sinks: dict[str, SinkWriter] = ends.sinks
        #: When the sinks' epochs not yet committed began (metrics).
        self.epochs = SinkEpochs(time.monotonic())
        self.writers: list[ChannelWriter] = ends.writers
        ends.start(self.restored_from)
        #: What this subtask's snapshots are taken of (`take_snapshot`).
        self._subject = Subject(
            task=self.id,
            generation=rt.generation,
            identity=rt.identity,
            state=self.state,
            state_serde=self.job.state_serde.name,
            key_format=self.key_format,
            max_parallelism=self.max_parallelism,
            parallelism=spec.parallelism,
            staging=rt.state_root / "staging",
            executor=rt.executor,
            sinks=self.sinks,
            writers=self.writers,
            faults=rt.faults,
            watermarks=self.watermarks,
        )
        self.consumer = task_consumer(
            rt.bootstrap,
            self.job.name,
            self.id,
            LOOP_HEAD_FETCH_WAIT_MS if loops else FETCH_WAIT_MS,
        )

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

        fired = fire_due(self.timer_operators, domain, time, failed)
        self.stats.fired += fired
        return fired

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

        The synchronous part (`take_snapshot`) moves cached state changes into
        RocksDB's memtable, pre-commits the sinks and sends the barriers; the
        RocksDB checkpoint (flush + hard links, synced) and the durable copy are
        made on the executor (`finish`), and the worker acks once both are done.
        With `hold` (an unaligned snapshot whose channel state is still being
        recorded) the copy waits for `store_held`, or is dropped by `drop_held`:
        it must not be acked before. `cut_on`: how the subtask joined the
        snapshot, told in its ack.
        """
        taken = take_snapshot(
            self._subject,
            checkpoint,
            source_offsets=source_offsets,
            channel_offsets=channel_offsets,
            alignment_ms=alignment_ms,
            cut_on="" if cut_on is None else cut_on.encode(),
        )
        self.stats.snapshots += 1
        self.stats.last_sync_ms = taken.meta.sync_ms
        self.epochs.sealed(checkpoint, time.monotonic())
        if hold:
            self._held.hold(taken)
        else:
            self._store(taken)

    def _store(self, taken: Taken, *, unaligned: bool = False, in_flight: int = 0) -> None:
        """Write the durable copy on the executor; the worker acks once it is done."""
        self.pending.append(
            finish(
                self.rt.storage,
                self.rt.executor,
                taken,
                unaligned=unaligned,
                in_flight=in_flight,
                storing=self.rt.storing,
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
        taken = self._held.complete(checkpoint, channel_offsets, channel_replay, alignment_ms)
        self._store(taken, unaligned=True, in_flight=in_flight)

    def drop_held(self, checkpoint: int) -> None:
        """Held snapshot `checkpoint` will never be complete: forget it (never acked)."""
        self._held.drop(checkpoint)

    def decline(self, checkpoint: int, reason: str) -> None:
        self.rt.ports.send_control(Declined(checkpoint, self.rt.generation, self.id, reason))

    def trigger(self, checkpoint: int) -> None:
        """A checkpoint was triggered (only sources act on it)."""

    def announced(self, checkpoint: int) -> None:
        """A source subtask started a checkpoint itself (only sources act on it)."""

    def on_complete(self, checkpoint: int) -> None:
        for w in self.sinks.values():
            w.commit(checkpoint)
        self.epochs.committed(checkpoint)

    def on_abort(self, checkpoint: int) -> None:
        for w in self.sinks.values():
            w.abort(checkpoint)

    def flush(self) -> None:
        """After a processed batch: send channel batches; write state changes to RocksDB
        if enough have gathered (a checkpoint writes the rest)."""
        for cw in self.writers:
            cw.flush()
        if self.state is not None:
            self.state.flush_due()

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

    def alignment(self) -> SubtaskAlignment | None:
        """The barrier it aligns and the channel state it records now, for the
        heartbeat (None: neither; a source subtask has no input channels)."""
        return None

    def counters(self) -> WorkerCounters:
        """What this subtask did so far (see `kstream.protocol.counters`)."""
        return WorkerCounters(0, self.records_out, self.stats.dead_letters, self.stats.replayed)

    @property
    def activity(self) -> int:
        """A count that grows whenever this subtask does something: records read or
        processed, results written, records dead-lettered or dropped, timers fired. Barriers
        and watermarks alone do not count ({ref}`coordinator-idle`)."""
        st = self.stats
        return st.records + self.records_out + st.dead_letters + st.dropped + st.fired

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
