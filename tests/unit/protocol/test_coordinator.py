"""The checkpoint coordinator (`kstream.protocol.coordinator`): commands, invariants, replay."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from kstream.errors import ConfigurationError
from kstream.protocol.coordination import (
    Abort,
    AckReceived,
    CheckpointDamaged,
    Command,
    Complete,
    CoordinatorConfig,
    DeclineReceived,
    Discard,
    Event,
    Fail,
    Halt,
    Heartbeat,
    History,
    Paused,
    Recover,
    Tick,
    Trigger,
    WorkerLost,
)
from kstream.protocol.coordinator import Coordinator
from kstream.protocol.coordinator import replay as replay_messages
from kstream.protocol.messages import decode_all
from kstream.protocol.snapshot_id import COORDINATOR, SnapshotId, next_after


def replay(wire: Iterable[object], retained: int) -> History:
    """`replay` of control records in their wire form (JSON objects)."""
    return replay_messages(decode_all(wire), retained)


def c(sequence: int) -> int:
    """The id of the coordinator's checkpoint of Lamport time `sequence`."""
    return SnapshotId(sequence, COORDINATOR).encode()


TASKS = frozenset({"map-0", "map-1", "sum-0"})
#: Which worker runs each subtask.
PLACEMENT = {"map-0": "w0", "map-1": "w1", "sum-0": "w0"}
CONFIG = CoordinatorConfig(
    interval=1.0, timeout=5.0, max_in_flight=1, retained=2, liveness_timeout=10.0
)


def started(
    config: CoordinatorConfig = CONFIG, history: History | None = None, now: float = 0.0
) -> Coordinator:
    coordinator = Coordinator(TASKS, config, history or History())
    coordinator.start(now)
    return coordinator


def acks(n: int, generation: int, now: float, tasks: Iterable[str] = TASKS) -> list[AckReceived]:
    return [AckReceived(n, generation, task, now) for task in sorted(tasks)]


def feed(coordinator: Coordinator, events: Iterable[Event]) -> list[Command]:
    return [command for event in events for command in coordinator.handle(event)]


def kinds(commands: Iterable[Command]) -> list[str]:
    return [type(c).__name__ for c in commands]


# -- example-based tests ------------------------------------------------------


def test_start_opens_generation_one_from_scratch() -> None:
    coordinator = Coordinator(TASKS, CONFIG)
    [recover] = coordinator.start(0.0)
    assert isinstance(recover, Recover)
    assert (recover.generation, recover.checkpoint) == (1, None)
    assert coordinator.generation == 1


def test_events_before_start_do_nothing() -> None:
    coordinator = Coordinator(TASKS, CONFIG)
    events: list[Event] = [
        Tick(100.0),
        *acks(1, 0, 100.0),
        DeclineReceived(1, 0, "map-0", "overtaken", 100.0),
        Heartbeat("w0", 0, 100.0),
        WorkerLost("w0", "exit 9", 100.0),
    ]
    assert feed(coordinator, events) == []
    assert coordinator.generation == 0
    assert coordinator.pending == {}


def test_the_first_trigger_waits_one_interval() -> None:
    coordinator = started(now=10.0)
    assert coordinator.handle(Tick(10.0)) == []
    assert coordinator.handle(Tick(10.999)) == []
    assert coordinator.handle(Tick(11.0)) == [Trigger(c(1), 1)]
    assert coordinator.handle(Tick(11.5)) == []


def test_acks_from_every_task_complete_the_checkpoint() -> None:
    coordinator = started()
    assert coordinator.handle(Tick(1.0)) == [Trigger(c(1), 1)]
    first, second, last = acks(c(1), 1, 2.0)
    assert coordinator.handle(first) == []
    assert coordinator.handle(second) == []
    assert coordinator.handle(AckReceived(c(1), 1, last.task, 3.5, size=10, alignment_ms=7.0)) == [
        Complete(c(1), 1, duration_s=2.5, size=10, alignment_ms=7.0)
    ]
    assert coordinator.latest_completed == c(1)
    assert coordinator.pending == {}


def test_a_missing_ack_completes_nothing() -> None:
    coordinator = started()
    coordinator.handle(Tick(1.0))
    assert feed(coordinator, acks(c(1), 1, 2.0, ["map-0", "sum-0", "map-0"])) == []
    assert coordinator.latest_completed is None
    assert list(coordinator.pending) == [c(1)]


def test_acks_that_do_not_count_are_ignored() -> None:
    coordinator = started()
    coordinator.handle(Tick(1.0))
    ignored: list[Event] = [
        *acks(c(1), 0, 2.0),  # an old generation
        *acks(c(1), 2, 2.0),  # a generation that does not exist yet
        *acks(c(7), 1, 2.0),  # an unknown checkpoint
        AckReceived(c(1), 1, "intruder-0", 2.0),  # not a task of this job
    ]
    assert feed(coordinator, ignored) == []
    assert coordinator.pending[c(1)].acked == {}
    assert kinds(feed(coordinator, acks(c(1), 1, 2.0))) == ["Complete"]
    # A late duplicate of a completed checkpoint does nothing.
    assert feed(coordinator, acks(c(1), 1, 3.0)) == []


def test_a_checkpoint_past_its_timeout_is_aborted_and_the_next_one_triggered() -> None:
    coordinator = started()
    coordinator.handle(Tick(1.0))
    assert coordinator.handle(Tick(6.0)) == []  # exactly the timeout: still waiting
    [abort, trigger] = coordinator.handle(Tick(6.5))
    assert isinstance(abort, Abort)
    assert (abort.checkpoint, abort.generation) == (c(1), 1)
    assert trigger == Trigger(c(2), 1)
    # Its late acks are ignored.
    assert feed(coordinator, acks(c(1), 1, 7.0)) == []


# -- checkpoints that keep timing out -------------------------------------------

#: Two timeouts in a row are tolerated, the third rolls back.
TOLERANT = CoordinatorConfig(interval=1.0, timeout=5.0, liveness_timeout=1e9, tolerable_timeouts=2)


def placed(config: CoordinatorConfig = TOLERANT, now: float = 0.0) -> Coordinator:
    coordinator = Coordinator(TASKS, config, History(), placement=PLACEMENT)
    coordinator.start(now)
    return coordinator


def time_out(coordinator: Coordinator, acked: Iterable[str] = ()) -> list[Command]:
    """Let `acked` ack the pending checkpoint (triggered once due if none is) and tick
    past its timeout; the commands of that tick."""
    if not coordinator.pending:
        due = (coordinator.last_trigger or 0.0) + coordinator.config.interval
        assert kinds(coordinator.handle(Tick(due))) == ["Trigger"]
    n = max(coordinator.pending)
    at = coordinator.pending[n].triggered_at
    feed(coordinator, acks(n, coordinator.generation, at, acked))
    return coordinator.handle(Tick(at + coordinator.config.timeout + 0.5))


def test_checkpoints_timing_out_in_a_row_roll_back_once_replacing_who_never_acked() -> None:
    coordinator = placed()
    assert kinds(time_out(coordinator)) == ["Abort", "Trigger"]
    assert kinds(time_out(coordinator, ["map-0", "sum-0"])) == ["Abort", "Trigger"]
    # The third in a row: map-1 (on w1) never acked it, so w1 is the one to replace.
    abort, recover = time_out(coordinator, ["map-0", "sum-0"])
    assert isinstance(abort, Abort)
    assert isinstance(recover, Recover)
    assert (recover.generation, recover.checkpoint) == (2, None)
    assert recover.unresponsive == recover.stalled == ("w1",)
    assert recover.reason == (
        f"checkpoint {abort.checkpoint} not complete within 5s: timeout 3 in a row, at most 2 "
        "tolerated; never acked by map-1 (on w1)"
    )
    assert coordinator.pending == {}
    # The new generation starts counting afresh.
    assert kinds(time_out(coordinator)) == ["Abort", "Trigger"]
    assert kinds(time_out(coordinator)) == ["Abort", "Trigger"]
    assert kinds(time_out(coordinator)) == ["Abort", "Recover"]


def test_no_tolerance_rolls_back_at_the_first_timeout() -> None:
    coordinator = placed(dataclasses.replace(TOLERANT, tolerable_timeouts=0))
    abort, recover = time_out(coordinator, ["map-1"])
    assert isinstance(abort, Abort)
    assert isinstance(recover, Recover)
    assert recover.stalled == ("w0",)  # map-0 and sum-0 run there
    assert recover.reason.endswith("never acked by map-0, sum-0 (on w0)")


STUCK = "map-1: work() (job.py:3) has not returned for 10s on ('x') from in[1]@7; stuck at a"


def test_a_call_stuck_again_after_the_rollback_it_caused_fails_the_job() -> None:
    coordinator = placed(dataclasses.replace(TOLERANT, tolerable_timeouts=0))
    stuck_on = "map-1: work() on ('x') from in[1]@7"
    coordinator.handle(Heartbeat("w1", 1, 1.0, stuck=STUCK, stuck_on=stuck_on))
    abort, recover = time_out(coordinator, ["map-0", "sum-0"])
    assert isinstance(recover, Recover)
    assert recover.stalled == ("w1",)
    # The rollback says what is stuck, and gives the call (in a new process) a chance.
    assert recover.reason.endswith(f"never acked by map-1 (on w1); {STUCK}")
    # Stuck elsewhere in the next generation: another chance (and its reason).
    other = STUCK.replace("@7", "@8")
    coordinator.handle(Heartbeat("w1", 2, 20.0, stuck=other, stuck_on=stuck_on + "x"))
    _, recover = time_out(coordinator, ["map-0", "sum-0"])
    assert isinstance(recover, Recover)
    assert recover.reason.endswith(other)
    # The first call again, after the rollback it caused: the job fails naming it.
    coordinator.handle(Heartbeat("w1", 3, 40.0, stuck=STUCK, stuck_on=stuck_on))
    abort, fail = time_out(coordinator, ["map-0", "sum-0"])
    assert isinstance(abort, Abort)
    assert fail == Fail(
        f"{STUCK}; stuck again after the rollback it caused (1 checkpoints timed out in a "
        "row): the job fails rather than roll back for ever"
    )


def test_a_stuck_call_reported_no_more_or_by_a_worker_that_acked_fails_nothing() -> None:
    coordinator = placed(dataclasses.replace(TOLERANT, tolerable_timeouts=0))
    stuck_on = "map-1: work() on ('x') from in[1]@7"
    coordinator.handle(Heartbeat("w1", 1, 1.0, stuck=STUCK, stuck_on=stuck_on))
    assert kinds(time_out(coordinator, ["map-0", "sum-0"])) == ["Abort", "Recover"]
    # The call returned (a heartbeat without it): the rollback is the usual one.
    coordinator.handle(Heartbeat("w1", 2, 20.0, stuck=STUCK, stuck_on=stuck_on))
    coordinator.handle(Heartbeat("w1", 2, 21.0))
    _, recover = time_out(coordinator, ["map-0", "sum-0"])
    assert isinstance(recover, Recover)
    assert recover.reason.endswith("never acked by map-1 (on w1)")
    # Reported by a worker whose subtasks all acked: not what stalls the checkpoints.
    coordinator.handle(Heartbeat("w0", 3, 40.0, stuck=STUCK, stuck_on=stuck_on))
    assert kinds(time_out(coordinator, ["map-0", "sum-0"])) == ["Abort", "Recover"]


SLOW = "storing map-1's snapshot of checkpoint 9 for 7s"


def test_timeouts_held_up_by_slow_checkpoint_storage_roll_nothing_back() -> None:
    coordinator = placed(dataclasses.replace(TOLERANT, tolerable_timeouts=0))
    coordinator.handle(Heartbeat("w1", 1, 1.0, storing=SLOW))
    for _ in range(5):
        abort, trigger = time_out(coordinator, ["map-0", "sum-0"])
        # Aborted, naming the snapshot the storage holds; no rollback, the next is triggered.
        assert isinstance(abort, Abort)
        assert abort.reason == f"not complete within 5s; w1 {SLOW}"
        assert isinstance(trigger, Trigger)
    assert coordinator.generation == 1
    # The storage answers again: the next timeout is the usual one.
    coordinator.handle(Heartbeat("w1", 1, 30.0))
    abort, recover = time_out(coordinator, ["map-0", "sum-0"])
    assert abort.reason == "not complete within 5s"  # type: ignore[union-attr]
    assert isinstance(recover, Recover)
    assert recover.stalled == ("w1",)


def test_a_timeout_just_after_the_storage_answers_again_is_still_the_storage() -> None:
    """The last checkpoint of a hang times out after the heartbeats stop naming a slow
    snapshot (the queue is written, its acks are on the way): it does not count."""
    coordinator = placed(TOLERANT)  # two tolerated, the third rolls back
    coordinator.handle(Heartbeat("w1", 1, 1.0, storing=SLOW))
    for _ in range(4):
        abort, trigger = time_out(coordinator, ["map-0", "sum-0"])
        assert isinstance(trigger, Trigger)
        coordinator.handle(Heartbeat("w1", 1, coordinator.last_trigger or 0.0, storing=SLOW))
    coordinator.handle(Heartbeat("w1", 1, (coordinator.last_trigger or 0.0) + 1.0))
    abort, trigger = time_out(coordinator, ["map-0", "sum-0"])
    assert abort.reason == f"not complete within 5s; w1 {SLOW}"  # type: ignore[union-attr]
    assert isinstance(trigger, Trigger)
    assert coordinator.timeouts == 0
    # The storage quiet for a whole checkpoint: timeouts count again, from the first.
    assert kinds(time_out(coordinator, ["map-0", "sum-0"])) == ["Abort", "Trigger"]
    assert kinds(time_out(coordinator, ["map-0", "sum-0"])) == ["Abort", "Trigger"]
    assert kinds(time_out(coordinator, ["map-0", "sum-0"])) == ["Abort", "Recover"]


@settings(max_examples=200, deadline=None)
@given(
    tolerable=st.integers(0, 3),
    # Per checkpoint: did w1 (holding map-1) name a slow store while it was pending,
    # and does its latest heartbeat still name one when the checkpoint times out?
    held=st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=8),
)
def test_only_timeouts_the_storage_did_not_hold_up_count(
    tolerable: int, held: list[tuple[bool, bool]]
) -> None:
    coordinator = placed(dataclasses.replace(TOLERANT, tolerable_timeouts=tolerable))
    count = 0
    for seen, still in held:
        if not coordinator.pending:
            due = (coordinator.last_trigger or 0.0) + coordinator.config.interval
            assert kinds(coordinator.handle(Tick(due))) == ["Trigger"]
        at = coordinator.pending[max(coordinator.pending)].triggered_at
        coordinator.handle(Heartbeat("w1", 1, at, storing=SLOW if seen else ""))
        coordinator.handle(Heartbeat("w1", 1, at, storing=SLOW if still else ""))
        abort, after = time_out(coordinator, ["map-0", "sum-0"])
        assert isinstance(abort, Abort)
        assert abort.reason.endswith(SLOW) == (seen or still)
        count += not (seen or still)
        if count > tolerable:
            assert isinstance(after, Recover)
            assert f"timeout {count} in a row" in after.reason
            return
        assert isinstance(after, Trigger)


def test_slow_storage_on_one_worker_excuses_no_other_that_never_acked() -> None:
    coordinator = placed(dataclasses.replace(TOLERANT, tolerable_timeouts=0))
    coordinator.handle(Heartbeat("w1", 1, 1.0, storing=SLOW))
    abort, recover = time_out(coordinator, ["sum-0"])  # map-0 (w0) and map-1 (w1) never did
    assert isinstance(abort, Abort)
    assert abort.reason.endswith(f"; w1 {SLOW}")
    assert isinstance(recover, Recover)
    assert recover.stalled == ("w0", "w1")
    # A rollback forgets what the old generation's heartbeats said.
    assert coordinator.storing == {}


def test_a_completion_between_timeouts_starts_the_count_again() -> None:
    coordinator = placed()
    assert kinds(time_out(coordinator)) == ["Abort", "Trigger"]
    assert kinds(time_out(coordinator)) == ["Abort", "Trigger"]
    assert kinds(feed(coordinator, acks(max(coordinator.pending), 1, 20.0))) == ["Complete"]
    assert kinds(time_out(coordinator)) == ["Abort", "Trigger"]
    assert kinds(time_out(coordinator)) == ["Abort", "Trigger"]
    assert kinds(time_out(coordinator)) == ["Abort", "Recover"]


def test_declines_neither_count_nor_break_a_run_of_timeouts() -> None:
    """A full disk declines checkpoints: the job keeps running on its last good state."""
    coordinator = placed()

    def decline() -> None:
        if not coordinator.pending:
            due = (coordinator.last_trigger or 0.0) + coordinator.config.interval
            assert kinds(coordinator.handle(Tick(due))) == ["Trigger"]
        n = max(coordinator.pending)
        declined = DeclineReceived(n, coordinator.generation, "sum-0", "No space left", 0.0)
        assert kinds(coordinator.handle(declined)) == ["Abort"]

    for _ in range(20):
        decline()
    assert coordinator.generation == 1
    assert kinds(time_out(coordinator)) == ["Abort", "Trigger"]
    assert kinds(time_out(coordinator)) == ["Abort", "Trigger"]
    decline()
    assert kinds(time_out(coordinator)) == ["Abort", "Recover"]


def test_a_rollback_for_another_cause_starts_the_count_again() -> None:
    coordinator = placed()
    time_out(coordinator)
    time_out(coordinator)
    late = max(coordinator.pending)
    [lost] = coordinator.handle(WorkerLost("w1", "killed by signal 9", 15.0))
    assert isinstance(lost, Recover)
    assert lost.stalled == ()
    # The old generation's checkpoint times out no more: it is no longer pending.
    assert coordinator.handle(Tick(15.0 + 1.0)) == [Trigger(next_after(late, COORDINATOR), 2)]
    assert kinds(time_out(coordinator)) == ["Abort", "Trigger"]
    assert kinds(time_out(coordinator)) == ["Abort", "Trigger"]
    assert kinds(time_out(coordinator)) == ["Abort", "Recover"]


def test_timeouts_with_the_placement_unknown_roll_back_replacing_nobody() -> None:
    coordinator = Coordinator(TASKS, dataclasses.replace(TOLERANT, tolerable_timeouts=0))
    coordinator.start(0.0)
    [_, recover] = time_out(coordinator)
    assert isinstance(recover, Recover)
    assert recover.unresponsive == recover.stalled == ()
    assert recover.reason.endswith("never acked by map-0, map-1, sum-0")


def test_a_long_list_of_subtasks_that_never_acked_is_cut() -> None:
    tasks = frozenset(f"s0-{i:02}" for i in range(25))
    config = dataclasses.replace(TOLERANT, tolerable_timeouts=0)
    coordinator = Coordinator(tasks, config, History(), placement=dict.fromkeys(tasks, "w0"))
    coordinator.start(0.0)
    [_, recover] = time_out(coordinator)
    assert isinstance(recover, Recover)
    assert recover.reason.endswith(
        ", ".join(f"s0-{i:02}" for i in range(10)) + " and 15 more (on w0)"
    )


def test_a_placement_must_cover_every_subtask() -> None:
    with pytest.raises(ConfigurationError, match="every subtask"):
        Coordinator(TASKS, placement={"map-0": "w0"})


def test_a_decline_aborts_the_checkpoint() -> None:
    coordinator = started()
    coordinator.handle(Tick(1.0))
    [abort] = coordinator.handle(DeclineReceived(c(1), 1, "sum-0", "alignment overtaken", 1.5))
    assert isinstance(abort, Abort)
    assert abort.checkpoint == c(1)
    assert "sum-0" in abort.reason
    assert coordinator.pending == {}
    # A decline of a stale generation or an unknown checkpoint does nothing.
    coordinator.handle(Tick(2.0))
    assert coordinator.handle(DeclineReceived(c(2), 0, "sum-0", "x", 2.1)) == []
    assert coordinator.handle(DeclineReceived(c(9), 1, "sum-0", "x", 2.1)) == []
    assert list(coordinator.pending) == [c(2)]


def test_retention_discards_the_oldest_completed_checkpoints() -> None:
    coordinator = started()
    discarded: list[int] = []
    for n in range(1, 6):
        assert coordinator.handle(Tick(float(n))) == [Trigger(c(n), 1)]
        commands = feed(coordinator, acks(c(n), 1, n + 0.5))
        assert kinds(commands)[0] == "Complete"
        discarded += [d for x in commands if isinstance(x, Discard) for d in x.checkpoints]
        assert coordinator.completed == [c(m) for m in range(max(1, n - 1), n + 1)]
    assert discarded == [c(1), c(2), c(3)]


def test_at_most_max_in_flight_checkpoints_are_pending() -> None:
    coordinator = started(CoordinatorConfig(interval=1.0, timeout=60.0, max_in_flight=2))
    assert coordinator.handle(Tick(1.0)) == [Trigger(c(1), 1)]
    assert coordinator.handle(Tick(2.0)) == [Trigger(c(2), 1)]
    assert coordinator.handle(Tick(3.0)) == []
    assert coordinator.handle(Tick(9.0)) == []
    assert kinds(feed(coordinator, acks(c(2), 1, 9.5))) == ["Complete", "Abort"]
    # A slot is free and the interval has long passed: trigger on the next tick.
    assert coordinator.handle(Tick(9.6)) == [Trigger(c(3), 1)]


def test_a_newer_completion_subsumes_older_pending_checkpoints() -> None:
    coordinator = started(CoordinatorConfig(interval=1.0, timeout=60.0, max_in_flight=3))
    feed(coordinator, [Tick(1.0), Tick(2.0), Tick(3.0)])
    assert sorted(coordinator.pending) == [c(1), c(2), c(3)]
    commands = feed(coordinator, acks(c(2), 1, 3.5))
    assert kinds(commands) == ["Complete", "Abort"]
    assert commands[1] == Abort(c(1), 1, f"subsumed by checkpoint {c(2)}")
    assert list(coordinator.pending) == [c(3)]
    assert coordinator.completed == [c(2)]


def test_a_lost_worker_rolls_back_to_the_latest_completed_checkpoint() -> None:
    coordinator = started()
    coordinator.handle(Tick(1.0))
    feed(coordinator, acks(c(1), 1, 1.5))
    coordinator.handle(Tick(2.0))  # checkpoint c(2) pending
    [recover] = coordinator.handle(WorkerLost("w1", "exit code -9", 2.5))
    assert isinstance(recover, Recover)
    assert (recover.generation, recover.checkpoint) == (2, c(1))
    assert "w1" in recover.reason
    assert coordinator.pending == {}
    # Acks of the old generation no longer count; ids continue above c(2).
    assert feed(coordinator, acks(c(2), 1, 2.6)) == []
    assert coordinator.handle(Tick(3.0)) == []
    assert coordinator.handle(Tick(3.5)) == [Trigger(c(3), 2)]


def test_a_pause_of_the_coordinators_own_process_is_held_against_no_worker() -> None:
    coordinator = started(CoordinatorConfig(interval=1.0, timeout=5.0, liveness_timeout=10.0))
    coordinator.handle(Heartbeat("w0", 1, 1.0, restoring=False))
    [trigger] = coordinator.handle(Tick(2.0))
    assert isinstance(trigger, Trigger)
    # Stopped from 3.0 to 33.0: it heard nothing, and neither w0 nor the checkpoint
    # triggered at 2.0 is to blame.
    assert coordinator.handle(Paused(30.0, 33.0)) == []
    assert coordinator.handle(Tick(33.0)) == []
    # Counted from where the pause left them: silent and overdue all the same later.
    commands = coordinator.handle(Tick(43.5))
    assert kinds(commands) == ["Abort", "Recover"]
    assert "w0 silent" in next(c for c in commands if isinstance(c, Recover)).reason


def test_without_the_pause_the_same_silence_is_a_workers() -> None:
    coordinator = started(CoordinatorConfig(interval=1.0, timeout=5.0, liveness_timeout=10.0))
    coordinator.handle(Heartbeat("w0", 1, 1.0, restoring=False))
    coordinator.handle(Tick(2.0))
    assert kinds(coordinator.handle(Tick(33.0))) == ["Abort", "Recover"]


def test_heartbeat_silence_past_the_liveness_timeout_rolls_back() -> None:
    coordinator = started(CoordinatorConfig(interval=100.0, liveness_timeout=10.0))
    coordinator.handle(Heartbeat("w0", 1, 1.0))
    coordinator.handle(Heartbeat("w1", 1, 1.0))
    coordinator.handle(Heartbeat("w0", 1, 9.0))
    assert coordinator.handle(Tick(11.0)) == []
    # A heartbeat of an old generation does not keep a worker alive.
    coordinator.handle(Heartbeat("w1", 0, 11.0))
    [recover] = coordinator.handle(Tick(11.5))
    assert isinstance(recover, Recover)
    assert (recover.generation, recover.checkpoint) == (2, None)
    assert "w1" in recover.reason
    # Every worker gets a fresh allowance in the new generation.
    assert coordinator.handle(Tick(21.0)) == []


def test_a_worker_silent_generation_after_generation_is_named_unresponsive() -> None:
    coordinator = started(CoordinatorConfig(interval=100.0, liveness_timeout=10.0))
    coordinator.handle(Heartbeat("w0", 1, 1.0))
    coordinator.handle(Heartbeat("w1", 1, 1.0))
    # Generation 1: w1 falls silent (a SIGSTOPped zombie would wake within one).
    coordinator.handle(Heartbeat("w0", 1, 10.0))
    [first] = coordinator.handle(Tick(11.5))
    assert isinstance(first, Recover)
    assert first.unresponsive == ()
    # Generation 2: w0 answers, w1 stays silent: rolling back again cannot help it.
    coordinator.handle(Heartbeat("w0", 2, 20.0))
    [second] = coordinator.handle(Tick(22.0))
    assert isinstance(second, Recover)
    assert second.unresponsive == ("w1",)
    # Its replacement starts with a clean record: one silence is a rollback only.
    coordinator.handle(Heartbeat("w0", 3, 31.0))
    [third] = coordinator.handle(Tick(32.5))
    assert isinstance(third, Recover)
    assert third.unresponsive == ()


def test_a_heartbeat_between_silences_clears_the_record() -> None:
    coordinator = started(CoordinatorConfig(interval=100.0, liveness_timeout=10.0))
    coordinator.handle(Heartbeat("w0", 1, 1.0))
    [first] = coordinator.handle(Tick(11.5))  # silent once
    assert isinstance(first, Recover)
    coordinator.handle(Heartbeat("w0", 2, 12.0))  # the zombie woke and joined
    [second] = coordinator.handle(Tick(22.5))  # silent again, but not in a row
    assert isinstance(second, Recover)
    assert second.unresponsive == ()


def test_joined_names_the_workers_heard_in_the_current_generation() -> None:
    coordinator = started(CoordinatorConfig(interval=100.0, liveness_timeout=10.0))
    assert coordinator.joined == set()
    coordinator.handle(Heartbeat("w0", 0, 0.5))  # still in the generation before
    assert coordinator.joined == set()
    coordinator.handle(Heartbeat("w0", 1, 1.0))
    coordinator.handle(Heartbeat("w1", 1, 1.0))
    assert coordinator.joined == {"w0", "w1"}
    # A rollback: nobody runs the new generation until it says so.
    coordinator.handle(WorkerLost("w1", "killed", 2.0))
    assert coordinator.joined == set()
    coordinator.handle(Heartbeat("w1", 1, 2.5))  # late, of the old generation
    coordinator.handle(Heartbeat("w0", 2, 3.0))
    assert coordinator.joined == {"w0"}


def test_a_restoring_worker_is_alive_but_has_not_joined() -> None:
    coordinator = started(CoordinatorConfig(interval=100.0, liveness_timeout=10.0))
    coordinator.handle(Heartbeat("w0", 1, 8.0, restoring=True))
    assert coordinator.joined == set()
    # Its heartbeats keep it alive: a long restore is not a death.
    assert kinds(coordinator.handle(Tick(15.0))) == []
    coordinator.handle(Heartbeat("w0", 1, 16.0))
    assert coordinator.joined == {"w0"}


def test_the_first_trigger_after_a_recovery_follows_the_last_restore() -> None:
    coordinator = Coordinator(TASKS, CONFIG, History(), frozenset({"w0", "w1"}))
    coordinator.start(10.0)
    coordinator.handle(Heartbeat("w0", 1, 10.2))
    coordinator.handle(Heartbeat("w1", 1, 10.3, restoring=True))
    # A full interval passed, but w1 is still restoring: nothing could complete.
    assert coordinator.handle(Tick(11.5)) == []
    coordinator.handle(Heartbeat("w1", 1, 12.0))
    assert coordinator.handle(Tick(12.0)) == [Trigger(c(1), 1)]
    assert kinds(feed(coordinator, acks(c(1), 1, 12.5))) == ["Complete"]
    # Later checkpoints keep the interval.
    assert coordinator.handle(Tick(12.9)) == []
    assert coordinator.handle(Tick(13.0)) == [Trigger(c(2), 1)]
    # A rollback waits for the restores again, however long ago the last trigger was.
    coordinator.handle(WorkerLost("w0", "killed", 20.0))
    coordinator.handle(Heartbeat("w0", 1, 20.1))  # late, of the generation before
    coordinator.handle(Heartbeat("w1", 2, 20.2))
    assert coordinator.handle(Tick(21.5)) == []
    coordinator.handle(Heartbeat("w0", 2, 21.6))
    assert coordinator.handle(Tick(21.6)) == [Trigger(c(3), 2)]


def test_restores_faster_than_the_interval_still_wait_for_it() -> None:
    """The interval bounds how often the coordinator triggers (sources may do the rest)."""
    coordinator = Coordinator(TASKS, CONFIG, History(), frozenset({"w0"}))
    coordinator.start(10.0)
    coordinator.handle(Heartbeat("w0", 1, 10.2))
    assert coordinator.handle(Tick(10.5)) == []
    assert coordinator.handle(Tick(11.0)) == [Trigger(c(1), 1)]


def test_next_trigger_in_says_when_the_interval_is_up() -> None:
    coordinator = Coordinator(TASKS, CONFIG, History())
    assert coordinator.next_trigger_in(0.0) is None  # not started
    coordinator.start(10.0)
    assert coordinator.next_trigger_in(10.25) == pytest.approx(0.75)
    assert coordinator.handle(Tick(11.0)) == [Trigger(c(1), 1)]
    # The in-flight limit reached: the next one is due once this one times out.
    assert coordinator.next_trigger_in(11.5) == pytest.approx(4.5)
    assert kinds(feed(coordinator, acks(c(1), 1, 11.2))) == ["Complete"]
    # Measured from the trigger, not from the completion.
    assert coordinator.next_trigger_in(11.2) == pytest.approx(0.8)
    assert coordinator.next_trigger_in(12.5) == 0.0


def test_next_trigger_in_waits_for_the_restores_first() -> None:
    coordinator = Coordinator(TASKS, CONFIG, History(), frozenset({"w0"}))
    coordinator.start(10.0)
    assert coordinator.next_trigger_in(10.5) is None
    coordinator.handle(Heartbeat("w0", 1, 10.6))
    assert coordinator.next_trigger_in(10.6) == pytest.approx(0.4)


@settings(max_examples=300, deadline=None)
@given(
    workers=st.sampled_from([frozenset(), frozenset({"w0"})]),
    max_in_flight=st.integers(1, 2),
    steps=st.lists(
        st.tuples(
            st.sampled_from(["tick", "ack", "decline", "heartbeat"]),
            st.floats(0.0, 3.0, allow_nan=False),
        ),
        max_size=30,
    ),
)
def test_next_trigger_in_is_the_earliest_tick_that_acts(
    workers: frozenset[str], max_in_flight: int, steps: list[tuple[str, float]]
) -> None:
    """No `Tick` before `now + next_trigger_in(now)` acts (triggers, or aborts a
    checkpoint past its timeout, perhaps rolling back); one just after it does (no
    other event between); None: no `Tick` alone ever acts."""
    config = CoordinatorConfig(
        interval=1.0, timeout=2.5, max_in_flight=max_in_flight, liveness_timeout=1e9
    )
    coordinator = Coordinator(TASKS, config, History(), workers)
    now = 0.0
    coordinator.start(now)
    for what, dt in steps:
        now += dt
        match what:
            case "tick":
                coordinator.handle(Tick(now))
            case "ack" if coordinator.pending:
                feed(coordinator, acks(min(coordinator.pending), coordinator.generation, now))
            case "decline" if coordinator.pending:
                n = max(coordinator.pending)
                coordinator.handle(DeclineReceived(n, coordinator.generation, "sum-0", "x", now))
            case "heartbeat":
                coordinator.handle(Heartbeat("w0", coordinator.generation, now))
        wait = coordinator.next_trigger_in(now)

        def acts(at: float) -> bool:
            return bool(copy.deepcopy(coordinator).handle(Tick(at)))

        if wait is None:
            assert not acts(now + 1e6)
            continue
        assert wait >= 0.0
        if wait > 1e-6:
            assert not acts(now + wait - 1e-6)
        assert acts(now + wait + 1e-6)


def test_invalid_configurations_are_rejected() -> None:
    for bad in (
        {"interval": 0.0},
        {"timeout": -1.0},
        {"max_in_flight": 0},
        {"retained": 0},
        {"liveness_timeout": 0.0},
        {"tolerable_timeouts": -1},
    ):
        with pytest.raises(ConfigurationError):
            CoordinatorConfig(**bad)
    with pytest.raises(ConfigurationError):
        Coordinator(frozenset())


# -- the state machine test ---------------------------------------------------

WORKERS = ("w0", "w1")
ALL_TASKS = (*sorted(TASKS), "intruder-0")


@dataclass
class Model:
    """What the commands so far say; checked against each new command."""

    generation: int = 0
    max_triggered: int = 0
    #: Pending checkpoint -> trigger time, for the current generation.
    pending: dict[int, float] = field(default_factory=dict)
    #: Tasks that acked each pending checkpoint in the current generation.
    acked: dict[int, set[str]] = field(default_factory=dict)
    completed: list[int] = field(default_factory=list)
    ever_completed: set[int] = field(default_factory=set)
    last_trigger: float = 0.0
    heartbeats: dict[str, float] = field(default_factory=dict)
    #: The workers the coordinator was told of (empty: unknown).
    workers: frozenset[str] = frozenset()
    #: Workers that restored in the current generation, and whether it had no trigger yet.
    joined: set[str] = field(default_factory=set)
    awaiting_join: bool = False
    #: Checkpoints timed out in the current generation since its last completion.
    timeouts: int = 0
    #: Workers whose latest heartbeat of the generation names a slow snapshot store.
    storing: set[str] = field(default_factory=set)
    #: Per pending checkpoint, the workers that named one while it was pending.
    storing_seen: dict[int, set[str]] = field(default_factory=dict)

    def held_by_storage(self, n: int) -> bool:
        """Every worker of a subtask that never acked `n` named a slow store while it
        was pending (or names one now): its timeout does not count."""
        holding = {PLACEMENT[t] for t in TASKS - self.acked[n]}
        return bool(holding) and holding <= self.storing_seen[n] | self.storing

    def trigger_due(self, now: float, config: CoordinatorConfig) -> bool:
        """Every trigger follows an interval; a generation's first one also every
        worker's restore (when the workers are known)."""
        interval = now - self.last_trigger >= config.interval
        if self.awaiting_join and self.workers:
            return interval and self.workers <= self.joined
        return interval

    def apply(self, commands: Sequence[Command], now: float, config: CoordinatorConfig) -> None:
        for command in commands:
            if isinstance(command, Trigger):
                assert command.generation == self.generation
                assert command.checkpoint > self.max_triggered, "checkpoint id reused"
                assert self.trigger_due(now, config), "triggered before it was due"
                self.awaiting_join = False
                self.max_triggered = command.checkpoint
                self.pending[command.checkpoint] = now
                self.acked[command.checkpoint] = set()
                self.storing_seen[command.checkpoint] = set()
                self.last_trigger = now
            elif isinstance(command, Complete):
                n = command.checkpoint
                assert command.generation == self.generation
                assert n in self.pending, f"Complete({n}) of a checkpoint not pending"
                assert self.acked[n] == TASKS, f"Complete({n}) without every ack"
                assert n not in self.ever_completed
                self.ever_completed.add(n)
                self.completed.append(n)
                del self.pending[n]
                self.timeouts = 0
            elif isinstance(command, Abort):
                assert command.generation == self.generation
                assert command.checkpoint in self.pending
                del self.pending[command.checkpoint]
            elif isinstance(command, Halt):
                pytest.fail(f"halted with {self.completed} still restorable: {command}")
            elif isinstance(command, Discard):
                excess = len(self.completed) - config.retained
                assert excess > 0
                assert command.checkpoints == tuple(self.completed[:excess])
                del self.completed[:excess]
            else:
                assert command.generation == self.generation + 1
                assert command.checkpoint == (self.completed[-1] if self.completed else None)
                self.generation = command.generation
                self.pending.clear()
                self.acked.clear()
                self.storing.clear()
                self.storing_seen.clear()
                self.last_trigger = now
                self.heartbeats = dict.fromkeys(self.heartbeats, now)
                self.joined = set()
                self.awaiting_join = True
                self.timeouts = 0
            assert len(self.pending) <= config.max_in_flight
        assert len(self.completed) <= config.retained


@st.composite
def configs(draw: st.DrawFn) -> CoordinatorConfig:
    return CoordinatorConfig(
        interval=draw(st.sampled_from([0.5, 1.0, 2.0])),
        timeout=draw(st.sampled_from([1.0, 3.0, 10.0, 30.0])),
        max_in_flight=draw(st.integers(1, 3)),
        retained=draw(st.integers(1, 3)),
        liveness_timeout=draw(st.sampled_from([4.0, 8.0])),
        tolerable_timeouts=draw(st.sampled_from([0, 1, 3])),
    )


class CoordinatorMachine(RuleBasedStateMachine):
    """Random ticks, acks, declines, heartbeats and worker losses."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0
        self.model = Model()
        self.config = CONFIG
        self.coordinator = Coordinator(TASKS, CONFIG, placement=PLACEMENT)
        self.recovers = 0
        #: The control topic: what the coordinators wrote so far.
        self.control: list[dict[str, object]] = []
        #: Checkpoints found damaged; they stay damaged on disk.
        self.damaged: set[int] = set()

    @initialize(
        config=configs(),
        past=st.none() | st.tuples(st.integers(1, 3), st.integers(0, 5)),
        workers_known=st.booleans(),
    )
    def start(
        self, config: CoordinatorConfig, past: tuple[int, int] | None, workers_known: bool
    ) -> None:
        """Start fresh, or from a control topic a previous coordinator left behind."""
        self.config = config
        self.model.workers = frozenset(WORKERS) if workers_known else frozenset()
        if past is not None:
            generation, completed = past
            self.control = [
                {"type": "recover", "generation": generation, "checkpoint": None},
                *(
                    {"type": "complete", "checkpoint": n, "generation": generation}
                    for n in range(1, completed + 1)
                ),
                {"type": "trigger", "checkpoint": completed + 2, "generation": generation},
            ]
        history = replay(self.control, config.retained)
        self.model.completed = list(history.completed)
        self.model.ever_completed = set(history.completed)
        self.model.generation = history.generation
        self.model.max_triggered = history.max_checkpoint
        self.coordinator = Coordinator(TASKS, config, history, self.model.workers, PLACEMENT)
        self.send_start()

    def send_start(self) -> None:
        self.apply(self.coordinator.start(self.now))

    def apply(self, commands: list[Command]) -> None:
        self.recovers += sum(isinstance(c, Recover) for c in commands)
        self.control += [m for c in commands if (m := to_message(c)) is not None]
        self.model.apply(commands, self.now, self.config)

    def send(self, event: Event) -> list[Command]:
        commands = self.coordinator.handle(event)
        self.apply(commands)
        return commands

    def some_pending(self, choice: int) -> int:
        ids = sorted(self.model.pending) or [self.model.max_triggered]
        return ids[choice % len(ids)]

    @rule(dt=st.sampled_from([0.0, 0.3, 0.5, 1.0, 2.5, 4.0, 9.0]))
    def tick(self, dt: float) -> None:
        self.now += dt
        before = dict(self.model.pending)
        silent = [
            w
            for w, seen in self.model.heartbeats.items()
            if self.now - seen > self.config.liveness_timeout
        ]
        timed_out = sorted(n for n, at in before.items() if self.now - at > self.config.timeout)
        excused = {n for n in timed_out if self.model.held_by_storage(n)}
        counted = [n for n in timed_out if n not in excused]
        timeouts = self.model.timeouts + len(counted)
        escalates = bool(counted) and timeouts > self.config.tolerable_timeouts
        # Who never acked the last checkpoint to count (the ids' order is the abort order).
        unacked = TASKS - self.model.acked[counted[-1]] if counted else frozenset()
        commands = self.send(Tick(self.now))
        for c in commands:
            if isinstance(c, Abort) and c.checkpoint in excused:
                assert "storing" in c.reason, c
        recovers = [c for c in commands if isinstance(c, Recover)]
        # A checkpoint past its timeout is gone, one within it is not.
        for n in before:
            aborted = any(isinstance(c, Abort) and c.checkpoint == n for c in commands)
            assert aborted == (n in timed_out), (n, before[n], self.now, commands)
        # One rollback for silence, for timeouts one too many in a row, or for both.
        assert len(recovers) == int(bool(silent) or escalates), (silent, timeouts, commands)
        if escalates:
            [recover] = recovers
            stalled = {PLACEMENT[t] for t in unacked}
            assert set(recover.stalled) == stalled
            assert stalled <= set(recover.unresponsive)
            assert f"checkpoint {counted[-1]} not complete" in recover.reason
            assert f"timeout {timeouts} in a row" in recover.reason
            assert all(t in recover.reason for t in unacked)
        elif not recovers:
            self.model.timeouts = timeouts
        recovered = bool(recovers)
        due = self.model.trigger_due(self.now, self.config)
        free = len(self.model.pending) < self.config.max_in_flight
        if not recovered and due and free:
            pytest.fail(f"a trigger was due at {self.now}: {commands}")

    @rule(choice=st.integers(0, 5), stale=st.sampled_from([0, 0, 0, -1, 1]))
    def everyone_acks(self, choice: int, stale: int) -> None:
        n = self.some_pending(choice)
        generation = self.model.generation + stale
        for task in sorted(TASKS):
            self.ack(n, generation, task)

    @precondition(lambda self: len(self.model.pending) > 1)
    @rule()
    def the_newest_completes(self) -> None:
        n = max(self.model.pending)
        for task in sorted(TASKS):
            self.ack(n, self.model.generation, task)

    @rule(
        choice=st.integers(0, 5),
        stale=st.sampled_from([0, 0, -1, 1]),
        task=st.sampled_from(ALL_TASKS),
    )
    def one_ack(self, choice: int, stale: int, task: str) -> None:
        self.ack(self.some_pending(choice) + (choice == 5), self.model.generation + stale, task)

    def ack(self, n: int, generation: int, task: str) -> None:
        counts = generation == self.model.generation and n in self.model.pending and task in TASKS
        if counts:
            self.model.acked[n].add(task)
        commands = self.send(AckReceived(n, generation, task, self.now))
        if not counts:
            assert commands == []
        elif self.model.acked[n] >= TASKS:
            assert kinds(commands)[0] == "Complete", commands

    @rule(
        choice=st.integers(0, 5), stale=st.sampled_from([0, 0, -1]), task=st.sampled_from(ALL_TASKS)
    )
    def decline(self, choice: int, stale: int, task: str) -> None:
        n = self.some_pending(choice)
        counts = stale == 0 and n in self.model.pending
        commands = self.send(DeclineReceived(n, self.model.generation + stale, task, "x", self.now))
        assert kinds(commands) == (["Abort"] if counts else [])

    @rule(
        worker=st.sampled_from(WORKERS),
        stale=st.sampled_from([0, 0, 0, -1]),
        restoring=st.booleans(),
        storing=st.booleans(),
    )
    def heartbeat(self, worker: str, stale: int, restoring: bool, storing: bool) -> None:
        generation = self.model.generation + stale
        if stale == 0:
            self.model.heartbeats[worker] = self.now  # alive, restoring or not
            if not restoring:
                self.model.joined.add(worker)
            if storing:
                self.model.storing.add(worker)
                for seen in self.model.storing_seen.values():
                    seen.add(worker)
            else:
                self.model.storing.discard(worker)
        line = SLOW if storing else ""
        assert self.send(Heartbeat(worker, generation, self.now, restoring, storing=line)) == []

    @precondition(lambda self: self.recovers < 3)
    @rule(worker=st.sampled_from(WORKERS))
    def lose_worker(self, worker: str) -> None:
        assert kinds(self.send(WorkerLost(worker, "exit", self.now))) == ["Recover"]

    @precondition(lambda self: self.model.completed)
    @rule(choice=st.integers(0, 5), known=st.booleans())
    def a_checkpoint_is_damaged(self, choice: int, known: bool) -> None:
        """A retained checkpoint fails validation (or a checkpoint already dropped is reported)."""
        completed = self.model.completed
        n = completed[choice % len(completed)] if known else self.model.max_triggered + 1
        if n == completed[-1] and len(completed) == 1:
            return  # the halt is tested on its own: the job stops there
        was_latest = n == completed[-1]
        if n in completed:
            self.damaged.add(n)
            completed.remove(n)
        commands = self.coordinator.handle(CheckpointDamaged(n, "bad", self.now))
        if was_latest:
            # Exactly one Recover, to the newest remaining checkpoint (the model checks it).
            assert kinds(commands) == ["Recover"]
            assert isinstance(commands[0], Recover)
            assert commands[0].checkpoint == completed[-1]
        else:
            assert commands == []
        self.apply(commands)

    @precondition(lambda self: self.recovers < 3)
    @rule()
    def restart_the_coordinator(self) -> None:
        """A new coordinator process resumes from the control topic and re-validates."""
        history = replay(self.control, self.config.retained)
        assert history.generation == self.model.generation
        assert history.max_checkpoint == self.model.max_triggered
        intact = [n for n in history.completed if n not in self.damaged]
        # Damage is not recorded in the control topic: a restarted runner finds it again
        # by validation, and restores the same checkpoint as before.
        assert intact[-1:] == self.model.completed[-1:]
        self.coordinator = Coordinator(TASKS, self.config, history, self.model.workers, PLACEMENT)
        for n in history.completed:
            if n in self.damaged:
                assert self.coordinator.handle(CheckpointDamaged(n, "bad", self.now)) == []
        self.model.completed = intact
        self.model.heartbeats = {}
        self.send_start()

    @invariant()
    def agrees_with_the_model(self) -> None:
        assert self.coordinator.generation == self.model.generation
        assert sorted(self.coordinator.pending) == sorted(self.model.pending)
        assert self.coordinator.completed == self.model.completed
        assert len(self.coordinator.pending) <= self.config.max_in_flight
        assert len(self.coordinator.completed) <= self.config.retained


CoordinatorMachine.TestCase.settings = settings(
    max_examples=200, stateful_step_count=40, deadline=None
)
test_coordinator_state_machine = CoordinatorMachine.TestCase


# -- replay: resuming from the control topic ----------------------------------


def to_message(command: Command) -> dict[str, object] | None:
    """What the coordinator writes to the control topic for a command."""
    if isinstance(command, Trigger):
        return {
            "type": "trigger",
            "checkpoint": command.checkpoint,
            "generation": command.generation,
        }
    if isinstance(command, Complete):
        return {
            "type": "complete",
            "checkpoint": command.checkpoint,
            "generation": command.generation,
        }
    if isinstance(command, Abort):
        return {"type": "abort", "checkpoint": command.checkpoint, "generation": command.generation}
    if isinstance(command, Recover):
        return {
            "type": "recover",
            "checkpoint": command.checkpoint,
            "generation": command.generation,
        }
    return None


def test_replay_of_an_empty_topic_is_a_fresh_start() -> None:
    assert replay([], retained=3) == History()


def test_replay_needs_a_positive_retention() -> None:
    messages = [{"type": "complete", "checkpoint": 1, "generation": 1}]
    assert replay(messages, retained=1).completed == (1,)
    with pytest.raises(ConfigurationError):
        replay(messages, retained=0)


def test_replay_rebuilds_history() -> None:
    messages: list[dict[str, object]] = [
        {"type": "recover", "generation": 1, "checkpoint": None},
        {"type": "trigger", "checkpoint": 1, "generation": 1},
        {"type": "complete", "checkpoint": 1, "generation": 1},
        {"type": "trigger", "checkpoint": 2, "generation": 1},
        {"type": "complete", "checkpoint": 2, "generation": 1},
        {"type": "trigger", "checkpoint": 3, "generation": 1},
        {"type": "recover", "generation": 2, "checkpoint": 2},
        {"type": "trigger", "checkpoint": 4, "generation": 2},
        {"type": "complete", "checkpoint": 4, "generation": 2},
        {"type": "trigger", "checkpoint": 5, "generation": 2},
        {"type": "abort", "checkpoint": 5, "generation": 2},
        {"type": "heartbeat", "worker": "w0", "generation": 2},
        # Late messages of a zombie worker of generation 1 change nothing.
        {"type": "ack", "checkpoint": 3, "generation": 1, "task": "map-0"},
        {"type": "heartbeat", "worker": "w1", "generation": 1},
    ]
    history = replay(messages, retained=2)
    assert history == History(generation=2, max_checkpoint=5, completed=(2, 4))
    coordinator = Coordinator(TASKS, CONFIG, history)
    [recover] = coordinator.start(100.0)
    assert isinstance(recover, Recover)
    assert (recover.generation, recover.checkpoint) == (3, 4)
    # Ids written before Lamport ids (1, 2, ...) read as plain integers; the next is above.
    assert coordinator.handle(Tick(101.0)) == [Trigger(next_after(5, COORDINATOR), 3)]


@settings(max_examples=200, deadline=None)
@given(
    configs(),
    st.lists(st.sampled_from(["tick", "tick", "acks", "acks", "decline", "lost"]), max_size=40),
)
def test_a_restarted_coordinator_continues_where_the_control_topic_ends(
    config: CoordinatorConfig, script: list[str]
) -> None:
    coordinator = Coordinator(TASKS, config)
    now = 0.0
    log = coordinator.start(now)
    for step in script:
        now += 0.5
        pending = sorted(coordinator.pending)
        if step == "tick":
            log += coordinator.handle(Tick(now))
        elif step == "acks" and pending:
            log += feed(coordinator, acks(pending[-1], coordinator.generation, now))
        elif step == "decline" and pending:
            log += coordinator.handle(
                DeclineReceived(pending[0], coordinator.generation, "map-0", "x", now)
            )
        elif step == "lost":
            log += coordinator.handle(WorkerLost("w0", "exit", now))
    messages = [m for c in log if (m := to_message(c)) is not None]
    max_id = max((c.checkpoint for c in log if isinstance(c, Trigger)), default=0)

    history = replay(messages, config.retained)
    assert history.generation == coordinator.generation
    assert history.max_checkpoint == max_id
    assert list(history.completed) == coordinator.completed

    restarted = Coordinator(TASKS, config, history)
    [recover] = restarted.start(now)
    assert isinstance(recover, Recover)
    assert recover.generation == coordinator.generation + 1
    assert recover.checkpoint == coordinator.latest_completed
    trigger = restarted.handle(Tick(now + config.interval))
    assert trigger == [Trigger(next_after(max_id, COORDINATOR), recover.generation)]


# -- damaged checkpoints -------------------------------------------------------


def completed_history(*ids: int) -> History:
    return History(generation=1, max_checkpoint=max(ids), completed=ids)


def test_a_damaged_restore_point_falls_back_to_the_newest_remaining_one() -> None:
    coordinator = Coordinator(TASKS, CONFIG, completed_history(3, 4))
    [recover] = coordinator.start(0.0)
    assert recover == Recover(2, 4, "job started")
    [fallback] = coordinator.handle(CheckpointDamaged(4, "meta.json unreadable", 1.0))
    assert fallback == Recover(3, 3, "checkpoint 4 is damaged: meta.json unreadable")
    assert coordinator.completed == [3]
    # Ids keep increasing past the damaged one.
    assert coordinator.handle(Tick(2.0)) == [Trigger(next_after(4, COORDINATOR), 3)]


def test_damage_found_before_start_changes_the_restore_point_silently() -> None:
    coordinator = Coordinator(TASKS, CONFIG, completed_history(3, 4))
    assert coordinator.handle(CheckpointDamaged(4, "missing", 0.0)) == []
    assert coordinator.start(0.0) == [Recover(2, 3, "job started")]


def test_damage_to_an_older_checkpoint_only_drops_it() -> None:
    coordinator = started(history=completed_history(3, 4))
    assert coordinator.handle(CheckpointDamaged(3, "x", 1.0)) == []
    assert coordinator.completed == [4]
    assert coordinator.handle(CheckpointDamaged(3, "x", 1.0)) == []  # reported twice
    assert coordinator.handle(CheckpointDamaged(99, "x", 1.0)) == []  # never completed


def test_no_intact_checkpoint_left_halts_instead_of_starting_over() -> None:
    coordinator = Coordinator(TASKS, CONFIG, completed_history(3, 4))
    assert coordinator.handle(CheckpointDamaged(4, "a.sst missing", 0.0)) == []
    assert coordinator.handle(CheckpointDamaged(3, "chk-3 missing", 0.0)) == [
        Halt("checkpoint 3 is damaged: chk-3 missing; no older completed checkpoint remains")
    ]
    running = started(history=completed_history(4))
    [halt] = running.handle(CheckpointDamaged(4, "bad", 1.0))
    assert isinstance(halt, Halt)


def test_replay_forgets_checkpoints_before_a_fresh_start_and_keeps_ids_increasing() -> None:
    identity = {
        "format": 2,
        "parallelism": [2, 2],
        "sources": ["kafka:b"],
        "sinks": ["kafka:out"],
        "operators": ["s1.process:count"],
    }
    messages: list[dict[str, object]] = [
        {"type": "recover", "generation": 1, "checkpoint": None},
        {"type": "complete", "checkpoint": 1, "generation": 1},
        {"type": "complete", "checkpoint": 2, "generation": 1},
        {"type": "recover", "generation": 2, "checkpoint": None, "fresh": True},
        {"type": "trigger", "checkpoint": 3, "generation": 2},
    ]
    history = replay(messages, retained=3)
    assert history == History(generation=2, max_checkpoint=3, completed=(), identity=None)
    messages.append({"type": "complete", "checkpoint": 3, "generation": 2, "identity": identity})
    history = replay(messages, retained=3)
    assert history.completed == (3,)
    assert history.identity is not None
    assert history.identity.sources == ("kafka:b",)
    malformed = [{"type": "complete", "checkpoint": 4, "generation": 2, "identity": {"x": 1}}]
    assert replay(messages + malformed, retained=3).identity is None
