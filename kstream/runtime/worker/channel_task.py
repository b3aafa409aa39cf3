"""A subtask reading channels: reader -> input processor -> chain.

`ChannelTask` reads the channel partitions of every input of its stage. A
`ChannelReader` turns each fetched batch into items, an `InputProcessor`
(`kstream.protocol.input`) aligns barriers over all of them with one
`kstream.protocol.barrier.Aligner` and says what to deliver and what to do;
this shell pushes the delivered records through the stage's chain and carries
out the actions: pausing, resuming and seeking a channel that overflowed the
processor's hold, snapshots, storing held snapshots, declining abandoned
ones, and the fault points of each.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar, assert_never

from confluent_kafka import OFFSET_BEGINNING, Message, TopicPartition

from kstream.dataflow.plan import TaskSpec
from kstream.dataflow.state.timers import TimerDomain
from kstream.errors import DecodeError, ProtocolError
from kstream.protocol.barrier import Aligner, Alignment, Channel
from kstream.protocol.cuts import Cut, CutKind
from kstream.protocol.input import (
    DATA,
    MALFORMED,
    TIMED,
    Abandon,
    ChannelItem,
    Hold,
    InputAction,
    InputProcessor,
    Output,
    Pause,
    Resume,
    Snapshot,
    StoreHeld,
)
from kstream.protocol.snapshot_id import source_initiator
from kstream.protocol.watermarks import InputWatermarks
from kstream.protocol.worker_alive import SubtaskAlignment
from kstream.runtime.channels.flow import PositionReport
from kstream.runtime.channels.format import decode_timed
from kstream.runtime.channels.reader import ChannelReader, malformed
from kstream.runtime.kafka import concrete_offsets, connect
from kstream.runtime.state.element import now_ms
from kstream.runtime.worker.chain import input_pushes
from kstream.runtime.worker.context import BATCH, TaskContext
from kstream.runtime.worker.subtask import Subtask

__all__ = ["ChannelTask"]

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
        #: Per channel, the next offset to process (kept by the processor).
        positions: dict[Channel, int] = {}
        if inputs:
            # A new client's first requests wait half a second otherwise.
            connect(self.consumer, inputs[0][0])
        for topic, parts in inputs:
            offsets = dict.fromkeys(parts, OFFSET_BEGINNING)
            if self.restored is not None:
                offsets.update(self.restored.channel_offsets.get(topic, {}))
            # A channel starts at its first offset: read from at once, not after
            # a first fetch that went out without it and waits its 500 ms
            # (`concrete_offsets`).
            offsets = concrete_offsets(self.consumer, topic, offsets)
            assigned += [TopicPartition(topic, p, o) for p, o in offsets.items()]
            positions.update({self.channels[topic, p]: o for p, o in offsets.items()})
        self.reader = ChannelReader(self.channels)
        self.input = InputProcessor(
            self.aligner, positions, rt.alignment_timeout_s, hold_bytes=rt.alignment_hold_bytes
        )
        self._report = PositionReport(self.consumer)
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
        # Also served in the middle of a batch, by a sink waiting for a
        # completion (`SinkContext.pump`): between two parts of it.
        self._carry_out(self.input.abort(checkpoint))
        super().on_abort(checkpoint)

    def alignment(self) -> SubtaskAlignment | None:
        return self.aligner.report(self.id)

    def poll(self, timeout: float) -> int:
        now = time.monotonic()
        if not self.input.pending:
            # Else held items handed back are not processed yet: the consumer's
            # positions are past them. They are by the next turn.
            self._report.step(now, self.input.blocked)
        self.flow.step(now, self.consumer)
        if self.flow.paused:
            self.input.flow_paused()
        # Processing-time timers fire between batches (and count as work done,
        # so the worker flushes what they emitted).
        fired = self.fire_timers(TimerDomain.PROCESSING, now_ms()) if self.timer_operators else 0
        self._carry_out(self.input.tick(time.perf_counter()))
        if self.input.pending:
            # Held items were handed back (an abort, a timeout, a flow resume):
            # they are work now, not after a fetch's wait.
            timeout = 0.0
        msgs = self.flow.consume(self.consumer, BATCH, timeout, counted=False)
        processor = self.input
        out, counts = processor.batch(self.reader.items(msgs), time.perf_counter())
        dropped, replayed = counts.dropped, counts.replayed
        processed = pushed = 0
        while out:
            p, n = self._deliver(out)
            processed += p
            pushed += n
            out, counts = processor.more(time.perf_counter())
            dropped += counts.dropped
            replayed += counts.replayed
        self.stats.dropped += dropped
        # Channel records that went through the chain: only those make output.
        self.flow.processed(pushed)
        self.stats.records += processed
        if replayed:
            self.stats.replayed += replayed
            log.info("%s: replayed %d records of recorded channel state", self.id, replayed)
        return len(msgs) + fired

    def _deliver(self, out: list[Output]) -> tuple[int, int]:
        """Push the delivered items of a part through the chain and carry out its
        actions, in order; (stream records processed, channel records pushed)."""
        pushes, decode = self.pushes, self.batch_format.decode
        keyed = self.stage.keyed
        processed = pushed = 0
        for x in out:
            if not isinstance(x, ChannelItem):
                self._act(x)
                continue
            kind, ch, _, _, _, value, m = x
            # A barrier's item too: its actions follow (stuck reports name it).
            self._current = m
            if kind == DATA:
                try:
                    items = decode(value, keyed)
                except DecodeError as exc:
                    # Malformed or untrusted: the policy keeps the whole record.
                    self.on_record_error(exc, m)
                    continue
                push = pushes[ch.topic]
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
            elif kind == TIMED:
                # A record for the aligner like any data record (a watermark-only one too).
                pushed += 1
                processed += self._timed(m, ch, value, pushes[ch.topic], keyed)
            elif kind == MALFORMED:
                self.on_record_error(malformed(value), m)
        return processed, pushed

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

    def _carry_out(self, actions: Sequence[InputAction]) -> None:
        for action in actions:
            self._act(action)

    def _act(self, action: InputAction) -> None:
        """Carry out one action of the input processor."""
        match action:
            case Hold(checkpoint=n):
                self.rt.faults.hit("aligning", n)
            case Pause(channel=c, checkpoint=n):
                self.consumer.pause([TopicPartition(c.topic, c.partition)])
                self.rt.faults.hit("overflowed", n)
            case Resume(channel=c, offset=offset):
                self.consumer.resume([TopicPartition(c.topic, c.partition)])
                self.consumer.seek(TopicPartition(c.topic, c.partition, offset))
                # The consumer knows no position after a seek (see `PositionReport`).
                self._report.placed(c.topic, c.partition, offset)
            case Snapshot(take=take, alignment_ms=alignment_ms):
                on = take.cut_on
                self.snapshot(
                    take.checkpoint,
                    channel_offsets=_by_topic(take.channel_offsets),
                    alignment_ms=alignment_ms,
                    hold=bool(take.recording),
                    cut_on=Cut(CutKind.TIMEOUT)
                    if on is None
                    else Cut.marker(str(on), self._upstream[on]),
                )
                if take.recording:
                    self.rt.faults.hit("recording", take.checkpoint)
            case StoreHeld(complete=done, recording_ms=recording_ms):
                self.store_held(
                    done.checkpoint,
                    _by_topic(done.channel_offsets),
                    {
                        topic: {p: [[w.end, w.generation] for w in ws] for p, ws in parts.items()}
                        for topic, parts in _by_topic(done.replay).items()
                    },
                    recording_ms,
                    # A range runs from where the channel stood at the snapshot
                    # (its restore offset) to its barrier, the newest window's end.
                    sum(
                        max(w.end for w in windows) - done.channel_offsets[c]
                        for c, windows in done.replay.items()
                    ),
                )
            case Abandon(checkpoint=n):
                self.drop_held(n)
                self.decline(n, "alignment abandoned")
            case _:
                assert_never(action)

    def _held_inputs(self) -> set[tuple[str, int]]:
        return {(c.topic, c.partition) for c in self.input.paused}

    def _on_flow_resume(self) -> None:
        self._carry_out(self.input.flow_resumed())


def _by_topic(by_channel: Mapping[Channel, _V]) -> dict[str, dict[int, _V]]:
    """Per-channel values as the snapshot keeps them: topic -> partition -> value."""
    out: dict[str, dict[int, _V]] = {}
    for c, v in by_channel.items():
        out.setdefault(c.topic, {})[c.partition] = v
    return out
