"""Timed channel records (`kstream.runtime.channels.format`): stamps beside the items, the
writer's watermark after them, watermark-only records, splitting; no Kafka."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kstream.errors import ProtocolError
from kstream.protocol.watermarks import MIN_WATERMARK
from kstream.runtime.channels.format import (
    TIMED,
    BatchFormat,
    decode_header,
    decode_timed,
    encode_timed,
)
from kstream.runtime.channels.writer import ChannelWriter
from kstream.runtime.state.element import ElementContext

TOPIC = "kstream.j.s1"


class KeepingProducer:
    def __init__(self) -> None:
        self.records: list[tuple[int, bytes]] = []

    def produce(
        self, topic: str, value: bytes, key: bytes | None = None, partition: int = -1
    ) -> None:
        self.records.append((partition, value))

    def poll(self, timeout: float) -> int:
        return 0

    def decoded(self) -> list[tuple[int, int, bool, list[tuple[Any, int, int]]]]:
        """(partition, watermark, idle, [(item, ts, stamp)]) per record."""
        out = []
        for partition, value in self.records:
            assert decode_header(value) == (TIMED, 3)
            t = decode_timed(value, BatchFormat(), keyed=False)
            items = [(x, t.stamps[2 * i], t.stamps[2 * i + 1]) for i, x in enumerate(t.items)]
            out.append((partition, t.watermark, t.idle, items))
        return out


def timed_writer(
    producer: KeepingProducer, element: ElementContext, downstream: int = 1, **kw: Any
) -> ChannelWriter:
    return ChannelWriter(
        producer,  # type: ignore[arg-type]
        TOPIC,
        0,
        downstream,
        3,
        None,
        element=element,
        **kw,
    )


def send(w: ChannelWriter, element: ElementContext, value: Any, ts: int, stamp: int) -> None:
    element.timestamp, element.stamp = ts, stamp
    w.send(value)


def test_items_carry_their_stamps_and_the_record_the_watermark_of_the_flush() -> None:
    producer, element = KeepingProducer(), ElementContext(timed=True)
    w = timed_writer(producer, element)
    send(w, element, "a", 10, 5)
    send(w, element, "b", -3, MIN_WATERMARK)
    element.watermark = 4
    w.flush()
    assert producer.decoded() == [(0, 4, False, [("a", 10, 5), ("b", -3, MIN_WATERMARK)])]


def test_a_changed_watermark_alone_is_one_record_per_channel_and_flush() -> None:
    producer, element = KeepingProducer(), ElementContext(timed=True)
    w = timed_writer(producer, element, downstream=2)
    w.flush()
    assert producer.records == []  # nothing new: nothing written
    element.watermark = 7
    w.flush()
    w.flush()
    assert producer.decoded() == [(0, 7, False, []), (1, 7, False, [])]
    producer.records.clear()
    element.idle = True
    w.flush()
    assert producer.decoded() == [(0, 7, True, []), (1, 7, True, [])]


def test_a_batch_full_before_the_flush_carries_the_previous_watermark() -> None:
    """A subtask's watermark goes out only after everything it emitted below it."""
    producer, element = KeepingProducer(), ElementContext(timed=True)
    w = timed_writer(producer, element)
    w._cap = 2  # as if large records had lowered the count bound
    element.watermark = 1
    w.flush()
    element.watermark = 50  # advanced, then a timer emits two outputs
    send(w, element, "x", 40, 40)
    send(w, element, "y", 41, 41)
    w.flush()
    assert [(wm, len(items)) for _, wm, _, items in producer.decoded()] == [(1, 0), (1, 2), (50, 0)]


def test_a_batch_too_large_is_split_with_its_stamps() -> None:
    producer, element = KeepingProducer(), ElementContext(timed=True)
    w = timed_writer(producer, element, max_bytes=2_000)
    values = [(i, str(i) * 300) for i in range(8)]
    for i, v in enumerate(values):
        send(w, element, v, 100 + i, i)
    element.watermark = 99
    w.flush()
    decoded = producer.decoded()
    assert len(decoded) > 1
    assert [it for *_, items in decoded for it in items] == [
        (v, 100 + i, i) for i, v in enumerate(values)
    ]
    assert {wm for _, wm, _, _ in decoded} == {99}


@given(
    st.lists(st.tuples(st.integers(), st.integers(-(2**63), 2**63 - 1)), max_size=30),
    st.integers(-(2**63), 2**63 - 1),
    st.booleans(),
)
def test_timed_records_round_trip(items: list[tuple[int, int]], watermark: int, idle: bool) -> None:
    stamps = [x for _, ts in items for x in (ts, ts // 2)]
    fmt, payload = BatchFormat().encode([v for v, _ in items], False)
    value = encode_timed(b"\x02\x00\x00\x00\x03", watermark, idle, stamps, fmt, payload)
    t = decode_timed(value, BatchFormat(), keyed=False)
    assert (t.watermark, t.idle, list(t.stamps), t.items) == (
        watermark,
        idle,
        stamps,
        [v for v, _ in items],
    )


def test_a_truncated_timed_record_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="too short"):
        decode_timed(b"\x02\x00\x00\x00\x03\x00", BatchFormat(), keyed=False)
