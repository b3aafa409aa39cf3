"""The coordinator and checkpoints a source started itself (`InitiatedReceived`)."""

from __future__ import annotations

from kstream.protocol.coordination import (
    Abort,
    AckReceived,
    Complete,
    CoordinatorConfig,
    DeclineReceived,
    History,
    InitiatedReceived,
    Recover,
    Tick,
    Trigger,
)
from kstream.protocol.coordinator import Coordinator, replay
from kstream.protocol.messages import Completed, Initiated, Recovered, Triggered
from kstream.protocol.snapshot_id import COORDINATOR, SnapshotId, next_after

TASKS = frozenset({"src-0", "src-1", "sum-0"})
CONFIG = CoordinatorConfig(interval=100.0, timeout=5.0, max_in_flight=1, retained=2)


def c(sequence: int, initiator: int = COORDINATOR) -> int:
    return SnapshotId(sequence, initiator).encode()


def started(config: CoordinatorConfig = CONFIG, history: History | None = None) -> Coordinator:
    coordinator = Coordinator(TASKS, config, history or History())
    coordinator.start(0.0)
    return coordinator


def all_ack(coordinator: Coordinator, n: int, now: float) -> list[object]:
    out: list[object] = []
    for task in sorted(TASKS):
        out += coordinator.handle(AckReceived(n, coordinator.generation, task, now))
    return out


def test_a_source_initiated_checkpoint_is_registered_and_its_trigger_relayed() -> None:
    coordinator = started()
    n = c(1, 1)
    assert coordinator.handle(InitiatedReceived(n, 1, "src-0", 0.5)) == [Trigger(n, 1)]
    assert list(coordinator.pending) == [n]
    [complete] = all_ack(coordinator, n, 1.5)
    assert isinstance(complete, Complete)
    assert (complete.checkpoint, complete.duration_s) == (n, 1.0)
    assert coordinator.latest_completed == n
    # The coordinator's next id comes after it (its clock saw it).
    assert coordinator.handle(Tick(200.0)) == [Trigger(c(2), 1)]


def test_stale_unknown_and_known_announcements_are_ignored() -> None:
    coordinator = started()
    assert coordinator.handle(InitiatedReceived(c(1, 1), 0, "src-0", 0.5)) == []  # old generation
    assert coordinator.handle(InitiatedReceived(c(1, 1), 1, "intruder-0", 0.5)) == []
    assert coordinator.pending == {}
    assert coordinator.handle(InitiatedReceived(c(2, 1), 1, "src-0", 0.6)) == [Trigger(c(2, 1), 1)]
    assert coordinator.handle(InitiatedReceived(c(2, 1), 1, "src-0", 0.7)) == []  # read twice
    all_ack(coordinator, c(2, 1), 1.0)
    assert coordinator.handle(InitiatedReceived(c(2, 1), 1, "src-0", 1.1)) == []  # completed
    # Even ignored ids move the clock: the next id is above every one of them.
    assert coordinator.handle(Tick(200.0)) == [Trigger(c(3), 1)]


def test_beyond_max_in_flight_a_source_initiated_checkpoint_is_aborted_at_once() -> None:
    coordinator = started(CoordinatorConfig(interval=1.0, timeout=60.0, max_in_flight=1))
    assert coordinator.handle(Tick(1.0)) == [Trigger(c(1), 1)]
    # A smaller id than the one in flight (same sequence, a lower rank).
    assert c(1, 1) < c(1)
    [abort] = coordinator.handle(InitiatedReceived(c(1, 1), 1, "src-0", 1.2))
    assert isinstance(abort, Abort)
    assert abort.checkpoint == c(1, 1)
    assert "src-0" in abort.reason
    assert "at most 1" in abort.reason
    assert list(coordinator.pending) == [c(1)]
    # The coordinator's checkpoint goes on unharmed and completes.
    assert isinstance(all_ack(coordinator, c(1), 1.5)[0], Complete)


def test_a_source_that_started_a_larger_id_overtakes_the_smaller_ones_in_flight() -> None:
    # The source started c(2, 2) before the trigger of c(1) reached it, so it will
    # decline c(1) (snapshots are taken in id order): c(1) is aborted at once and
    # the source's goes on, instead of both failing.
    coordinator = started(CoordinatorConfig(interval=1.0, timeout=60.0, max_in_flight=1))
    assert coordinator.handle(Tick(1.0)) == [Trigger(c(1), 1)]
    assert coordinator.handle(InitiatedReceived(c(2, 2), 1, "src-1", 1.2)) == [
        Abort(c(1), 1, f"overtaken by {c(2, 2)}, started by src-1"),
        Trigger(c(2, 2), 1),
    ]
    assert list(coordinator.pending) == [c(2, 2)]
    # The source's declining c(1) later changes nothing.
    assert coordinator.handle(DeclineReceived(c(1), 1, "src-1", "overtaken", 1.3)) == []
    assert isinstance(all_ack(coordinator, c(2, 2), 1.5)[0], Complete)


def test_one_older_than_the_restore_point_is_aborted() -> None:
    coordinator = started()
    coordinator.handle(InitiatedReceived(c(3, 1), 1, "src-0", 0.1))
    all_ack(coordinator, c(3, 1), 0.2)
    [abort] = coordinator.handle(InitiatedReceived(c(2, 2), 1, "src-1", 0.3))
    assert abort == Abort(c(2, 2), 1, f"older than completed checkpoint {c(3, 1)}")


def test_declines_and_timeouts_end_source_initiated_checkpoints_like_the_others() -> None:
    coordinator = started(CoordinatorConfig(interval=100.0, timeout=5.0, max_in_flight=2))
    # The larger first: a smaller one started later overtakes nothing.
    assert c(1, 1) < c(1, 2)
    coordinator.handle(InitiatedReceived(c(1, 2), 1, "src-1", 0.0))
    coordinator.handle(InitiatedReceived(c(1, 1), 1, "src-0", 0.0))
    [declined] = coordinator.handle(DeclineReceived(c(1, 1), 1, "src-1", "overtaken", 0.1))
    assert isinstance(declined, Abort)
    assert declined.checkpoint == c(1, 1)
    [timed_out] = coordinator.handle(Tick(5.5))
    assert isinstance(timed_out, Abort)
    assert timed_out.checkpoint == c(1, 2)
    assert coordinator.pending == {}


def test_recovery_picks_the_completed_checkpoint_with_the_largest_id() -> None:
    coordinator = started(CoordinatorConfig(interval=1.0, timeout=60.0, max_in_flight=3))
    assert coordinator.handle(Tick(1.0)) == [Trigger(c(1), 1)]
    all_ack(coordinator, c(1), 1.05)
    # Both sources start one on sequence 2; which ranks higher depends on the sequence.
    (low, low_task), (high, high_task) = sorted([(c(2, 1), "src-0"), (c(2, 2), "src-1")])
    coordinator.handle(InitiatedReceived(high, 1, high_task, 1.1))
    coordinator.handle(InitiatedReceived(low, 1, low_task, 1.2))
    all_ack(coordinator, low, 1.4)  # subsumes nothing newer: the higher stays pending
    assert list(coordinator.pending) == [high]
    all_ack(coordinator, high, 1.5)
    assert coordinator.completed == [c(1), low, high]
    [recover] = Coordinator(TASKS, CONFIG, coordinator_history(coordinator)).start(3.0)
    assert isinstance(recover, Recover)
    assert recover.checkpoint == high


def coordinator_history(coordinator: Coordinator) -> History:
    return History(coordinator.generation, coordinator.clock.seen, tuple(coordinator.completed))


def test_a_restarted_coordinator_replays_initiations_and_never_reuses_their_ids() -> None:
    messages = [
        Recovered(1, None),
        Triggered(c(1), 1),
        Completed(c(1), 1),
        Initiated(c(2, 2), 1, "src-1"),
        Triggered(c(2, 2), 1),
        Completed(c(2, 2), 1),
        Initiated(c(5, 1), 1, "src-0"),  # pending when the runner died
    ]
    history = replay(messages, retained=2)
    assert history.max_checkpoint == c(5, 1)
    assert history.completed == (c(1), c(2, 2))
    coordinator = Coordinator(TASKS, CONFIG, history)
    assert coordinator.start(0.0) == [Recover(2, c(2, 2), "job started")]
    assert coordinator.handle(Tick(100.0)) == [Trigger(next_after(c(5, 1), COORDINATOR), 2)]


def test_a_source_initiated_checkpoint_restarts_the_coordinators_interval() -> None:
    coordinator = started(CoordinatorConfig(interval=1.0, timeout=60.0, max_in_flight=2))
    coordinator.handle(InitiatedReceived(c(1, 1), 1, "src-0", 0.8))
    assert coordinator.handle(Tick(1.0)) == []  # due by its own trigger, not since c(1, 1)
    assert coordinator.handle(Tick(1.8)) == [Trigger(c(2), 1)]


def test_concurrent_snapshots_complete_in_any_order_and_none_overtakes_another() -> None:
    # Seed 004: p (src-0) and q (src-1) started snapshots of one sequence
    # independently; each source takes the other's after its own.
    config = CoordinatorConfig(interval=100.0, timeout=60.0, max_in_flight=2, concurrent=True)
    coordinator = started(config)
    a, b = sorted([c(1, 1), c(1, 2)])
    assert coordinator.handle(InitiatedReceived(b, 1, "src-1", 0.5)) == [Trigger(b, 1)]
    # The smaller id, registered after the larger, is not "overtaken".
    assert coordinator.handle(InitiatedReceived(a, 1, "src-0", 0.6)) == [Trigger(a, 1)]
    [complete_b] = all_ack(coordinator, b, 1.0)
    assert complete_b == Complete(b, 1, 0.5, 0, 0.0)  # nothing subsumed
    assert list(coordinator.pending) == [a]
    [complete_a] = all_ack(coordinator, a, 1.2)
    assert isinstance(complete_a, Complete)
    assert complete_a.checkpoint == a
    # The restore point is still the largest id.
    assert coordinator.completed == [a, b]
    assert coordinator.latest_completed == b
    # One registered after a newer one completed may complete too.
    late = c(1, 3)
    coordinator.handle(InitiatedReceived(late, 1, "sum-0", 1.3))
    assert late in coordinator.pending
