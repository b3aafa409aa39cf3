"""What kstream relies on from Kafka, proved against a real broker."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from kstream.infra.admin import Admin
from kstream.testing import produce, read_all, unique_name

pytestmark = pytest.mark.broker


def test_committed_records_are_visible_and_aborted_ones_are_not(
    bootstrap: str, admin: Admin, topic: str
) -> None:
    admin.create_topics({topic: 1})
    tid = unique_name("tx")
    committed = [(b"k", f"c{i}".encode()) for i in range(50)]
    aborted = [(b"k", f"a{i}".encode()) for i in range(30)]
    produce(bootstrap, topic, committed[:25], transactional_id=tid)
    produce(bootstrap, topic, aborted, transactional_id=tid, abort=True)
    produce(bootstrap, topic, committed[25:], transactional_id=tid)

    seen = read_all(bootstrap, topic)
    assert [(r.key, r.value) for r in seen] == committed
    # The aborted records are in the log: a read_uncommitted reader sees them.
    raw = read_all(bootstrap, topic, isolation="read_uncommitted")
    assert [r.value for r in raw] == [v for _, v in committed[:25] + aborted + committed[25:]]
    # Transaction markers take offsets too, so committed offsets have gaps.
    assert seen[-1].offset > len(committed) - 1


def test_init_transactions_fences_the_previous_producer_and_aborts_its_transaction(
    bootstrap: str, admin: Admin, topic: str
) -> None:
    admin.create_topics({topic: 1})
    tid = unique_name("tx")
    zombie = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "log_level": 0})
    zombie.init_transactions(30)
    zombie.begin_transaction()
    for i in range(10):
        zombie.produce(topic, key=b"z", value=f"zombie-{i}".encode())
    assert zombie.flush(30) == 0

    successor = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "log_level": 0})
    successor.init_transactions(30)
    successor.begin_transaction()
    successor.produce(topic, key=b"s", value=b"successor")
    successor.commit_transaction(30)

    with pytest.raises(KafkaException) as caught:
        zombie.commit_transaction(30)
    assert caught.value.args[0].fatal()

    assert [r.value for r in read_all(bootstrap, topic)] == [b"successor"]
    assert len(read_all(bootstrap, topic, isolation="read_uncommitted")) == 11


def test_pause_resume_and_seek_act_on_single_partitions(
    bootstrap: str, admin: Admin, topic: str
) -> None:
    admin.create_topics({topic: 2})
    for p in (0, 1):
        produce(bootstrap, topic, [(None, f"p{p}-{i}".encode()) for i in range(20)], partition=p)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique_name("g"),
            "enable.auto.commit": False,
            "log_level": 0,
        }
    )
    try:
        p0, p1 = TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)
        consumer.assign([p0, p1])
        consumer.pause([TopicPartition(topic, 0)])

        got: list[str] = []
        while len(got) < 20:
            got += [m.value().decode() for m in consumer.consume(100, 1.0) if not m.error()]
        assert got == [f"p1-{i}" for i in range(20)], "a paused partition must deliver nothing"

        consumer.seek(TopicPartition(topic, 1, 15))
        consumer.resume([TopicPartition(topic, 0)])
        rest: list[str] = []
        while len(rest) < 25:
            rest += [m.value().decode() for m in consumer.consume(100, 1.0) if not m.error()]
        assert sorted(v for v in rest if v.startswith("p0")) == sorted(f"p0-{i}" for i in range(20))
        assert [v for v in rest if v.startswith("p1")] == [f"p1-{i}" for i in range(15, 20)]
        # Within one partition the order is the log's order (one FIFO channel).
        assert [v for v in rest if v.startswith("p0")] == [f"p0-{i}" for i in range(20)]
    finally:
        consumer.close()
