"""An idle job is checkpointed rarely ({ref}`coordinator-idle`): quiet acks, wake-ups."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_coordinator import TASKS, started

from kstream.protocol.coordination import (
    AckReceived,
    Complete,
    CoordinatorConfig,
    Heartbeat,
    Tick,
    Trigger,
    WorkerLost,
)
from kstream.protocol.coordinator import Coordinator

CONFIG = CoordinatorConfig(
    interval=1.0, timeout=5.0, retained=2, liveness_timeout=1e9, idle_after=3, idle_interval=10.0
)


def checkpoint(co: Coordinator, now: float, quiet: frozenset[str] = TASKS) -> int:
    """Trigger the next checkpoint at `now` (which must be due) and ack it from
    every task, `quiet` ones quietly; return its id."""
    [trigger] = co.handle(Tick(now))
    assert isinstance(trigger, Trigger)
    out = []
    for task in sorted(TASKS):
        out += co.handle(
            AckReceived(trigger.checkpoint, co.generation, task, now, quiet=task in quiet)
        )
    assert type(out[0]) is Complete  # (then a Discard of checkpoints no longer retained)
    return trigger.checkpoint


def test_three_quiet_completions_make_the_job_idle() -> None:
    co = started(CONFIG)
    for i in range(1, 4):
        assert not co.idle
        checkpoint(co, float(i))
    assert co.idle
    # Triggers now come every idle_interval, not every interval.
    assert co.next_trigger_in(3.0) == 10.0
    assert co.handle(Tick(12.9)) == []
    checkpoint(co, 13.0)
    assert co.idle


def test_one_busy_ack_restarts_the_count() -> None:
    co = started(CONFIG)
    checkpoint(co, 1.0)
    checkpoint(co, 2.0)
    checkpoint(co, 3.0, quiet=TASKS - {"sum-0"})
    checkpoint(co, 4.0)
    checkpoint(co, 5.0)
    assert not co.idle
    checkpoint(co, 6.0)
    assert co.idle


def test_a_wake_up_ends_idleness_and_the_interval_counts_from_the_last_trigger() -> None:
    co = started(CONFIG)
    for i in range(1, 4):
        checkpoint(co, float(i))
    assert co.idle
    assert co.handle(Heartbeat("w0", co.generation, 7.5, woke=3)) == []
    assert not co.idle
    # The last trigger was at 3.0: due at once, not an interval after the wake-up.
    assert co.next_trigger_in(7.5) == 0.0
    checkpoint(co, 7.5)


def test_a_wake_up_while_a_checkpoint_is_pending_keeps_it_from_counting_quiet() -> None:
    co = started(CONFIG)
    checkpoint(co, 1.0)
    checkpoint(co, 2.0)
    [trigger] = co.handle(Tick(3.0))
    assert isinstance(trigger, Trigger)
    co.handle(AckReceived(trigger.checkpoint, 1, "map-0", 3.1, quiet=True))
    # w1 acked quietly, then read a record: its wake-up comes before the last ack.
    co.handle(AckReceived(trigger.checkpoint, 1, "map-1", 3.1, quiet=True))
    co.handle(Heartbeat("w1", 1, 3.2, woke=trigger.checkpoint))
    co.handle(AckReceived(trigger.checkpoint, 1, "sum-0", 3.3, quiet=True))
    assert co.latest_completed == trigger.checkpoint
    assert not co.idle
    assert co.next_trigger_in(3.3) == pytest.approx(0.7)


def test_a_heartbeat_without_a_wake_up_changes_nothing() -> None:
    co = started(CONFIG)
    for i in range(1, 4):
        checkpoint(co, float(i))
    co.handle(Heartbeat("w0", co.generation, 4.0))
    assert co.idle


def test_a_rollback_ends_idleness() -> None:
    co = started(CONFIG)
    for i in range(1, 4):
        checkpoint(co, float(i))
    co.handle(WorkerLost("w1", "exit 9", 4.0))
    assert not co.idle


def test_a_savepoint_request_is_not_held_back_by_idleness() -> None:
    co = started(CONFIG)
    for i in range(1, 4):
        checkpoint(co, float(i))
    co.request_checkpoint()
    assert co.next_trigger_in(3.5) == 0.0
    checkpoint(co, 3.5)


def test_idle_after_zero_never_idles() -> None:
    co = started(CoordinatorConfig(interval=1.0, liveness_timeout=1e9, idle_after=0))
    for i in range(1, 10):
        checkpoint(co, float(i))
    assert not co.idle


def test_an_idle_interval_shorter_than_the_interval_changes_nothing() -> None:
    config = CoordinatorConfig(interval=30.0, liveness_timeout=1e9, idle_interval=10.0)
    co = started(config)
    for i in range(1, 4):
        checkpoint(co, 30.0 * i)
    assert co.idle
    assert co.next_trigger_in(90.0) == 30.0


# One step of a run: a checkpoint with these tasks busy (others quiet), with or
# without a wake-up while it is pending; or a wake-up on its own.
Step = tuple[str, frozenset[str], bool]
steps = st.lists(
    st.one_of(
        st.tuples(
            st.just("checkpoint"),
            st.frozensets(st.sampled_from(sorted(TASKS))),
            st.booleans(),
        ),
        st.tuples(st.just("woke"), st.just(frozenset[str]()), st.just(False)),
    ),
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(steps, st.integers(min_value=0, max_value=4))
def test_idle_exactly_when_the_last_completions_were_all_quiet(
    run: list[Step], idle_after: int
) -> None:
    """Against a model: idle iff at least `idle_after` (> 0) completions in a row had
    only quiet acks and no wake-up during or after them; the next trigger is then
    `idle_interval` after the last one, otherwise `interval` after it."""
    config = CoordinatorConfig(
        interval=1.0, timeout=5.0, liveness_timeout=1e9, idle_after=idle_after, idle_interval=7.0
    )
    co = started(config)
    quiet_run = 0
    now = 0.0
    last_trigger = 0.0
    for kind, busy, woke_during in run:
        if kind == "woke":
            co.handle(Heartbeat("w0", co.generation, now, woke=1))
            quiet_run = 0
        else:
            now += co.next_trigger_in(now) or 0.0
            [trigger] = co.handle(Tick(now))
            assert isinstance(trigger, Trigger)
            last_trigger = now
            for i, task in enumerate(sorted(TASKS)):
                if woke_during and i == 1:
                    co.handle(Heartbeat("w1", co.generation, now, woke=trigger.checkpoint))
                co.handle(
                    AckReceived(
                        trigger.checkpoint, co.generation, task, now, quiet=task not in busy
                    )
                )
            assert co.latest_completed == trigger.checkpoint
            quiet_run = 0 if busy or woke_during else quiet_run + 1
        idle = idle_after > 0 and quiet_run >= idle_after
        assert co.idle == idle
        wait = 7.0 if idle else 1.0
        assert co.next_trigger_in(now) == pytest.approx(max(0.0, last_trigger + wait - now))
