"""`kstream.runtime.channels.reader`: channel messages become items, their header decoded once.

The values are `ChannelWriter`'s own (it produces into a producer that keeps
them); the messages are small stand-ins for confluent_kafka's message values.
"""

from __future__ import annotations

import pytest

from kstream.errors import DecodeError, JobFailedError
from kstream.protocol import input as items
from kstream.protocol.barrier import Channel
from kstream.protocol.input import BARRIER, DATA, MALFORMED, TIMED, ChannelItem
from kstream.runtime.channels import format as wire
from kstream.runtime.channels.format import decode_batch, decode_timed, encode_barrier
from kstream.runtime.channels.reader import ChannelReader, malformed
from kstream.runtime.channels.writer import ChannelWriter
from kstream.runtime.state.element import ElementContext

TOPIC = "kstream.j.s1"
GEN = 3


class Producer:
    """Keeps (partition, value) of every channel record produced."""

    def __init__(self) -> None:
        self.records: list[tuple[int, bytes]] = []

    def produce(self, topic: str, value: bytes, key: None = None, partition: int = -1) -> None:
        assert topic == TOPIC
        self.records.append((partition, value))

    def poll(self, timeout: float) -> int:
        return 0


class Error:
    def __init__(self, fatal: bool) -> None:
        self._fatal = fatal

    def fatal(self) -> bool:
        return self._fatal

    def str(self) -> str:
        return "broker gone" if self._fatal else "partition end"


class Message:
    """What the reader asks of a consumed message."""

    def __init__(
        self,
        partition: int,
        offset: int,
        value: bytes | None,
        error: Error | None = None,
        topic: str = TOPIC,
    ) -> None:
        self._partition, self._offset, self._value = partition, offset, value
        self._error, self._topic = error, topic

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def value(self) -> bytes | None:
        return self._value

    def error(self) -> Error | None:
        return self._error


def messages(producer: Producer) -> list[Message]:
    """The produced records as consumed: offsets per partition from 0."""
    offsets: dict[int, int] = {}
    out = []
    for partition, value in producer.records:
        offset = offsets.get(partition, 0)
        offsets[partition] = offset + 1
        out.append(Message(partition, offset, value))
    return out


def reader(partitions: int = 2) -> ChannelReader:
    return ChannelReader({(TOPIC, p): Channel(TOPIC, p) for p in range(partitions)})


def test_the_kinds_are_the_wire_formats() -> None:
    assert (items.DATA, items.BARRIER, items.TIMED) == (wire.RECORD, wire.BARRIER, wire.TIMED)
    assert MALFORMED not in (wire.RECORD, wire.BARRIER, wire.TIMED)


def test_data_and_barrier_records_of_the_writer_become_items() -> None:
    producer = Producer()
    w = ChannelWriter(producer, TOPIC, 0, 2, GEN, None)  # type: ignore[arg-type]
    for v in ["a", "b", "c"]:
        w.send(v)
    w.barrier(9)
    w.send("d")
    w.flush()
    msgs = messages(producer)
    got = reader().items(msgs)
    assert [(i.kind, i.channel, i.offset, i.generation, i.checkpoint) for i in got] == [
        (DATA, Channel(TOPIC, 0), 0, GEN, 0),
        (DATA, Channel(TOPIC, 1), 0, GEN, 0),
        (BARRIER, Channel(TOPIC, 0), 1, GEN, 9),
        (BARRIER, Channel(TOPIC, 1), 1, GEN, 9),
        (DATA, Channel(TOPIC, 1), 2, GEN, 0),
    ]
    assert all(type(i) is ChannelItem for i in got)
    assert [i.message for i in got] == msgs
    assert [i.value for i in got] == [m.value() for m in msgs]
    assert [decode_batch(i.value) for i in got if i.kind == DATA] == [["a", "c"], ["b"], ["d"]]


def test_timed_records_of_the_writer_become_timed_items() -> None:
    producer, element = Producer(), ElementContext(timed=True)
    w = ChannelWriter(producer, TOPIC, 0, 1, GEN, None, element=element)  # type: ignore[arg-type]
    element.timestamp, element.stamp = 10, 5
    w.send("x")
    element.watermark = 4
    w.flush()
    element.watermark = 8
    w.flush()  # a watermark-only record
    (first, second) = reader(1).items(messages(producer))
    assert (first.kind, first.generation, first.offset) == (TIMED, GEN, 0)
    assert (second.kind, second.generation, second.offset) == (TIMED, GEN, 1)
    assert decode_timed(first.value, wire.SAFE_FORMAT, False).items == ["x"]
    assert decode_timed(second.value, wire.SAFE_FORMAT, False).watermark == 8


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (None, "channel record of 0 bytes has no header"),
        (b"\x00\x00\x00", "channel record of 3 bytes has no header"),
        (encode_barrier(4, GEN)[:-1], "barrier record of 12 bytes has no checkpoint id"),
    ],
    ids=["empty", "short", "short-barrier"],
)
def test_a_value_too_short_is_a_malformed_item(value: bytes | None, why: str) -> None:
    m = Message(1, 7, value)
    (got,) = reader().items([m])
    assert got == ChannelItem(MALFORMED, Channel(TOPIC, 1), 7, 0, 0, value or b"", m)
    error = malformed(got.value)
    assert isinstance(error, DecodeError)
    assert str(error) == why


def test_a_record_of_another_kind_keeps_its_kind_and_generation() -> None:
    value = bytes([7]) + GEN.to_bytes(4, "big")
    (got,) = reader().items([Message(0, 0, value)])
    assert (got.kind, got.generation) == (7, GEN)


def test_consumer_errors_are_skipped_and_a_fatal_one_raises() -> None:
    barrier = encode_barrier(2, GEN)
    got = reader().items([Message(0, 0, None, Error(fatal=False)), Message(0, 0, barrier)])
    assert [(i.kind, i.checkpoint) for i in got] == [(BARRIER, 2)]
    with pytest.raises(JobFailedError, match=r"kstream.j.s1\[1\]: broker gone"):
        reader().items([Message(1, 0, None, Error(fatal=True))])


def test_a_partition_that_is_no_channel_of_the_reader_is_refused() -> None:
    with pytest.raises(KeyError):
        reader().items([Message(0, 0, encode_barrier(1, GEN), topic="kstream.j.s2")])


def test_items_are_made_for_the_processor() -> None:
    """The processor unpacks an item positionally: the fields are in the declared order."""
    assert ChannelItem._fields == (
        "kind",
        "channel",
        "offset",
        "generation",
        "checkpoint",
        "value",
        "message",
    )
