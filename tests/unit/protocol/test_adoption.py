"""A restarted coordinator adopts a generation whose workers are alive."""

from __future__ import annotations

from kstream.protocol.coordination import (
    Abort,
    CoordinatorConfig,
    Heartbeat,
    History,
    Recover,
    Tick,
    Trigger,
)
from kstream.protocol.coordinator import Coordinator
from kstream.protocol.messages import (
    Aborted,
    Acked,
    Completed,
    ControlMessage,
    Recovered,
    Triggered,
    WorkerAlive,
    WorkerFailed,
)
from kstream.protocol.resume import Adopt, decide_adoption

WORKERS = frozenset({"w0", "w1"})
T = 1000.0


def _log(*extra: ControlMessage, beat_at: float = T) -> list[ControlMessage]:
    return [
        Recovered(1, None),
        Recovered(2, 5),
        Triggered(7, 2),
        Acked(7, 2, "a-0"),
        Completed(7, 2),
        Triggered(9, 2),
        Triggered(11, 2),
        Aborted(11, 2, "declined"),
        WorkerAlive("w0", 2, time=beat_at, process="p0"),
        WorkerAlive("w1", 2, time=beat_at - 1, process="p1"),
        *extra,
    ]


def test_alive_workers_are_adopted_with_in_flight_checkpoints_to_abort() -> None:
    assert decide_adoption(_log(), WORKERS, T + 2, 6.0) == Adopt(
        2, (9,), (("w0", "p0"), ("w1", "p1"))
    )


def test_a_silent_worker_means_rollback() -> None:
    assert decide_adoption(_log(), WORKERS, T + 10, 6.0) is None
    # A heartbeat of an older generation is no sign of this one.
    log = [*_log()[:-1], WorkerAlive("w1", 1, time=T, process="p1")]
    assert decide_adoption(log, WORKERS, T + 1, 6.0) is None


def test_a_failure_in_the_generation_means_rollback() -> None:
    assert decide_adoption(_log(WorkerFailed("w0", "boom")), WORKERS, T, 6.0) is None
    # One before the generation opened is settled.
    log = [WorkerFailed("w0", "boom"), *_log()]
    assert decide_adoption(log, WORKERS, T, 6.0) is not None


def test_nothing_to_adopt_before_a_first_generation() -> None:
    assert decide_adoption([], WORKERS, T, 6.0) is None


def test_the_adopting_coordinator_aborts_then_carries_on_in_the_generation() -> None:
    config = CoordinatorConfig(interval=1.0, timeout=60.0)
    c = Coordinator(frozenset({"a-0", "a-1"}), config, History(2, 11, (7,)), WORKERS)
    assert c.adopt(50.0, (9,), (("w0", "p0"), ("w1", "p1"))) == [
        Abort(9, 2, "coordinator restarted")
    ]
    assert c.generation == 2
    assert c.handle(Heartbeat("w0", 2, 50.5, process="p0")) == []
    commands = c.handle(Tick(51.5))
    assert [type(x) for x in commands] == [Trigger]
    assert commands[0].checkpoint > 11
    # A new process for a worker it adopted is a second claim.
    [recover] = c.handle(Heartbeat("w1", 2, 52.0, process="other"))
    assert isinstance(recover, Recover)
    assert recover.generation == 3
