"""`kstream.runtime.channels.format`: the wire format of channel records and how batches are cut.

The writer is given a producer that keeps what it is asked to produce (unit level:
no Kafka here; the integration and end-to-end tests run channels on a real broker).
"""

from __future__ import annotations

import os
import pickle
import zlib
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from hypothesis import given
from hypothesis import strategies as st

from kstream.dataflow.channel_serde import TRUSTED_PICKLE, ChannelSerde, RecordType
from kstream.errors import (
    DecodeError,
    KafkaUnavailableError,
    ProtocolError,
    RecordTooLargeError,
    UnsupportedTypeError,
)
from kstream.protocol.codec import ITEMS, PAIRS, SAME_PAIRS
from kstream.protocol.limits import RECORD_OVERHEAD
from kstream.runtime.channels.format import (
    BARRIER,
    DATA_HEADER_SIZE,
    HEADER_SIZE,
    MAX_BATCH,
    PICKLE,
    RECORD,
    BatchFormat,
    barrier_checkpoint,
    decode_batch,
    decode_header,
    encode_barrier,
)
from kstream.runtime.channels.writer import ChannelWriter
from kstream.runtime.state.store import key_bytes

TOPIC = "kstream.j.s1"


class KeepingProducer:
    """Keeps (partition, value) of every produce call, in order; may refuse some first."""

    def __init__(self, full: int = 0, fail: bool = False) -> None:
        self.records: list[tuple[int, bytes]] = []
        self.polls = 0
        self._full = full
        self._fail = fail

    def produce(
        self, topic: str, value: bytes, key: bytes | None = None, partition: int = -1
    ) -> None:
        assert topic == TOPIC
        assert key is None  # channel records carry no key
        if self._fail:
            raise KafkaException(KafkaError(KafkaError._MSG_TIMED_OUT, "gone"))
        if self._full:
            self._full -= 1
            raise BufferError("Local: Queue full")
        self.records.append((partition, value))

    def poll(self, timeout: float) -> int:
        self.polls += 1
        return 0

    def by_partition(self) -> dict[int, list[Any]]:
        """Stream records (or ('barrier', n)) per partition, in order, checking every header."""
        out: dict[int, list[Any]] = defaultdict(list)
        for partition, value in self.records:
            kind, _ = decode_header(value)
            if kind == BARRIER:
                out[partition].append(("barrier", barrier_checkpoint(value)))
            else:
                assert kind == RECORD
                out[partition].extend(decode_batch(value))
        return dict(out)


def writer(
    producer: KeepingProducer,
    upstream: int = 0,
    downstream: int = 1,
    generation: int = 1,
    keyed: bool = True,
    **kw: Any,
) -> ChannelWriter:
    key_fn = (lambda v: v) if keyed else None
    return ChannelWriter(
        producer,  # type: ignore[arg-type]
        TOPIC,
        upstream,
        downstream,
        generation,
        key_fn,
        **kw,
    )


# -- header and barriers ------------------------------------------------------------


def test_a_barrier_is_a_header_and_a_checkpoint_id() -> None:
    value = encode_barrier(7, 3)
    assert value == bytes([1, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 7])
    assert decode_header(value) == (BARRIER, 3)
    assert barrier_checkpoint(value) == 7


@given(checkpoint=st.integers(0, 2**64 - 1), generation=st.integers(0, 2**32 - 1))
def test_barriers_round_trip(checkpoint: int, generation: int) -> None:
    value = encode_barrier(checkpoint, generation)
    assert decode_header(value) == (BARRIER, generation)
    assert barrier_checkpoint(value) == checkpoint


@pytest.mark.parametrize("value", [b"", b"\x00", b"\x00\x00\x00\x01"])
def test_a_record_shorter_than_the_header_is_a_protocol_error(value: bytes) -> None:
    with pytest.raises(ProtocolError, match=f"channel record of {len(value)} bytes has no header"):
        decode_header(value)


# -- data records -----------------------------------------------------------------


def test_a_data_record_carries_its_writers_generation_and_a_batch() -> None:
    producer = KeepingProducer()
    w = writer(producer, generation=42, keyed=False)
    w.send("a")
    w.send({"b": 1})
    w.flush()
    [(partition, value)] = producer.records
    assert partition == 0
    assert decode_header(value) == (RECORD, 42)
    assert decode_batch(value) == ["a", {"b": 1}]
    assert w.sent == 2


def test_a_keyed_edge_routes_by_a_stable_hash_of_the_key_into_the_writers_channels() -> None:
    producer = KeepingProducer()
    w = writer(producer, upstream=2, downstream=4)
    words = [f"w{i}" for i in range(50)]
    for word in words:
        w.send(word)
    w.flush()
    got = producer.by_partition()
    assert set(got) <= {8, 9, 10, 11}  # upstream 2 owns partitions 2*4 .. 2*4+3
    for partition, pairs in got.items():
        assert pairs == [
            (word, word) for word in words if 8 + zlib.crc32(key_bytes(word)) % 4 == partition
        ]


def test_a_rebalance_edge_deals_round_robin_from_the_writers_own_offset() -> None:
    producer = KeepingProducer()
    w = writer(producer, upstream=1, downstream=3, keyed=False)
    for i in range(7):
        w.send(i)
    w.flush()
    # Upstream 1 starts at downstream 1 so that upstream subtasks do not all start at 0.
    assert producer.by_partition() == {3: [2, 5], 4: [0, 3, 6], 5: [1, 4]}


def test_a_full_batch_is_written_without_waiting_for_flush() -> None:
    producer = KeepingProducer()
    w = writer(producer, keyed=False)
    for i in range(MAX_BATCH + 1):
        w.send(i)
    assert len(producer.records) == 1
    assert decode_batch(producer.records[0][1]) == list(range(MAX_BATCH))
    w.flush()
    assert decode_batch(producer.records[1][1]) == [MAX_BATCH]


def test_a_barrier_follows_the_records_sent_before_it_on_every_channel() -> None:
    producer = KeepingProducer()
    w = writer(producer, upstream=1, downstream=2, generation=5, keyed=False)
    w.send("x")
    w.barrier(9)
    w.send("y")
    w.flush()
    assert producer.by_partition() == {2: [("barrier", 9), "y"], 3: ["x", ("barrier", 9)]}
    barriers = [v for _, v in producer.records if decode_header(v)[0] == BARRIER]
    assert [decode_header(v) for v in barriers] == [(BARRIER, 5), (BARRIER, 5)]


@given(
    values=st.lists(st.one_of(st.text(max_size=20), st.integers()), max_size=300),
    downstream=st.integers(1, 5),
    upstream=st.integers(0, 4),
    keyed=st.booleans(),
    barrier_at=st.integers(0, 300),
)
def test_every_value_arrives_once_in_order_on_its_channel(
    values: list[Any], downstream: int, upstream: int, keyed: bool, barrier_at: int
) -> None:
    producer = KeepingProducer()
    w = writer(producer, upstream, downstream, keyed=keyed)
    expected: dict[int, list[Any]] = defaultdict(list)
    base = upstream * downstream
    for i, v in enumerate(values):
        if i == barrier_at:
            w.barrier(1)
            for j in range(downstream):
                expected[base + j].append(("barrier", 1))
        w.send(v)
        if keyed:
            expected[base + zlib.crc32(key_bytes(v)) % downstream].append((v, v))
        else:
            expected[base + (upstream + i) % downstream].append(v)
    w.flush()
    assert producer.by_partition() == {p: e for p, e in expected.items() if e}


# -- size bounds --------------------------------------------------------------------


def test_a_batch_too_large_for_one_record_is_split_in_order_into_records_that_fit() -> None:
    producer = KeepingProducer()
    limit = 2000
    w = writer(producer, keyed=False, max_bytes=limit)
    values = ["x" * 300 for _ in range(20)]
    values = [f"{i}:{v}" for i, v in enumerate(values)]
    for v in values:
        w.send(v)
    w.flush()
    assert len(producer.records) > 1
    assert all(len(value) + RECORD_OVERHEAD <= limit for _, value in producer.records)
    assert producer.by_partition() == {0: values}
    assert w.too_large == 0


def test_a_record_too_large_alone_goes_to_the_handler_and_the_others_are_written() -> None:
    producer = KeepingProducer()
    refused: list[tuple[Any, RecordTooLargeError]] = []
    w = writer(
        producer,
        keyed=False,
        max_bytes=1000,
        on_too_large=lambda item, exc: refused.append((item, exc)),
    )
    huge = "h" * 5000
    for v in ["a", huge, "b"]:
        w.send(v)
    w.flush()
    assert producer.by_partition() == {0: ["a", "b"]}
    [(item, exc)] = refused
    assert item == huge
    assert exc.value == repr(huge).encode()
    assert f"cannot be written to channel {TOPIC}[0]" in str(exc)
    assert w.too_large == 1
    assert w.sent == 2


def test_without_a_handler_a_record_too_large_is_raised() -> None:
    w = writer(KeepingProducer(), keyed=False, max_bytes=1000)
    w.send("h" * 5000)
    with pytest.raises(RecordTooLargeError, match=r"its records hold at most \d+ bytes"):
        w.flush()


def test_the_batch_bound_shrinks_for_large_stream_records() -> None:
    producer = KeepingProducer()
    w = writer(producer, keyed=False, max_bytes=100_000)
    w.send("y" * 10_000)
    w.flush()  # about 10 kB per record: half the limit holds about 5
    for _ in range(20):
        w.send("y" * 10_000)
    # Written before any flush, in batches that keep each record near half the limit.
    sizes = [len(decode_batch(v)) for _, v in producer.records[1:]]
    assert sum(sizes) >= 16
    assert max(sizes) <= 5


# -- produce failures -----------------------------------------------------------------


def test_a_full_local_queue_is_served_until_the_record_fits() -> None:
    producer = KeepingProducer(full=3)
    w = writer(producer, keyed=False)
    w.send("a")
    w.flush()
    assert producer.polls == 3
    assert producer.by_partition() == {0: ["a"]}


def test_a_failed_produce_stops_the_worker_instead_of_blaming_a_record() -> None:
    w = writer(KeepingProducer(fail=True), keyed=False)
    w.send("a")
    with pytest.raises(KafkaUnavailableError, match=rf"cannot write to channel {TOPIC}\[0\]"):
        w.flush()


def test_the_header_size_is_the_documented_five_bytes() -> None:
    assert HEADER_SIZE == 5


# -- batch formats ------------------------------------------------------------------


class Opaque:
    """A user class the safe encoding does not carry."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opaque)

    def __hash__(self) -> int:
        return 0


def test_a_barrier_too_short_for_its_checkpoint_id_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="barrier record of 9 bytes has no checkpoint id"):
        barrier_checkpoint(encode_barrier(7, 1)[:9])


def test_a_data_record_names_its_batch_format_after_the_header() -> None:
    producer = KeepingProducer()
    w = writer(producer, generation=3, keyed=True)
    for v in ["a", "b"]:
        w.send(v)
    w.flush()
    [(_, value)] = producer.records
    assert value[:DATA_HEADER_SIZE] == bytes([RECORD, 0, 0, 0, 3, SAME_PAIRS])
    assert decode_batch(value, keyed=True) == [("a", "a"), ("b", "b")]


def _pickled_batch(items: list[Any]) -> bytes:
    return bytes([RECORD, 0, 0, 0, 1, PICKLE]) + pickle.dumps(items)


def test_a_pickled_batch_is_refused_unread_unless_the_job_trusts_pickle(tmp_path: Path) -> None:
    target = tmp_path / "pwned"

    class Exploit:
        def __reduce__(self) -> tuple[Any, ...]:
            return (os.system, (f"touch {target}",))

    value = _pickled_batch([Exploit()])
    for keyed in (False, True):
        with pytest.raises(DecodeError, match="format trusted-pickle refused unread"):
            decode_batch(value, BatchFormat(), keyed)
    assert not target.exists()
    # The job that chose pickle reads it, with what that means.
    BatchFormat(TRUSTED_PICKLE).decode(value, False)
    assert target.exists()


def test_a_trusted_pickle_job_writes_pickle_and_reads_the_safe_formats_too() -> None:
    producer = KeepingProducer()
    trusted = BatchFormat(TRUSTED_PICKLE)
    w = writer(producer, keyed=False, batch_format=trusted)
    w.send(Opaque())
    w.flush()
    [(_, value)] = producer.records
    assert value[HEADER_SIZE] == PICKLE
    assert trusted.decode(value, False) == [Opaque()]
    safe_value = bytes([RECORD, 0, 0, 0, 1, ITEMS]) + BatchFormat().encode(["x"], False)[1]
    assert trusted.decode(safe_value, False) == ["x"]


@pytest.mark.parametrize(
    ("value", "keyed", "why"),
    [
        (bytes([RECORD, 0, 0, 0, 1]), False, "has no batch format"),
        (bytes([RECORD, 0, 0, 0, 1, 9]) + b"\x90", False, "unknown format 9"),
        (bytes([RECORD, 0, 0, 0, 1, 0x80]) + pickle.dumps([1])[1:], False, "unknown format 128"),
        (bytes([RECORD, 0, 0, 0, 1, ITEMS, 0x91, 0x01]), True, "for a keyed channel"),
        (bytes([RECORD, 0, 0, 0, 1, PAIRS, 0x91, 0x01]), True, "odd number"),
        (bytes([RECORD, 0, 0, 0, 1, ITEMS, 0x92, 0x01]), False, "incomplete"),
    ],
)
def test_malformed_batches_are_decode_errors(value: bytes, keyed: bool, why: str) -> None:
    with pytest.raises(DecodeError, match=why):
        decode_batch(value, keyed=keyed)


def test_an_unencodable_record_goes_to_the_handler_naming_its_type_and_the_ways_out() -> None:
    producer = KeepingProducer()
    refused: list[tuple[Any, UnsupportedTypeError]] = []
    w = writer(producer, keyed=False, on_unencodable=lambda i, e: refused.append((i, e)))
    bad = ("ok", Opaque())
    for v in ["a", bad, "b"]:
        w.send(v)
    w.flush()
    assert producer.by_partition() == {0: ["a", "b"]}
    [(item, exc)] = refused
    assert item is bad
    message = str(exc)
    assert "a stream record of type tuple holds a test_channel_format.Opaque" in message
    assert "channel_serde=[kstream.RecordType(" in message
    assert "channel_serde='trusted-pickle') (unsafe: loading pickle runs code)" in message
    assert w.sent == 2


def test_without_a_handler_an_unencodable_record_is_raised() -> None:
    w = writer(KeepingProducer(), keyed=False)
    w.send(Opaque())
    with pytest.raises(UnsupportedTypeError, match=r"record is a test_channel_format\.Opaque"):
        w.flush()


def test_a_key_of_an_unsupported_type_fails_its_record_when_sent() -> None:
    # Raised in `send`, so the task applies the policy with the input's position.
    w = writer(KeepingProducer(), keyed=True)
    with pytest.raises(UnsupportedTypeError, match="a key of type Opaque"):
        w.send(Opaque())


def test_a_declared_record_type_crosses_the_channel() -> None:
    producer = KeepingProducer()
    declared = BatchFormat(
        ChannelSerde(types=(RecordType(Opaque, lambda _: None, lambda _: Opaque(), "opaque"),))
    )
    w = writer(producer, keyed=False, batch_format=declared)
    w.send(Opaque())
    w.flush()
    [(_, value)] = producer.records
    assert declared.decode(value, False) == [Opaque()]
    with pytest.raises(DecodeError, match="'opaque' is not declared"):
        decode_batch(value)


def test_with_out_a_writer_hands_over_the_records_it_would_produce() -> None:
    producer, handed = KeepingProducer(), KeepingProducer()
    values = [f"v{i}" for i in range(40)]
    kept = writer(producer, downstream=3)
    given = writer(None, downstream=3, out=lambda p, v: handed.records.append((p, v)))  # type: ignore[arg-type]
    for w in (kept, given):
        for v in values:
            w.send(v)
        w.barrier(4)
    assert handed.records == producer.records
    assert len(handed.records) > 3
