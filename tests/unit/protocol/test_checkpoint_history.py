"""What became of each checkpoint (`kstream.protocol.checkpoint_history`), from control messages."""

from __future__ import annotations

from hypothesis import settings
from hypothesis.stateful import invariant
from test_coordinator import CoordinatorMachine

from kstream.protocol.checkpoint_history import CheckpointRecord
from kstream.protocol.checkpoint_history import CheckpointTracker as MessageTracker
from kstream.protocol.checkpoint_history import checkpoint_history as history_of_messages
from kstream.protocol.messages import decode_all


def checkpoint_history(wire: list[dict[str, object]]) -> list[CheckpointRecord]:
    """`checkpoint_history` of control records in their wire form (JSON objects)."""
    return history_of_messages(decode_all(wire))


class CheckpointTracker(MessageTracker):
    """The tracker, fed control records in their wire form."""

    def observe(self, wire: dict[str, object]) -> list[CheckpointRecord]:  # type: ignore[override]
        return [r for m in decode_all([wire]) for r in MessageTracker.observe(self, m)]


def trigger(n: int, g: int, t: float = 100.0) -> dict[str, object]:
    return {"type": "trigger", "checkpoint": n, "generation": g, "time": t}


def recover(g: int, n: int | None, reason: str) -> dict[str, object]:
    return {"type": "recover", "generation": g, "checkpoint": n, "reason": reason}


def labels(messages: list[dict[str, object]]) -> dict[int, str]:
    return {r.checkpoint: r.label for r in checkpoint_history(messages)}


def test_each_ending_has_its_status() -> None:
    history = [
        recover(1, None, "job started"),
        trigger(1, 1),
        {"type": "complete", "checkpoint": 1, "generation": 1, "duration_s": 0.5, "size": 10},
        trigger(2, 1),
        {"type": "abort", "checkpoint": 2, "generation": 1, "reason": "not complete within 60s"},
        trigger(3, 1),
    ]
    assert labels(history) == {
        1: "completed",
        2: "aborted: not complete within 60s",
        3: "in progress",
    }
    [first, *_] = checkpoint_history(history)
    assert first == CheckpointRecord(1, 1, "completed", "", 100.0, 0.5, None, 10)


def test_a_recovery_rolls_back_what_was_pending_with_its_cause() -> None:
    history = [
        recover(1, None, "job started"),
        trigger(1, 1),
        trigger(2, 1),
        recover(2, None, "worker w1 lost: killed by signal 9"),
        trigger(3, 2),
    ]
    assert labels(history) == {
        1: "aborted: rolled back in generation 2 (worker w1 lost: killed by signal 9)",
        2: "aborted: rolled back in generation 2 (worker w1 lost: killed by signal 9)",
        3: "in progress",
    }


def test_a_restarted_job_rolls_back_what_the_last_run_left_pending() -> None:
    history = [recover(1, None, "job started"), trigger(1, 1), recover(2, None, "job started")]
    assert labels(history) == {1: "aborted: rolled back in generation 2 (job started)"}


def test_only_the_newest_generation_can_be_in_progress() -> None:
    # A trigger of an older generation with no recover after it (a history cut short).
    history = [trigger(4, 1), {"type": "heartbeat", "worker": "w0", "generation": 3}]
    assert labels(history) == {4: "aborted: superseded by generation 3"}


def test_endings_without_a_trigger_and_malformed_messages() -> None:
    history = [
        {"type": "complete", "checkpoint": 7, "generation": 2},
        {"type": "abort", "checkpoint": "x", "generation": 2},
        {"type": "trigger", "generation": 2},
        {"type": "recover", "reason": "no generation"},
        {"type": "ack", "checkpoint": 8, "generation": 2, "task": "s0-0"},
        {"no": "type"},
    ]
    [record] = checkpoint_history(history)
    assert (record.checkpoint, record.status, record.triggered_at) == (7, "completed", None)


def test_the_tracker_returns_what_each_message_ended() -> None:
    tracker = CheckpointTracker()
    assert tracker.observe(recover(1, None, "job started")) == []
    assert tracker.observe(trigger(1, 1)) == []
    assert tracker.observe(trigger(2, 1)) == []
    ended = tracker.observe(recover(2, None, "worker w0 silent for more than 15s"))
    assert [(r.checkpoint, r.status) for r in ended] == [(1, "aborted"), (2, "aborted")]
    assert tracker.open() == []


class HistoryAgreesWithTheCoordinator(CoordinatorMachine):
    """Random coordinator runs: the history read from its control topic tells the truth."""

    @invariant()
    def history_agrees(self) -> None:
        records = checkpoint_history(self.control)
        triggered = {m["checkpoint"] for m in self.control if m["type"] == "trigger"}
        completed = {m["checkpoint"] for m in self.control if m["type"] == "complete"}
        assert {r.checkpoint for r in records} == triggered | completed
        assert {r.checkpoint for r in records if r.status == "completed"} == completed
        # In progress is exactly what the live coordinator still waits for.
        in_progress = {r.checkpoint for r in records if r.status == "in progress"}
        assert in_progress == set(self.coordinator.pending)
        # Everything else ended aborted: by an abort message or by a rollback.
        aborted = {m["checkpoint"] for m in self.control if m["type"] == "abort"}
        rolled_back = {r.checkpoint for r in records if r.reason.startswith("rolled back")}
        others = {r.checkpoint for r in records} - completed - in_progress
        assert others == aborted | rolled_back


HistoryAgreesWithTheCoordinator.TestCase.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None
)
test_history_agrees_with_the_coordinator = HistoryAgreesWithTheCoordinator.TestCase
