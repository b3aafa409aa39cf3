"""A subtask reading the partitions of a Kafka source.

It snapshots between two batches, recording its next offsets, when a
checkpoint is triggered or when it starts one itself (its source's
`snapshot_every_ms`, or `kstream.request_snapshot()` in its stage):
`kstream.protocol.initiation` decides.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, assert_never

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    TIMESTAMP_NOT_AVAILABLE,
    Message,
    TopicPartition,
)

from kstream.dataflow import snapshot_request
from kstream.dataflow.inputs import snapshot_every_ms
from kstream.dataflow.plan import TaskSpec
from kstream.errors import TimestampError
from kstream.protocol.counters import WorkerCounters
from kstream.protocol.cuts import Cut, CutKind
from kstream.protocol.initiation import Decline, Ignore, SourceInitiation, Take
from kstream.protocol.messages import Initiated
from kstream.protocol.snapshot_id import source_initiator
from kstream.protocol.watermarks import SourceWatermarks, Unusable
from kstream.runtime.kafka import concrete_offsets, connect, raise_if_fatal, request
from kstream.runtime.state.element import now_ms
from kstream.runtime.worker.context import BATCH, MAX_POLL_GAP_MS, TRIGGERED_BATCH, TaskContext
from kstream.runtime.worker.subtask import Subtask

__all__ = ["SourceTask"]


class SourceTask(Subtask):
    """Reads the input partitions p with p % parallelism == index of a Kafka source."""

    def __init__(self, rt: TaskContext, spec: TaskSpec, restore_from: int | None) -> None:
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
            # A new client's first requests wait half a second otherwise.
            connect(self.consumer, self.topic)
            # Where "the beginning" or "the end" is now: read from at once, and
            # snapshotted as such (`concrete_offsets`).
            self.positions = concrete_offsets(self.consumer, self.topic, self.positions)
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
            self.rt.ports.send_control(Initiated(own, self.rt.generation, self.id, time.time()))
            self.rt.ports.announce(own)
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
        """Read one batch and push it through the chain; how many records were read.

        With event time, each record is stamped first (its timestamp judged by
        `SourceWatermarks.observe`), and the watermarks advance after the batch.
        """
        self.flow.step(time.monotonic(), self.consumer)
        if not self.positions:
            if self.element.timed:
                self._publish_watermark()
            return 0
        sw = self.source_watermarks
        msgs = self.flow.consume(self.consumer, limit, timeout)
        if self._at_most_once and msgs:
            self._commit_consumed(msgs)
        if sw is not None:
            now = self._idle_clock()
            # Judges each partition's first record (`SourceWatermarks.observe`).
            wall = now_ms()
        push, loads, positions, element = self.push, self.loads, self.positions, self.element
        fn = self.timestamps
        from_kafka = fn == "kafka"
        # Counted before they are processed: a worker that dies of one of them (a
        # user function exiting the process) still reports what it read.
        self.stats.records += len(msgs)
        for m in msgs:
            if m.error() is not None:
                raise_if_fatal(m)
                continue
            self._current = m
            partition = m.partition() or 0
            try:
                value = loads(m.value())
                if sw is not None:
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
        if sw is not None:
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
        """At most once: commit past every record read, before any is processed."""
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
