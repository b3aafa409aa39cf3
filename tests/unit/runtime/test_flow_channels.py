"""Flow control's runtime pieces that need no broker: which channels a subtask writes,
and the producer stand-in that counts channel records."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import TopicPartition

from kstream.dataflow.plan import TaskSpec, plan
from kstream.examples import collatz, wordcount
from kstream.protocol.barrier import Channel
from kstream.protocol.flow import FlowConfig
from kstream.runtime.channels.flow import (
    IDLE_INTERVAL_S,
    ChannelProbe,
    FlowControl,
    PositionReport,
    _CountingProducer,
    written_channels,
)


def test_a_source_subtask_writes_one_channel_per_counting_subtask() -> None:
    p = plan(wordcount.job({"input": "in", "output": "out", "name": "wc"}), 3)
    topic = "kstream.wc.s1"
    for i in range(3):
        assert written_channels(p, TaskSpec(0, i, 3)) == {
            Channel(topic, i * 3 + j): f"kstream.wc.s1-{j}" for j in range(3)
        }
    # The last stage writes no channels.
    assert written_channels(p, TaskSpec(1, 0, 3)) == {}


class _RecordingProducer:
    def __init__(self) -> None:
        self.produced: list[tuple[Any, ...]] = []
        self.callbacks: list[Any] = []
        self.polled = 0

    def produce(self, topic: str, *args: Any, **kwargs: Any) -> None:
        self.produced.append((topic, *args))
        self.callbacks.append(kwargs.get("on_delivery"))

    def poll(self, _timeout: float) -> int:
        self.polled += 1
        return 0


class _Delivered:
    """What a delivery callback reads of a record."""

    def __init__(self, topic: str, partition: int) -> None:
        self._topic, self._partition = topic, partition

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition


def test_the_counting_producer_counts_its_channels_and_passes_everything_on() -> None:
    p = plan(wordcount.job({"input": "in", "output": "out", "name": "wc"}), 2)
    inner = _RecordingProducer()
    # Flow control off: no probe, and channel writers get the producer itself.
    off = FlowControl("127.0.0.1:1", p, TaskSpec(0, 1, 2), FlowConfig(max_lag=0))
    assert off.counted(inner) is inner  # type: ignore[arg-type]
    counts = {Channel("kstream.wc.s1", 2): 0, Channel("kstream.wc.s1", 3): 0}
    delivered = dict.fromkeys(counts, 0)
    failed: list[tuple[Any, Any]] = []
    counted = _CountingProducer(
        inner,  # type: ignore[arg-type]
        counts,
        delivered,
        lambda err, msg: failed.append((err, msg)),
    )
    counted.produce("kstream.wc.s1", b"a", None, 2)
    counted.produce("kstream.wc.s1", b"b", None, 3)
    counted.produce("kstream.wc.s1", b"c", None, 3)
    counted.produce("kstream.wc.s1", b"x", None, 0)  # another subtask's channel
    counted.produce("out", b"y", None, 3)
    counted.poll(0.1)
    assert inner.produced == [
        ("kstream.wc.s1", b"a", None, 2),
        ("kstream.wc.s1", b"b", None, 3),
        ("kstream.wc.s1", b"c", None, 3),
        ("kstream.wc.s1", b"x", None, 0),
        ("out", b"y", None, 3),
    ]
    assert inner.polled == 1
    assert counts == {Channel("kstream.wc.s1", 2): 1, Channel("kstream.wc.s1", 3): 2}
    # Only its own channels' records carry its delivery callback; others keep the producer's.
    assert [cb is not None for cb in inner.callbacks] == [True, True, True, False, False]
    # Delivered records count; a failure is handed on, not counted.
    inner.callbacks[0](None, _Delivered("kstream.wc.s1", 2))
    inner.callbacks[1](None, _Delivered("kstream.wc.s1", 3))
    inner.callbacks[2]("lost", _Delivered("kstream.wc.s1", 3))
    assert delivered == {Channel("kstream.wc.s1", 2): 1, Channel("kstream.wc.s1", 3): 1}
    assert [err for err, _ in failed] == ["lost"]


class _PlacedConsumer:
    """Assignment and positions as a consumer reports them; records each commit."""

    def __init__(self) -> None:
        self.offsets = {("kstream.wc.s1", 0): 5, ("kstream.wc.s1", 2): 7}
        self.commits: list[list[tuple[str, int, int]]] = []

    def assignment(self) -> list[Any]:
        return [TopicPartition(t, p) for t, p in self.offsets]

    def position(self, tps: list[Any]) -> list[Any]:
        return [
            TopicPartition(tp.topic, tp.partition, self.offsets[tp.topic, tp.partition])
            for tp in tps
        ]

    def commit(self, *, offsets: list[Any], asynchronous: bool) -> None:
        assert asynchronous
        self.commits.append([(tp.topic, tp.partition, tp.offset) for tp in offsets])


def test_a_reader_reports_moving_positions_each_interval_and_still_ones_each_second() -> None:
    consumer = _PlacedConsumer()
    report = PositionReport(consumer)
    report.step(0.0)
    assert consumer.commits == [[("kstream.wc.s1", 0, 5), ("kstream.wc.s1", 2, 7)]]
    for t in (0.1, 0.2, 0.5, 0.9):
        report.step(t)  # unchanged: nothing sent
    assert len(consumer.commits) == 1
    consumer.offsets["kstream.wc.s1", 2] = 9
    report.step(0.95)  # moved, but within the report interval of the last step
    assert len(consumer.commits) == 1
    report.step(1.0)
    assert consumer.commits[-1] == [("kstream.wc.s1", 0, 5), ("kstream.wc.s1", 2, 9)]
    report.step(1.1)
    assert len(consumer.commits) == 2
    # Unchanged for IDLE_INTERVAL_S: sent again (an asynchronous commit may have been lost).
    report.step(1.0 + IDLE_INTERVAL_S)
    assert consumer.commits[-1] == consumer.commits[-2]


def test_a_channel_held_for_an_alignment_is_reported_at_its_resume_offset() -> None:
    """The reader fetched 4..6 past a barrier at 3 and dropped them: they are read
    again once the alignment ends, so they still count in the channel's lag."""
    consumer = _PlacedConsumer()
    report = PositionReport(consumer)
    report.step(0.0, {Channel("kstream.wc.s1", 2): 4})
    assert consumer.commits == [[("kstream.wc.s1", 0, 5), ("kstream.wc.s1", 2, 4)]]
    report.step(1.0, {})  # released: the consumer's own position again
    assert consumer.commits[-1] == [("kstream.wc.s1", 0, 5), ("kstream.wc.s1", 2, 7)]


def test_a_probe_that_gets_no_answer_keeps_probing() -> None:
    """Nothing listens on port 1: every round times out, and the thread goes on."""
    probe = ChannelProbe("127.0.0.1:1", {Channel("kstream.wc.s1", 0): "kstream.wc.s1-0"})
    try:
        deadline = time.monotonic() + 60
        while probe.failures < 2 and time.monotonic() < deadline:
            time.sleep(0.1)  # polling the probe thread's progress, with a deadline
        assert probe.failures >= 2
        assert probe.latest is None
    finally:
        probe.close()


def test_a_loop_channel_is_never_counted_by_its_writer() -> None:
    p = plan(collatz.job({"name": "cz"}), 2)
    # The head writes the body's channel (counted) ...
    assert written_channels(p, TaskSpec(1, 0, 2)) == {
        Channel("kstream.cz.s2", j): f"kstream.cz.s2-{j}" for j in range(2)
    }
    # ... the tail writes only the loop channel, which it must not wait on.
    assert written_channels(p, TaskSpec(2, 1, 2)) == {}
    assert p.loop_channels(TaskSpec(1, 1, 2)) == {
        ("kstream.cz.s1.loop", 1),
        ("kstream.cz.s1.loop", 3),
    }
