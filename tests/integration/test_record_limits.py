"""Records at and beyond the size limits, against a real broker: channel batches are
split to fit, a record too large on its own is refused before any producer sees it,
and nothing else is lost or poisoned (a transaction around it still commits)."""

from __future__ import annotations

import json
import random

import pytest
from confluent_kafka import KafkaError, Message, Producer

from kstream.connectors.kafka import KafkaSink, TransactionalWriter
from kstream.dataflow.outputs import SinkContext
from kstream.errors import KafkaUnavailableError, ProtocolError, RecordTooLargeError
from kstream.infra.admin import Admin
from kstream.protocol.limits import (
    DEFAULT_PRODUCER_BYTES,
    INTERNAL_TOPIC_MAX_BYTES,
    MAX_MESSAGE_BYTES,
    RECORD_OVERHEAD,
    producer_limit,
    record_bytes,
)
from kstream.protocol.messages import Acked, WorkerFailed
from kstream.protocol.names import commit_topic, control_topic
from kstream.runtime.channels.format import (
    DATA_HEADER_SIZE,
    RECORD,
    BatchFormat,
    decode_batch,
    decode_header,
)
from kstream.runtime.channels.writer import ChannelWriter
from kstream.runtime.control import REASON_CHARS, ControlWriter
from kstream.testing import read_all, unique_name, wait_settled

pytestmark = pytest.mark.broker

#: A user output topic configured for small records.
SMALL_TOPIC_BYTES = 20_000


class _Deliveries:
    """Delivery errors of a producer, as the worker collects them."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def __call__(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.errors.append(err.str())


def _producer(bootstrap: str, deliveries: _Deliveries, max_bytes: int | None = None) -> Producer:
    conf: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "linger.ms": 5,
        "compression.type": "lz4",
        "on_delivery": deliveries,
        "log_level": 0,
    }
    if max_bytes is not None:
        conf["message.max.bytes"] = max_bytes
    return Producer(conf)


def _channel_items(bootstrap: str, topic: str) -> tuple[list[object], list[int]]:
    """Every stream record in the channel, in order, and the size of each channel record."""
    items: list[object] = []
    sizes = []
    for r in read_all(bootstrap, topic):
        value = r.value or b""
        sizes.append(len(value))
        if decode_header(value)[0] == RECORD:
            items += decode_batch(value)
    return items, sizes


def test_a_batch_of_8kb_records_is_split_into_channel_records_that_fit(
    bootstrap: str, admin: Admin
) -> None:
    topic = unique_name("chan")
    admin.create_topics({topic: 1})
    deliveries = _Deliveries()
    producer = _producer(bootstrap, deliveries)
    writer = ChannelWriter(producer, topic, 0, 1, 1, None)
    # 500 records of 8 KB: 4 MB in one batch, as 8 KB tokens fill a word count's channel.
    values = [f"{i:05d}" + "x" * 8_000 for i in range(1_500)]
    for v in values:
        writer.send(v)
    writer.flush()
    assert producer.flush(30) == 0
    assert deliveries.errors == []
    items, sizes = _channel_items(bootstrap, topic)
    assert items == values  # all of them, in order
    assert max(sizes) <= DEFAULT_PRODUCER_BYTES


def test_a_stream_record_at_the_channel_limit_is_written_one_byte_over_goes_to_the_policy(
    bootstrap: str, admin: Admin
) -> None:
    topic = unique_name("chan")
    admin.create_topics({topic: 1}, {MAX_MESSAGE_BYTES: str(INTERNAL_TOPIC_MAX_BYTES)})
    limit = producer_limit([INTERNAL_TOPIC_MAX_BYTES])
    deliveries = _Deliveries()
    producer = _producer(bootstrap, deliveries, max_bytes=limit)
    refused: list[tuple[object, RecordTooLargeError]] = []
    writer = ChannelWriter(
        producer,
        topic,
        0,
        1,
        1,
        None,
        max_bytes=limit,
        on_too_large=lambda item, exc: refused.append((item, exc)),
    )
    # The channel record of one bytes value of n bytes (n large): header + codec framing + n.
    framing = len(writer_encoding(b"a" * 100_000)) - 100_000
    at_limit = b"a" * (limit - RECORD_OVERHEAD - framing)
    over = b"b" * (limit - RECORD_OVERHEAD - framing + 1)
    assert record_bytes(None, writer_encoding(at_limit)) == limit
    for v in [b"before", at_limit, over, b"after"]:
        writer.send(v)
        writer.flush()  # one stream record per channel record: each alone at the limit
    assert producer.flush(30) == 0
    assert deliveries.errors == []
    items, sizes = _channel_items(bootstrap, topic)
    assert items == [b"before", at_limit, b"after"]
    assert max(sizes) == limit - RECORD_OVERHEAD
    [(item, exc)] = refused
    assert item == over
    assert f"{limit - RECORD_OVERHEAD + 1 - DATA_HEADER_SIZE} bytes (encoded)" in str(exc)
    assert exc.value == repr(over).encode()


def writer_encoding(value: bytes) -> bytes:
    return bytes(DATA_HEADER_SIZE) + BatchFormat().encode([value], False)[1]


def test_a_failed_channel_produce_is_kstreams_error_not_the_records(
    bootstrap: str, admin: Admin
) -> None:
    topic = unique_name("chan")
    admin.create_topics({topic: 1})
    producer = _producer(bootstrap, _Deliveries())
    producer.list_topics(topic, timeout=30)  # the partition count is known: produce checks it
    writer = ChannelWriter(producer, topic, 3, 1, 1, None)  # partition 3 does not exist
    writer.send("x")
    with pytest.raises(KafkaUnavailableError, match=rf"channel {topic}\[3\]"):
        writer.flush()


@pytest.fixture
def small_output(admin: Admin) -> tuple[str, str]:
    job, topic = unique_name("sinkjob"), unique_name("small-out")
    admin.create_topics({topic: 1}, {MAX_MESSAGE_BYTES: str(SMALL_TOPIC_BYTES)})
    admin.create_topics({commit_topic(job): 1})
    return job, topic


def test_an_output_too_large_for_its_topic_never_enters_the_transaction(
    bootstrap: str, small_output: tuple[str, str]
) -> None:
    job, topic = small_output
    ctx = SinkContext(bootstrap, job, "s1-0", 1, Producer({"bootstrap.servers": bootstrap}))
    writer = KafkaSink(topic, value_serde="bytes").open(ctx)
    assert isinstance(writer, TransactionalWriter)
    writer.recover(None, None)
    limit = producer_limit([SMALL_TOPIC_BYTES])
    room = limit - RECORD_OVERHEAD - 1  # for the value, beside the key "k"
    at_limit = ("k", b"v" * room)
    # Beyond the broker's limit even compressed: random bytes do not compress.
    over = ("k", random.Random(0).randbytes(room + SMALL_TOPIC_BYTES))
    writer.write(("first", b"1"))
    writer.write(at_limit)
    refused = None
    try:
        writer.write(over)
    except RecordTooLargeError as exc:
        refused = exc
    writer.write(("last", b"2"))
    writer.pre_commit(1)
    writer.commit(1)  # the transaction is not poisoned by the refused record
    writer.close()
    wait_settled(bootstrap, topic)
    got = [(r.key, r.value) for r in read_all(bootstrap, topic)]
    assert got == [(b"first", b"1"), (b"k", at_limit[1]), (b"last", b"2")]
    assert refused is not None
    assert f"of at most {limit} bytes" in str(refused)
    assert (refused.key, refused.value) == (b"k", over[1])
    with pytest.raises(RecordTooLargeError):
        writer.write(("k", b"v" * (room + 1)))  # one byte over


def test_a_plain_sink_refuses_an_output_over_the_shared_producers_limit(
    bootstrap: str, small_output: tuple[str, str]
) -> None:
    job, topic = small_output
    limit = producer_limit([SMALL_TOPIC_BYTES])
    deliveries = _Deliveries()
    producer = _producer(bootstrap, deliveries, max_bytes=limit)
    ctx = SinkContext(
        bootstrap, job, "s1-0", 1, producer, guarantee="at-least-once", max_record_bytes=limit
    )
    writer = KafkaSink(topic, value_serde="bytes").open(ctx)
    room = limit - RECORD_OVERHEAD - 1
    writer.write(("k", b"v" * room))
    with pytest.raises(RecordTooLargeError):
        writer.write(("k", b"v" * (room + 1)))
    writer.pre_commit(1)
    assert deliveries.errors == []
    assert [len(r.value or b"") for r in read_all(bootstrap, topic)] == [room]


def test_a_control_message_quoting_a_huge_error_is_cut_and_an_oversized_one_refused(
    bootstrap: str, admin: Admin
) -> None:
    job = unique_name("ctl")
    admin.create_topics({control_topic(job): 1})
    control = ControlWriter(bootstrap, job)
    control.send(WorkerFailed("w0", "boom " + "x" * 3_000_000))
    [record] = read_all(bootstrap, control_topic(job))
    reason = json.loads(record.value or b"")["reason"]
    assert reason.startswith("boom ")
    assert len(reason) <= REASON_CHARS + 10
    with pytest.raises(ProtocolError, match="control message 'ack' of"):
        control.send(Acked(1, 1, "t", channel_offsets={"t": {p: p for p in range(10**5)}}))
