"""The exactly-once Kafka sink against a real broker: commits, the commit window, markers."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import TypeVar

import pytest
from confluent_kafka import Producer, TopicPartition

from kstream.connectors.kafka import KafkaSink, TransactionalWriter, transactional
from kstream.dataflow.outputs import SinkContext
from kstream.errors import (
    KafkaUnavailableError,
    ProducerFencedError,
    RecordLostError,
    TransactionExpiredError,
)
from kstream.infra.admin import Admin
from kstream.protocol.names import commit_topic
from kstream.testing import read_all, unique_name, wait_settled

pytestmark = pytest.mark.broker

T = TypeVar("T")


def _writer(
    bootstrap: str, job: str, topic: str, transaction_timeout_ms: int = 600_000
) -> TransactionalWriter:
    ctx = SinkContext(
        bootstrap,
        job,
        "s1-0",
        1,
        Producer({"bootstrap.servers": bootstrap}),
        transaction_timeout_ms=transaction_timeout_ms,
    )
    writer = KafkaSink(topic).open(ctx)
    assert isinstance(writer, TransactionalWriter)
    return writer


@pytest.fixture
def job_and_topic(admin: Admin) -> tuple[str, str]:
    job, topic = unique_name("sinkjob"), unique_name("sinkout")
    admin.create_topics({topic: 1, commit_topic(job): 1})
    return job, topic


def test_an_epoch_is_visible_only_once_its_checkpoint_completes(
    bootstrap: str, job_and_topic: tuple[str, str]
) -> None:
    job, topic = job_and_topic
    writer = _writer(bootstrap, job, topic)
    writer.recover(None, None)
    writer.write(("a", 1))
    writer.pre_commit(1)
    writer.write(("b", 1))  # epoch 2, in another producer's transaction
    assert read_all(bootstrap, topic) == []
    writer.commit(1)
    writer.close()  # aborts epoch 2
    wait_settled(bootstrap, topic)  # the commit and abort markers are in the log
    assert [r.key for r in read_all(bootstrap, topic)] == [b"a"]


def test_a_crash_after_completion_before_commit_publishes_the_epoch_exactly_once(
    bootstrap: str, job_and_topic: tuple[str, str]
) -> None:
    job, topic = job_and_topic
    first = _writer(bootstrap, job, topic)
    first.recover(None, None)
    first.write(("a", 1))
    first.pre_commit(1)
    first.commit(1)
    first.write(("b", 1))
    kept = first.pre_commit(2)  # checkpoint 2 completes, then the process dies uncommitted
    # A successor restores checkpoint 2 twice (it crashes again after re-publishing):
    for _ in range(2):
        successor = _writer(bootstrap, job, topic)
        successor.recover(2, kept)
    wait_settled(bootstrap, topic)
    assert [r.key for r in read_all(bootstrap, topic)] == [b"a", b"b"]


def test_the_newest_committed_marker_is_found_behind_many_aborted_ones(
    bootstrap: str, job_and_topic: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    job, topic = job_and_topic
    writer = _writer(bootstrap, job, topic)
    writer.recover(None, None)
    for epoch in range(1, 6):
        writer.write(("w", epoch))
        writer.pre_commit(epoch)
        writer.commit(epoch)
    writer.close()
    # Thirty aborted transactions, each with a marker of a later epoch, follow.
    zombie = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique_name("zombie")})
    zombie.init_transactions(30)
    key = f"kstream.{job}.s1-0.{topic}".encode()
    for epoch in range(6, 36):
        zombie.begin_transaction()
        zombie.produce(commit_topic(job), json.dumps({"epoch": epoch}).encode(), key, partition=0)
        zombie.flush(30)  # in the log before the abort, not purged from the local queue
        zombie.abort_transaction(30)
    low, high = Admin(bootstrap).watermarks(commit_topic(job))[0]
    assert high - low >= 5 * 2 + 30 * 2  # data and transaction markers
    monkeypatch.setattr(transactional, "MARKER_WINDOW", 4)  # 4, 16, 64 offsets back
    assert _writer(bootstrap, job, topic)._last_committed() == 5


def test_a_fenced_writer_says_fenced_not_retry_later(
    bootstrap: str, job_and_topic: tuple[str, str]
) -> None:
    job, topic = job_and_topic
    zombie = _writer(bootstrap, job, topic)
    zombie.recover(None, None)
    zombie.write(("a", 1))
    zombie.pre_commit(1)
    # A successor (a newer generation of the same subtask) fences every slot.
    _writer(bootstrap, job, topic).recover(None, None)
    with pytest.raises(ProducerFencedError, match="transactional commit failed") as raised:
        zombie.commit(1)
    assert not isinstance(raised.value, KafkaUnavailableError)


def test_an_epoch_never_overtakes_the_one_before_it_in_a_partition(
    bootstrap: str, job_and_topic: tuple[str, str]
) -> None:
    """Epoch n+1 writes on another producer while epoch n's tail may still be queued:
    its records must still land after every record of epoch n (per-key order)."""
    job, topic = job_and_topic
    writer = _writer(bootstrap, job, topic)
    writer.recover(None, None)
    sizes = [50_000, 3, 50_000, 1, 20_000]
    finish = None
    for epoch, size in enumerate(sizes, start=1):
        for i in range(size):
            writer.write((f"k{i % 7}", epoch))
        if finish is not None:
            finish()  # the upload thread waits for epoch n-1's delivery after epoch n began
            writer.commit(epoch - 1)  # frees a slot: only 3 producers
        finish = writer.pre_commit(epoch).finish
    if finish is not None:
        finish()
    writer.commit(len(sizes))
    writer.close()
    wait_settled(bootstrap, topic)
    epochs = [json.loads(r.value) for r in read_all(bootstrap, topic)]
    assert len(epochs) == sum(sizes)
    assert epochs == sorted(epochs)


def test_an_expired_transaction_is_named_and_republished_by_the_rollback(
    bootstrap: str, job_and_topic: tuple[str, str]
) -> None:
    """The broker aborts a pre-committed epoch that outlives transaction.timeout.ms:
    the commit says so (not "fenced"), and the recovery that follows publishes it once."""
    job, topic = job_and_topic
    writer = _writer(bootstrap, job, topic, transaction_timeout_ms=1000)
    writer.recover(None, None)
    writer.write(("a", 1))
    writer.pre_commit(1)
    writer.commit(1)
    writer.write(("b", 1))
    kept = writer.pre_commit(2)  # checkpoint 2 completes, but its commit comes too late
    # The pre-commit's flush (the snapshot thread's part): epoch 2's record is on the
    # broker, in its open transaction, before the checkpoint can complete. Without it
    # the record could still wait in the producer, the broker would have no
    # transaction to expire, and the late commit would simply succeed.
    assert kept.finish is not None
    kept.finish()
    # No transaction is open once the broker has aborted the expired one (it checks
    # every few seconds): until then the topic does not settle.
    wait_settled(bootstrap, topic, timeout=60)
    assert [r.key for r in read_all(bootstrap, topic)] == [b"a"]
    with pytest.raises(
        TransactionExpiredError, match="aborted the transaction of epoch 2"
    ) as raised:
        writer.commit(2)
    assert isinstance(raised.value, RecordLostError)  # the worker stops, the job rolls back
    _writer(bootstrap, job, topic).recover(2, kept)  # the rollback to checkpoint 2
    wait_settled(bootstrap, topic)
    assert [r.key for r in read_all(bootstrap, topic)] == [b"a", b"b"]


def test_a_purge_during_the_marker_read_does_not_hide_the_newest_committed_marker(
    bootstrap: str, job_and_topic: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runner purges the marker partition between the recovering sink's reading of
    its log start and its fetch: the read must go on from the new log start (the purge
    point is a committed marker, never after the newest), not skip to the end and find
    no committed marker, which would publish the committed epoch 5 a second time."""
    job, topic = job_and_topic
    first = _writer(bootstrap, job, topic)
    first.recover(None, None)
    for epoch in range(1, 6):
        first.write(("w", epoch))
        kept = first.pre_commit(epoch)
        assert kept.finish is not None
        kept.finish()
        if epoch < 5:
            first.commit(epoch)
    # Checkpoint 5 names the newest marker committed before it (epoch 4's), completes,
    # and the process dies right after committing epoch 5.
    partition, purge_at = kept.meta["marker"]
    first.commit(5)
    marker_read = transactional.request

    def purge_after_reading_the_log_start(call: Callable[[], T], what: str) -> T:
        answer = marker_read(call, what)
        if what.startswith("cannot read the end of"):
            Admin(bootstrap).delete_records_before(
                [TopicPartition(commit_topic(job), partition, purge_at)]
            )
        return answer

    monkeypatch.setattr(transactional, "request", purge_after_reading_the_log_start)
    _writer(bootstrap, job, topic).recover(5, kept)
    assert Admin(bootstrap).watermarks(commit_topic(job))[partition][0] == purge_at
    wait_settled(bootstrap, topic)
    assert [json.loads(r.value) for r in read_all(bootstrap, topic)] == [1, 2, 3, 4, 5]


def test_outputs_written_into_a_full_queue_wait_for_room_and_all_commit_in_order(
    bootstrap: str, job_and_topic: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Producers with room for two lingering records: most writes find the queue
    # full, so the one-call produce of `write` falls back to waiting for room.
    monkeypatch.setattr(
        transactional,
        "BATCHING",
        {**transactional.BATCHING, "queue.buffering.max.messages": 2, "linger.ms": 50},
    )
    job, topic = job_and_topic
    writer = _writer(bootstrap, job, topic)
    writer.recover(None, None)
    sent = [(f"w{i % 3}", i) for i in range(40)]
    for pair in sent:
        writer.write(pair)
    writer.pre_commit(1)
    writer.commit(1)
    writer.close()
    wait_settled(bootstrap, topic)
    got = [(r.key, r.value) for r in read_all(bootstrap, topic)]
    assert got == [(k.encode(), str(v).encode()) for k, v in sent]


def _never_waits() -> None:
    raise AssertionError("the sink waits for a checkpoint to complete")


def test_checkpoints_that_keep_failing_go_on_in_the_newest_failed_transaction(
    bootstrap: str, job_and_topic: tuple[str, str]
) -> None:
    """More failed checkpoints than producers: the sink goes on writing (it used to wait
    for a completion no failing checkpoint storage could give), and the next completed
    checkpoint commits every epoch once, in order; a crash in its commit window
    re-publishes each of them once."""
    job, topic = job_and_topic
    ctx = SinkContext(bootstrap, job, "s1-0", 1, Producer({"bootstrap.servers": bootstrap}))
    writer = KafkaSink(topic).open(dataclasses.replace(ctx, pump=_never_waits))
    assert isinstance(writer, TransactionalWriter)
    writer.recover(None, None)
    for epoch in range(1, 8):  # 7 epochs, 3 producers
        for i in range(100):
            writer.write((f"k{i % 7}", epoch))
        kept = writer.pre_commit(epoch)
        assert kept.finish is not None
        kept.finish()  # the upload thread, before its (failing) store
        writer.abort(epoch)  # declined: the checkpoint storage fails
    writer.write(("k0", 8))
    kept = writer.pre_commit(8)  # the storage works again: checkpoint 8 completes
    assert kept.finish is not None
    kept.finish()
    assert sorted(kept.payload) == list(range(1, 9))  # the write-ahead copy holds them all
    assert read_all(bootstrap, topic) == []
    # A crash after checkpoint 8 completed, before this process committed.
    writer.close()
    successor = _writer(bootstrap, job, topic)
    successor.recover(8, kept)
    successor.close()
    wait_settled(bootstrap, topic)
    epochs = [json.loads(r.value or b"") for r in read_all(bootstrap, topic)]
    assert epochs == [e for e in range(1, 8) for _ in range(100)] + [8]


def test_a_failed_epochs_resumed_transaction_commits_with_the_next_completion(
    bootstrap: str, job_and_topic: tuple[str, str]
) -> None:
    job, topic = job_and_topic
    ctx = SinkContext(bootstrap, job, "s1-0", 1, Producer({"bootstrap.servers": bootstrap}))
    writer = KafkaSink(topic).open(dataclasses.replace(ctx, pump=_never_waits))
    assert isinstance(writer, TransactionalWriter)
    writer.recover(None, None)
    for epoch in range(1, 6):
        writer.write(("k", epoch))
        writer.pre_commit(epoch)
        writer.abort(epoch)
    writer.write(("k", 6))
    kept = writer.pre_commit(6)
    assert sorted(kept.payload) == list(range(1, 7))
    writer.commit(6)
    writer.close()
    wait_settled(bootstrap, topic)
    assert [json.loads(r.value or b"") for r in read_all(bootstrap, topic)] == list(range(1, 7))
    # Its markers committed with it: restoring checkpoint 6 re-publishes nothing.
    successor = _writer(bootstrap, job, topic)
    successor.recover(6, kept)
    successor.close()
    assert len(read_all(bootstrap, topic)) == 6
