"""`Coordinator.request_checkpoint`: a checkpoint now, for a savepoint."""

from __future__ import annotations

from kstream.protocol.coordination import AckReceived, CoordinatorConfig, Tick, Trigger
from kstream.protocol.coordinator import Coordinator
from kstream.protocol.snapshot_id import COORDINATOR, SnapshotId

TASKS = frozenset({"s0-0", "s1-0"})
CONFIG = CoordinatorConfig(interval=60.0, timeout=5.0, max_in_flight=1, retained=1)


def c(sequence: int) -> int:
    return SnapshotId(sequence, COORDINATOR).encode()


def test_a_requested_checkpoint_is_triggered_at_the_next_tick_not_the_interval() -> None:
    coordinator = Coordinator(TASKS, CONFIG)
    coordinator.start(0.0)
    assert coordinator.handle(Tick(1.0)) == []
    assert coordinator.next_trigger_in(1.0) == 59.0
    coordinator.request_checkpoint()
    assert coordinator.next_trigger_in(1.0) == 0.0
    assert coordinator.handle(Tick(1.0)) == [Trigger(c(1), 1)]
    # Once: the next waits the interval again.
    assert coordinator.handle(Tick(2.0)) == []
    assert coordinator.next_trigger_in(2.0) == 4.0  # the pending one's timeout


def test_a_request_waits_for_room_within_max_in_flight() -> None:
    coordinator = Coordinator(TASKS, CONFIG)
    coordinator.start(0.0)
    coordinator.request_checkpoint()
    assert coordinator.handle(Tick(0.5)) == [Trigger(c(1), 1)]
    coordinator.request_checkpoint()
    assert coordinator.handle(Tick(0.6)) == []  # one in flight at most
    for task in sorted(TASKS):
        coordinator.handle(AckReceived(c(1), 1, task, 0.7))
    assert coordinator.handle(Tick(0.8)) == [Trigger(c(2), 1)]


def test_a_request_waits_for_every_worker_to_join_a_new_generation() -> None:
    coordinator = Coordinator(TASKS, CONFIG, workers=frozenset({"w0"}))
    coordinator.start(0.0)
    coordinator.request_checkpoint()
    assert coordinator.handle(Tick(0.5)) == []
    assert coordinator.next_trigger_in(0.5) is None
