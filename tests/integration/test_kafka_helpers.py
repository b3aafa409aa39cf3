"""The runtime's Kafka helpers against a real broker: backpressure and error translation."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, Producer

import kstream.infra.admin as admin_module
from kstream import KafkaSink, KafkaSource
from kstream.errors import KafkaUnavailableError
from kstream.infra.admin import Admin
from kstream.protocol.messages import WorkerAlive
from kstream.protocol.names import control_topic
from kstream.runtime.control import ControlWriter
from kstream.runtime.kafka import IDEMPOTENT, MANUAL_OFFSETS, client_config, connect, flush, produce
from kstream.testing import read_all, unique_name

pytestmark = pytest.mark.broker


def test_produce_waits_for_room_instead_of_failing_on_a_full_queue(
    bootstrap: str, admin: Admin
) -> None:
    topic = unique_name("backpressure")
    admin.create_topics({topic: 1})
    # A local queue of one record: every produce after the first finds it full
    # until the broker acknowledges the one before.
    producer = Producer(client_config(bootstrap, IDEMPOTENT, {"queue.buffering.max.messages": 1}))
    values = [str(i).encode() for i in range(50)]
    for value in values:
        produce(producer, topic, value, b"k", 0)
    flush(producer, 60, topic)
    assert [r.value for r in read_all(bootstrap, topic)] == values


def test_a_refused_produce_is_kstreams_error_naming_the_destination(
    bootstrap: str, admin: Admin
) -> None:
    topic = unique_name("refused")
    admin.create_topics({topic: 1})
    producer = Producer(client_config(bootstrap))
    producer.list_topics(topic, timeout=30)  # the partition count is known: produce checks it
    with pytest.raises(KafkaUnavailableError, match=rf"cannot write to markers {topic}\[7\]"):
        produce(producer, topic, b"v", None, 7, kind="markers")


@pytest.mark.parametrize(
    "public_call",
    [
        lambda where: KafkaSource("t").partitions(where),
        lambda where: KafkaSink("t").check(where),
        lambda where: read_all(where, "t"),
    ],
    ids=["source partitions", "sink check", "read_all"],
)
def test_an_unreachable_cluster_is_kstreams_error_not_a_bare_kafka_exception(
    public_call: Callable[[str], object], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Nothing listens there: no need to wait long.
    monkeypatch.setattr(admin_module, "ADMIN_TIMEOUT_S", 1.0)
    with pytest.raises(KafkaUnavailableError, match=r"127\.0\.0\.1:1 gave no metadata"):
        public_call("127.0.0.1:1")


def test_control_messages_wait_for_room_in_a_full_queue(bootstrap: str, admin: Admin) -> None:
    job = unique_name("ctljob")
    admin.create_topics({control_topic(job): 1})
    writer = ControlWriter(bootstrap, job)
    # The writer's producer, with room for one record that lingers: the second
    # send finds the queue full (it raised BufferError before control messages
    # went through `produce`).
    writer._producer = Producer(
        client_config(bootstrap, IDEMPOTENT, {"queue.buffering.max.messages": 1, "linger.ms": 200})
    )
    sent = [WorkerAlive(f"w{n}", n) for n in range(5)]
    for message in sent:
        writer.send(message, flush=False)
    writer.flush()
    values = [r.value for r in read_all(bootstrap, control_topic(job))]
    assert values == [json.dumps(m.to_dict()).encode() for m in sent]


@pytest.mark.parametrize("kind", ["idempotent producer", "consumer"])
def test_connect_returns_once_a_broker_the_metadata_named_answers(
    bootstrap: str, admin: Admin, kind: str
) -> None:
    # A new client's first metadata comes from its bootstrap address; librdkafka
    # then drops that connection, and what it asks in that moment waits 500 ms.
    topic = unique_name("connect")
    admin.create_topics({topic: 1})
    # Without `connect` about half of new clients get their next answer from the
    # bootstrap connection: four in a row all pass by chance once in 16 runs.
    for _ in range(4):
        client: Producer | Consumer = (
            Producer(client_config(bootstrap, IDEMPOTENT))
            if kind == "idempotent producer"
            else Consumer(client_config(bootstrap, MANUAL_OFFSETS, {"group.id": unique_name("g")}))
        )
        connect(client, topic)
        # The next answer comes from a broker the cluster named (id >= 0), not
        # from the bootstrap connection (-1): that connection is up.
        assert client.list_topics(topic, timeout=10).orig_broker_id >= 0
        if isinstance(client, Consumer):
            client.close()


def test_connect_leaves_an_unreachable_cluster_to_the_real_work() -> None:
    producer = Producer(client_config("127.0.0.1:9", IDEMPOTENT))
    connect(producer, "anything", timeout=0.5)  # returns, raises nothing


def _numbered(bootstrap: str, admin: Admin, prefix: str, counts: dict[int, int]) -> str:
    """A new topic whose partition p holds `counts[p]` records valued 0, 1, ... ."""
    topic = unique_name(prefix)
    admin.create_topics({topic: len(counts)})
    producer = Producer(client_config(bootstrap, IDEMPOTENT))
    for partition, n in counts.items():
        for i in range(n):
            produce(producer, topic, b"%d" % i, None, partition)
    flush(producer, 60, topic)
    return topic


def test_logical_offsets_become_the_offsets_they_stand_for_now(
    bootstrap: str, admin: Admin
) -> None:
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, TopicPartition

    from kstream.runtime.kafka import READ_COMMITTED, concrete_offsets

    topic = _numbered(bootstrap, admin, "concrete", {0: 4, 1: 2, 2: 0})
    # Retention's work: partition 0 now starts at offset 1.
    admin.delete_records_before([TopicPartition(topic, 0, 1)])
    # An open transaction holds partition 1's last stable offset at 2.
    txn = Producer(client_config(bootstrap, {"transactional.id": unique_name("open")}))
    txn.init_transactions(30)
    txn.begin_transaction()
    txn.produce(topic, b"pending", partition=1)
    txn.flush(30)
    consumer = Consumer(
        client_config(bootstrap, MANUAL_OFFSETS, READ_COMMITTED, {"group.id": unique_name("g")})
    )
    try:
        got = concrete_offsets(
            consumer, topic, {0: OFFSET_BEGINNING, 1: OFFSET_END, 2: OFFSET_END, 3: 7}
        )
        assert got == {0: 1, 1: 2, 2: 0, 3: 7}
        assert concrete_offsets(consumer, topic, {0: OFFSET_END, 2: OFFSET_BEGINNING}) == {
            0: 4,
            2: 0,
        }
    finally:
        txn.abort_transaction(30)
        consumer.close()


def test_a_task_consumer_whose_offset_is_gone_reads_on_from_the_earliest_record_kept(
    bootstrap: str, admin: Admin
) -> None:
    from confluent_kafka import TopicPartition

    from kstream.runtime.worker.consumers import task_consumer

    topic = _numbered(bootstrap, admin, "gone", {0: 5})
    # Retention deleted offsets 0-2 while the job was stopped at offset 1.
    admin.delete_records_before([TopicPartition(topic, 0, 3)])
    consumer = task_consumer(bootstrap, unique_name("job"), "s0-0", 50)
    try:
        connect(consumer, topic)
        consumer.assign([TopicPartition(topic, 0, 1)])
        got: list[bytes] = []
        for _ in range(100):
            got += [m.value() or b"" for m in consumer.consume(10, 0.2) if m.error() is None]
            if len(got) >= 2:
                break
    finally:
        consumer.close()
    assert got == [b"3", b"4"]
