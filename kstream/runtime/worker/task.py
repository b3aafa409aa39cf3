"""A subtask reading channels, and `open_task`, which opens a subtask of either kind.

`ChannelTask` reads the channel partitions of every input of its stage and
aligns barriers over all of them with one `kstream.protocol.barrier.Aligner`;
it snapshots when the aligner says so. `SourceTask`
(`kstream.runtime.worker.source_task`) reads source partitions; both share the
shell `kstream.runtime.worker.subtask.Subtask`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any, TypeVar, assert_never

from confluent_kafka import OFFSET_BEGINNING, Message, TopicPartition

from kstream.dataflow.plan import TaskSpec
from kstream.dataflow.state.timers import TimerDomain
from kstream.errors import DecodeError, ProtocolError
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
    TakeSnapshot,
    Unblock,
)
from kstream.protocol.cuts import Cut, CutKind
from kstream.protocol.snapshot_id import source_initiator
from kstream.protocol.watermarks import InputWatermarks
from kstream.runtime.channels.flow import PositionReport
from kstream.runtime.channels.format import (
    BARRIER,
    RECORD,
    TIMED,
    barrier_checkpoint,
    decode_header,
    decode_timed,
)
from kstream.runtime.kafka import connect, raise_if_fatal
from kstream.runtime.state.element import now_ms
from kstream.runtime.worker.chain import input_pushes
from kstream.runtime.worker.context import BATCH, TaskContext
from kstream.runtime.worker.source_task import SourceTask
from kstream.runtime.worker.subtask import Subtask

__all__ = ["ChannelTask", "open_task"]

log = logging.getLogger("kstream.task")

_V = TypeVar("_V")


class ChannelTask(Subtask):
    """Reads its channels (per input of its stage, one per upstream subtask) and aligns
    barriers over all of them: a barrier goes on once every channel of every input
    delivered it, so the snapshot is one consistent cut across the inputs."""

    def __init__(self, rt: TaskContext, spec: TaskSpec, restore_from: int | None) -> None:
        super().__init__(rt, spec, restore_from)
        inputs = rt.plan.input_channels(spec)
        self.channels = {(t, p): Channel(t, p) for t, parts in inputs for p in parts}
        #: Per channel topic, the push function of its input (a co-process's side).
        self.pushes = dict(
            zip((t for t, _ in inputs), input_pushes(self.stage, self.push), strict=True)
        )
        # `restore` refused a snapshot replaying a channel not among these.
        replay = self.restored_from.replay(self.channels)
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
                raise_if_fatal(m)
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


def open_task(rt: TaskContext, spec: TaskSpec, restore_from: int | None) -> Subtask:
    """Build the subtask for `spec`, restored from checkpoint `restore_from` (None: fresh)."""
    if rt.plan.stage(spec).source is not None:
        return SourceTask(rt, spec, restore_from)
    return ChannelTask(rt, spec, restore_from)
