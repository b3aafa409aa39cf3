"""Testing a job against a real cluster: unique topics, producing, reading back.

Used by kstream's own test suite and meant for users who verify their jobs
against a real cluster. Nothing here fakes Kafka.
"""

from __future__ import annotations

import os
import random
import signal
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from kstream.dataflow.outputs import Sink, SinkContext, SinkSnapshot, SinkWriter
from kstream.errors import CheckpointError, KafkaUnavailableError, RecordLostError
from kstream.infra.admin import Admin
from kstream.runtime.kafka import (
    IDEMPOTENT,
    MANUAL_OFFSETS,
    PARTITION_UA,
    client_config,
    flush,
    kafka_error,
    request,
    transact,
)
from kstream.runtime.kafka import produce as produce_one

if TYPE_CHECKING:
    from kstream.runtime.runner.runner import Runner, RunningJob

__all__ = [
    "BACKLOG_READER",
    "Feeder",
    "ReadRecord",
    "RecordingSink",
    "in_flight_at",
    "produce",
    "read_all",
    "run_until_consumed",
    "unique_name",
    "wait_settled",
]

#: Upper bound for reading a topic to its end: generous for CI's slow disks.
READ_TIMEOUT_S = 60.0
#: Consumer settings of a reader of whole outputs (`read_all`, the benchmarks'
#: readers). librdkafka postpones a partition's next fetch by
#: ``fetch.queue.backoff.ms`` (1 s by default) once 100,000 of its records are
#: queued; output that turns visible in large steps (a transaction per
#: checkpoint) or a backlog fills that in one fetch, and the reader then waited
#: a second per step: 3 M committed records took 13.4 s to read, 7.6 s with this.
BACKLOG_READER: Mapping[str, Any] = {"fetch.queue.backoff.ms": 10}
#: How long a `Feeder` may wait for the broker's acknowledgements of its last records.
FEED_TIMEOUT_S = 120.0


@dataclass
class RecordingSink(Sink):
    """A sink that keeps what it is written in `writes`, in memory, without guarantees:
    for tests that run subtasks in their own process and look at their output."""

    name: str = "recording"
    writes: list[Any] = field(default_factory=list)

    def open(self, ctx: SinkContext) -> SinkWriter:
        return _RecordingWriter(self.writes)

    @property
    def commit_markers(self) -> bool:
        return False  # it keeps no epochs


class _RecordingWriter(SinkWriter):
    def __init__(self, writes: list[Any]) -> None:
        self._writes = writes

    def write(self, value: Any) -> None:
        self._writes.append(value)

    def pre_commit(self, epoch: int) -> SinkSnapshot:
        return SinkSnapshot()


@dataclass(frozen=True, slots=True)
class ReadRecord:
    """One record as read back from Kafka."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()
    #: The record's Kafka timestamp (ms).
    timestamp: int = 0


def _headers(raw: object) -> tuple[tuple[str, bytes], ...]:
    if not isinstance(raw, list):
        return ()
    return tuple((str(k), v if isinstance(v, bytes) else str(v or "").encode()) for k, v in raw)


def unique_name(prefix: str) -> str:
    """A topic or group name no other test run uses."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple[bytes | None, bytes | None]],
    *,
    partition: int | None = None,
    transactional_id: str | None = None,
    abort: bool = False,
) -> int:
    """Write (key, value) records and wait until every one is acknowledged.

    With `transactional_id`, all records go in one transaction, committed or,
    with `abort=True`, aborted. Returns the number of records written.
    """
    failures: list[str] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            failures.append(str(err))

    txn = {} if transactional_id is None else {"transactional.id": transactional_id}
    producer = Producer(
        client_config(bootstrap, IDEMPOTENT, {"linger.ms": 5, "on_delivery": on_delivery}, txn)
    )
    if transactional_id is not None:
        transact(producer.init_transactions, "init_transactions", READ_TIMEOUT_S)
        producer.begin_transaction()
    count = 0
    at = PARTITION_UA if partition is None else partition
    for key, value in records:
        produce_one(producer, topic, value, key, at)
        count += 1
    # Flush first, also before an abort: aborted records must really be in the
    # log (and hidden by read_committed), not purged from the local queue.
    flush(producer, READ_TIMEOUT_S, f"writing {topic}")
    if failures:
        raise RecordLostError(f"{len(failures)} records not delivered to {topic}: {failures[:1]}")
    if transactional_id is not None:
        if abort:
            transact(producer.abort_transaction, "abort", READ_TIMEOUT_S)
        else:
            transact(producer.commit_transaction, "commit", READ_TIMEOUT_S)
    return count


def wait_settled(bootstrap: str, topic: str, timeout: float = READ_TIMEOUT_S) -> None:
    """Wait until no transaction is open on any partition of `topic`.

    `commit_transaction` returns once the commit is decided; the brokers write
    the commit markers into the partitions just after, and until then a
    read_committed reader does not see the records. Once the writers have
    stopped, "settled" means every partition's last stable offset has reached
    its high watermark; call this before reading a finished job's output.
    """
    watermarks: dict[str, Consumer] = {}
    for isolation in ("read_committed", "read_uncommitted"):
        watermarks[isolation] = Consumer(
            client_config(
                bootstrap, {"group.id": unique_name("kstream-settle"), "isolation.level": isolation}
            )
        )
    try:
        n = Admin(bootstrap).partitions(topic) or 0
        deadline = time.monotonic() + timeout
        while True:
            ends = {
                isolation: [
                    request(
                        lambda c=c, p=p: c.get_watermark_offsets(  # type: ignore[misc]
                            TopicPartition(topic, p), timeout=timeout
                        ),
                        f"cannot read the end of {topic}[{p}]",
                        timeout,
                    )[1]
                    for p in range(n)
                ]
                for isolation, c in watermarks.items()
            }
            if ends["read_committed"] == ends["read_uncommitted"]:
                return
            if time.monotonic() > deadline:
                raise KafkaUnavailableError(
                    f"{topic} still has open transactions after {timeout:.0f}s"
                )
            time.sleep(0.05)  # polling the brokers' offsets: there is no event to wait on
    finally:
        for c in watermarks.values():
            c.close()


def read_all(
    bootstrap: str,
    topic: str,
    *,
    isolation: str = "read_committed",
    partitions: Sequence[int] | None = None,
    timeout: float = READ_TIMEOUT_S,
) -> list[ReadRecord]:
    """Read `topic` from the beginning to its current end; records in partition order.

    The end is the high watermark (read_uncommitted) or the last stable offset
    (read_committed) at the time of the call: reading stops when every partition's
    position reaches it, so the result is a snapshot, never a guess based on idleness.
    """
    admin = Admin(bootstrap)
    n = admin.partitions(topic)
    if n is None:
        raise KafkaUnavailableError(f"topic {topic} does not exist")
    wanted = list(partitions) if partitions is not None else list(range(n))
    consumer = Consumer(
        client_config(
            bootstrap,
            MANUAL_OFFSETS,
            {
                "group.id": unique_name("kstream-read"),
                "isolation.level": isolation,
                **BACKLOG_READER,
            },
        )
    )
    try:
        ends = {}
        for p in wanted:
            _, high = request(
                lambda p=p: consumer.get_watermark_offsets(  # type: ignore[misc]
                    TopicPartition(topic, p), timeout=timeout, cached=False
                ),
                f"cannot read the end of {topic}[{p}]",
                timeout,
            )
            ends[p] = high
        # From the log start, not offset 0: purged or deleted records move it on.
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in wanted])
        out: list[ReadRecord] = []
        deadline = time.monotonic() + timeout
        pending = {p for p in wanted if ends[p] > 0}
        while pending:
            if time.monotonic() > deadline:
                raise KafkaUnavailableError(
                    f"reading {topic} did not reach the end within {timeout:.0f}s "
                    f"(partitions {sorted(pending)} behind)"
                )
            for msg in consumer.consume(1000, 0.5):
                err = msg.error()
                if err is not None:
                    raise kafka_error(err, f"cannot read {topic}")
                out.append(
                    ReadRecord(
                        topic,
                        msg.partition() or 0,
                        msg.offset() or 0,
                        msg.key(),
                        msg.value(),
                        _headers(msg.headers()),
                        msg.timestamp()[1],
                    )
                )
            # Position, not last offset: transaction markers and aborted records
            # occupy offsets that a read_committed consumer never returns.
            for tp in consumer.position([TopicPartition(topic, p) for p in list(pending)]):
                if tp.offset >= ends[tp.partition]:
                    pending.discard(tp.partition)
        out.sort(key=lambda r: (r.partition, r.offset))
        return out
    finally:
        consumer.close()


def in_flight_at(runner: Runner, checkpoint: int | None) -> bool:
    """Whether completed `checkpoint` recorded channel state (unaligned checkpoints).

    The output of records in flight at an unaligned snapshot belongs to the
    next epoch: it becomes visible when a later checkpoint completes, so a
    checkpoint that covers the input does not yet cover its output.
    """
    if checkpoint is None:
        return False
    for spec in runner.plan.tasks:
        try:
            if runner.storage.load(checkpoint, spec.id).channel_replay:
                return True
        except CheckpointError:
            return True  # not readable (yet): judge by a later checkpoint
    return False


def run_until_consumed(
    runner: Runner,
    input_topic: str,
    ends: dict[int, int],
    *,
    kills: int = 0,
    kill_after: int = 0,
    seed: int = 0,
    say: Callable[[str], None] = print,
    chaos: Callable[[RunningJob], None] | None = None,
    on_progress: Callable[[int], None] | None = None,
    timeout: float = 600.0,
    also: Mapping[str, Mapping[int, int]] | None = None,
) -> int:
    """Start `runner`'s job and supervise it until a completed checkpoint covers
    `input_topic` up to `ends` (partition -> end offset), and every topic of
    `also` (a job with several sources) up to its ends, and recorded no channel
    state (`in_flight_at`); then stop it.

    Meanwhile SIGKILL a random worker `kills` times: the first once more than
    `kill_after` checkpoints have completed, each next one once a checkpoint
    completed after the previous kill (so every kill hits a job that made progress, not one
    still restoring). Kills still due once the input is covered come all the same, each
    after a checkpoint completed, and the job must then cover the input again: how
    fast a job drains its backlog must not decide how many faults a test injects.
    `chaos(running)` runs on every supervision round with the `RunningJob` that
    `runner.start()` returned (tests kill and restart the broker from it);
    `on_progress` gets the number of input records a completed checkpoint covers.
    Returns the number of kills done; raises `TimeoutError` after `timeout` seconds.
    """
    rnd = random.Random(seed)
    done_kills = 0
    # Counted, not compared with ids: ids are Lamport clocks, not 1, 2, 3, ...
    kill_after_completed = kill_after
    started = time.monotonic()
    running = runner.start()
    try:
        while True:
            running.step()
            if chaos is not None:
                chaos(running)
            offsets = runner.stats.source_offsets.get(input_topic, {})
            if on_progress is not None:
                on_progress(sum(max(0, offsets.get(p, 0)) for p in ends))
            covered = all(
                runner.stats.source_offsets.get(topic, {}).get(p, 0) >= high
                for topic, topic_ends in {**(also or {}), input_topic: ends}.items()
                for p, high in topic_ends.items()
                if high > 0
            ) and not in_flight_at(runner, runner.stats.latest)
            # After a kill, only once a checkpoint of the recovered job completed.
            recovered = not done_kills or runner.stats.completed > kill_after_completed
            if covered and done_kills >= kills and recovered:
                return done_kills
            if time.monotonic() - started > timeout:
                raise TimeoutError(f"the job did not finish within {timeout:.0f}s")
            latest = runner.stats.latest or 0
            if done_kills < kills and runner.stats.completed > kill_after_completed:
                pids = running.worker_pids()
                if pids:
                    index = rnd.choice(sorted(pids))
                    os.kill(pids[index], signal.SIGKILL)
                    done_kills += 1
                    kill_after_completed = runner.stats.completed
                    say(f"SIGKILLed worker {index} (pid {pids[index]}) after checkpoint {latest}")
    finally:
        running.stop()


class Feeder:
    """Writes `values` to `topic` while a job runs, value i to partition i % `partitions`:
    all at once (`rate` None) or `rate` values per second from the first `feed`.

    Fault-injection tests feed input at a rate so that their faults hit a job
    with work in flight rather than one that already drained its input.
    """

    def __init__(
        self, bootstrap: str, topic: str, values: list[bytes], partitions: int, rate: float | None
    ) -> None:
        self._producer = Producer(client_config(bootstrap, IDEMPOTENT))
        self._topic = topic
        self._values = values
        self._partitions = partitions
        self._rate = rate
        self._sent = 0
        self._started: float | None = None
        self._held_since: float | None = None
        #: Offset after the last value of each partition (no transactions: offsets = counts).
        self.ends = {p: len(range(p, len(values), partitions)) for p in range(partitions)}

    def hold(self) -> None:
        """Write nothing until the next `feed`, and stop the rate's clock meanwhile
        (a demo holds its input while its job recovers, so a slow restart does not
        turn the rest of the input into a backlog read in one go)."""
        if self._started is not None and self._held_since is None:
            self._held_since = time.monotonic()

    @property
    def sent(self) -> int:
        """How many values were handed to the producer so far."""
        return self._sent

    def feed(self) -> None:
        """Write the values that are due by now; after the last, wait for their acks."""
        if self._sent == len(self._values):
            return
        now = time.monotonic()
        if self._started is None:
            self._started = now
        if self._held_since is not None:
            # The clock stood still while held: no burst of values on resuming.
            self._started += now - self._held_since
            self._held_since = None
        due = len(self._values)
        if self._rate is not None:
            due = min(due, int((now - self._started) * self._rate) + 1)
        for i in range(self._sent, due):
            produce_one(self._producer, self._topic, self._values[i], None, i % self._partitions)
        self._sent = due
        self._producer.poll(0)
        if self._sent == len(self._values):
            flush(self._producer, FEED_TIMEOUT_S, f"input to {self._topic}")
