"""Where the Lamport clock of snapshot ids lives outside the coordinator.

A worker's clock (`WorkerRecovery.clock`) sees every id the control topic
names, whatever the worker does with the message; checkpoint fates
(`CheckpointTracker`) tell who started a snapshot; `KafkaSource` checks its
``snapshot_every_ms``.
"""

from __future__ import annotations

import pytest

from kstream import ConfigurationError, KafkaSource
from kstream.protocol.checkpoint_history import CheckpointTracker, checkpoint_history
from kstream.protocol.messages import (
    Aborted,
    Acked,
    Completed,
    Initiated,
    Recovered,
    Triggered,
    WorkerAlive,
)
from kstream.protocol.recovery import Restore, Trigger, Where, WorkerRecovery
from kstream.protocol.snapshot_id import SnapshotId


def c(sequence: int, initiator: int = 0) -> int:
    return SnapshotId(sequence, initiator).encode()


def test_a_workers_clock_sees_every_id_read_before_and_after_it_joined() -> None:
    worker = WorkerRecovery()
    # The backlog, read before joining: an old generation's ids count too.
    worker.read(Recovered(1, None))
    worker.read(Initiated(c(4, 2), 1, "s0-1"))
    worker.read(Aborted(c(4, 2), 1))
    worker.read(Recovered(2, c(3)))
    assert worker.clock.seen == c(4, 2)
    assert worker.caught_up() == [Restore(2, c(3))]
    # An ack of another worker, a message read in a sink's wait, a heartbeat.
    worker.read(Acked(c(6, 1), 2, "s0-0"))
    assert worker.read(Triggered(c(7), 2), Where.SINK_WAIT) == []  # deferred, yet seen
    assert worker.clock.seen == c(7)
    assert worker.read(WorkerAlive("w1", 2)) == [Trigger(c(7))]


def test_checkpoint_fates_name_the_source_that_started_one() -> None:
    tracker = CheckpointTracker()
    tracker.observe(Recovered(1, None))
    tracker.observe(Initiated(c(1, 1), 1, "s0-0", time=5.0))
    tracker.observe(Triggered(c(1, 1), 1, time=6.0))  # the relay
    [done] = tracker.observe(Completed(c(1, 1), 1))
    assert (done.status, done.started_by, done.triggered_at) == ("completed", "s0-0", 5.0)
    # An announcement of a generation already left is no checkpoint of the current one.
    tracker.observe(Recovered(2, c(1, 1)))
    assert tracker.observe(Initiated(c(2, 2), 1, "s0-1")) == []
    assert tracker.open() == []


def test_the_listing_shows_source_started_checkpoints_and_their_aborts() -> None:
    records = checkpoint_history(
        [
            Recovered(1, None),
            Triggered(c(1), 1),
            Initiated(c(1, 2), 1, "s0-1"),
            Aborted(c(1, 2), 1, "started by s0-1 while 1 checkpoints were in flight"),
            Completed(c(1), 1),
        ]
    )
    assert [(r.checkpoint, r.status, r.started_by) for r in records] == [
        (c(1), "completed", ""),
        (c(1, 2), "aborted", "s0-1"),
    ]


@pytest.mark.parametrize("bad", [0, -1, 2.5, float("nan"), float("inf"), True, "1"])
def test_a_source_refuses_a_snapshot_interval_that_is_not_a_positive_number(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="snapshot_every_ms must be a whole number"):
        KafkaSource("in", snapshot_every_ms=bad)  # type: ignore[arg-type]
    assert KafkaSource("in", snapshot_every_ms=500).snapshot_every_ms == 500
