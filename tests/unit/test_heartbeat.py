"""The worker's heartbeat: the thread repeats only the latest published one, when due."""

from __future__ import annotations

import time

from kstream.protocol.counters import WorkerCounters
from kstream.protocol.messages import WorkerAlive
from kstream.runtime.worker.heartbeat import Heartbeat


class Sent:
    def __init__(self) -> None:
        self.messages: list[WorkerAlive] = []
        self.generation = 1
        self.restoring = False
        self.checks = 0

    def send(self, message: WorkerAlive, flush: bool) -> None:
        self.messages.append(message)

    def alive(self) -> None:
        self.checks += 1

    def heartbeat(self, period: float) -> Heartbeat:
        return Heartbeat(
            period, self.send, lambda: self.generation, self.alive, lambda: self.restoring
        )


def alive(generation: int, processed: int) -> WorkerAlive:
    return WorkerAlive("w0", generation, process="p", counters=WorkerCounters(records_in=processed))


def test_nothing_is_repeated_before_a_heartbeat_exists_or_while_one_is_fresh() -> None:
    sent = Sent()
    hb = sent.heartbeat(period=3600.0)
    assert not hb.repeat()
    hb.publish(alive(1, 5))
    assert not hb.repeat()  # the one just published is not an hour old
    assert [m.counters for m in sent.messages] == [WorkerCounters(records_in=5)]
    assert sent.checks == 0


def test_the_latest_published_heartbeat_is_repeated_with_the_current_generation() -> None:
    sent = Sent()
    hb = sent.heartbeat(period=0.0)  # always due
    hb.publish(alive(1, 5))
    hb.publish(alive(1, 9))
    sent.generation = 2  # the worker joined a newer generation and is restoring
    assert hb.repeat()
    repeated = sent.messages[-1]
    assert repeated.generation == 2
    assert repeated.counters == WorkerCounters(records_in=9)  # never an older count
    assert repeated.time is not None
    assert sent.checks == 1


def test_start_primes_a_first_heartbeat_that_a_later_publish_replaces() -> None:
    sent = Sent()
    hb = sent.heartbeat(period=0.0)
    hb.start(alive(0, 0))
    hb.stop()  # the thread may or may not have repeated it by now
    assert all(m.counters == WorkerCounters() for m in sent.messages)
    hb.publish(alive(1, 3))
    assert hb.repeat()
    assert sent.messages[-1].counters == WorkerCounters(records_in=3)


def test_a_failing_send_does_not_end_the_thread() -> None:
    calls: list[int] = []

    def send(message: WorkerAlive, flush: bool) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("broker away")

    hb = Heartbeat(0.01, send, lambda: 1, lambda: None)
    hb.start(alive(1, 0))

    deadline = time.monotonic() + 10
    while len(calls) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)  # waiting on the thread under test; it has no event to signal
    hb.stop()
    assert len(calls) >= 3


def test_a_repeated_heartbeat_says_whether_the_worker_is_still_restoring() -> None:
    """The coordinator triggers a generation's first checkpoint once no worker restores."""
    sent = Sent()
    hb = sent.heartbeat(period=0.0)
    hb.publish(alive(1, 5))
    sent.generation, sent.restoring = 2, True  # restoring the new generation's subtasks
    assert hb.repeat()
    assert (sent.messages[-1].generation, sent.messages[-1].restoring) == (2, True)
    sent.restoring = False
    assert hb.repeat()
    assert (sent.messages[-1].generation, sent.messages[-1].restoring) == (2, False)
