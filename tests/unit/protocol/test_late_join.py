"""A worker process never joins a generation another process of its index runs.

A supervisor may restart a worker before the coordinator declared its
predecessor lost, or a second process may claim a running index: the new
process waits that generation out (`WorkerRecovery.waiting`), says so in its
heartbeats, and the coordinator opens a new generation for it at once.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kstream.protocol.coordination import CoordinatorConfig, Heartbeat, History, Recover
from kstream.protocol.coordinator import Coordinator
from kstream.protocol.messages import (
    Completed,
    ControlMessage,
    Recovered,
    Triggered,
    WorkerAlive,
    decode,
)
from kstream.protocol.recovery import Restore, WorkerRecovery
from kstream.protocol.resume import decide_adoption

TASKS = frozenset({"a-0", "a-1"})
WORKERS = frozenset({"w0", "w1"})
T = 1000.0


def _new(process: str = "new") -> WorkerRecovery:
    return WorkerRecovery(worker="w0", process=process)


def _catch_up(sm: WorkerRecovery, backlog: list[ControlMessage]) -> list[object]:
    for msg in backlog:
        assert sm.read(msg) == []
    return list(sm.caught_up())


# -- the worker's decision --------------------------------------------------------


def test_a_process_waits_out_a_generation_its_predecessor_runs() -> None:
    sm = _new()
    backlog: list[ControlMessage] = [
        Recovered(3, 7),
        WorkerAlive("w0", 3, time=T, process="old", restoring=True),
        Triggered(9, 3),
    ]
    assert _catch_up(sm, backlog) == []
    assert not sm.joined
    assert sm.waiting == 3
    assert sm.heartbeat_generation == 3
    # Nothing of the generation waited out is acted on, nor a stale `recover` of it.
    assert sm.read(Completed(9, 3)) == []
    assert sm.read(Recovered(3, 7)) == []
    assert sm.read(Recovered(2, 5)) == []
    assert sm.read(Recovered(4, 9)) == [Restore(4, 9)]
    assert sm.joined
    assert sm.waiting == 0
    assert sm.heartbeat_generation == 4


def test_a_process_joins_when_no_other_process_of_its_index_runs_the_generation() -> None:
    backlogs: list[list[ControlMessage]] = [
        [Recovered(3, 7)],
        # An earlier generation's process: the coordinator opened a new one since.
        [Recovered(2, 5), WorkerAlive("w0", 2, process="old"), Recovered(3, 7)],
        # Another worker index, this very process, one without an id, one waiting.
        [
            Recovered(3, 7),
            WorkerAlive("w1", 3, process="other"),
            WorkerAlive("w0", 3, process="new"),
            WorkerAlive("w0", 3),
            WorkerAlive("w0", 3, process="third", waiting=True),
            WorkerAlive("w0", 0, process="starting"),
        ],
    ]
    for backlog in backlogs:
        sm = _new()
        assert _catch_up(sm, backlog) == [Restore(3, 7)], backlog
        assert sm.waiting == 0


def test_without_a_name_a_process_never_waits() -> None:
    sm = WorkerRecovery()
    assert _catch_up(sm, [Recovered(3, 7), WorkerAlive("w0", 3, process="old")]) == [Restore(3, 7)]


MESSAGES = st.one_of(
    st.builds(Recovered, st.integers(1, 4), st.none() | st.integers(1, 20)),
    st.builds(
        WorkerAlive,
        st.sampled_from(["w0", "w1"]),
        st.integers(0, 4),
        process=st.sampled_from(["old", "new", "third", None, ""]),
        waiting=st.booleans(),
        restoring=st.booleans(),
    ),
    st.builds(Triggered, st.integers(1, 20), st.integers(1, 4)),
)


@given(st.lists(MESSAGES, max_size=12), st.lists(MESSAGES, max_size=12))
def test_joins_exactly_when_no_other_process_runs_the_newest_generation(
    backlog: list[ControlMessage], live: list[ControlMessage]
) -> None:
    sm = _new()
    actions = _catch_up(sm, backlog)
    recovers = [m for m in backlog if isinstance(m, Recovered)]
    newest = max((m.generation for m in recovers), default=0)
    taken = {
        m.generation
        for m in backlog
        if isinstance(m, WorkerAlive)
        and m.worker == "w0"
        and m.process not in (None, "", "new")
        and not m.waiting
    }
    if newest == 0:
        assert actions == []
        assert sm.waiting == 0
        assert not sm.joined
    elif newest in taken:
        assert actions == []
        assert sm.waiting == newest
        assert not sm.joined
    else:
        assert actions[:1] == [Restore(newest, _last_of(recovers, newest).checkpoint)]
        assert sm.generation == newest
        assert sm.waiting == 0
    # Live, a waiting process restores only a generation newer than the one waited out.
    floor = max(sm.generation, sm.waiting)
    for msg in live:
        for a in sm.read(msg):
            if isinstance(a, Restore):
                assert isinstance(msg, Recovered)
                assert a.generation == msg.generation > floor
                floor = a.generation
        assert sm.waiting == 0 or not sm.joined


def _last_of(recovers: list[Recovered], generation: int) -> Recovered:
    return [m for m in recovers if m.generation == generation][-1]


# -- the coordinator's answer ---------------------------------------------------


def _started(generation: int = 3) -> Coordinator:
    c = Coordinator(
        TASKS,
        CoordinatorConfig(interval=1.0, timeout=60.0),
        History(generation - 1, 0, ()),
        workers=WORKERS,
    )
    c.start(0.0)
    assert c.generation == generation
    return c


def test_a_waiting_process_gets_a_new_generation_at_once_keeping_it() -> None:
    c = _started()
    assert c.handle(Heartbeat("w0", 3, 1.0, process="old")) == []
    [recover] = c.handle(Heartbeat("w0", 3, 1.5, process="new", waiting=True))
    assert isinstance(recover, Recover)
    assert recover.generation == 4
    assert recover.kept == (("w0", "new"),)
    # Its next waiting heartbeats (sent before it read the `recover`) change nothing.
    assert c.handle(Heartbeat("w0", 3, 2.0, process="new", waiting=True)) == []
    assert c.handle(Heartbeat("w0", 4, 2.5, process="new")) == []
    assert c.generation == 4


def test_a_waiting_process_is_heard_even_when_no_process_was_known() -> None:
    c = _started()
    [recover] = c.handle(Heartbeat("w0", 3, 1.0, process="new", waiting=True))
    assert isinstance(recover, Recover)
    assert recover.kept == (("w0", "new"),)
    # Without an id it cannot be kept: nothing happens.
    c = _started()
    assert c.handle(Heartbeat("w0", 3, 1.0, waiting=True)) == []


@given(st.integers(1, 5), st.integers(0, 6))
def test_the_generation_a_process_waits_out_never_outlives_its_claim(
    predecessor: int, restarts: int
) -> None:
    """A backlog in which the predecessor runs generation `predecessor`, then
    `restarts` quick restarts of the worker (each a new process that waits):
    whatever the coordinator's generation, the last process gets one it joins,
    named as kept, and no generation is opened twice for one claim."""
    c = _started(predecessor)
    backlog: list[ControlMessage] = [
        Recovered(predecessor, None),
        WorkerAlive("w0", predecessor, process="p0"),
    ]
    c.handle(Heartbeat("w0", predecessor, 0.5, process="p0"))
    for i in range(1, restarts + 2):
        sm = _new(f"p{i}")
        actions = _catch_up(sm, backlog)
        if sm.joined:
            assert actions[:1] == [Restore(c.generation, None)]
            break
        assert sm.waiting == c.generation
        before = c.generation
        commands = c.handle(
            Heartbeat("w0", sm.heartbeat_generation, float(i), process=f"p{i}", waiting=True)
        )
        [recover] = commands
        assert isinstance(recover, Recover)
        assert recover.generation == before + 1
        assert recover.kept == (("w0", f"p{i}"),)
        told = Recovered(recover.generation, recover.checkpoint, kept=recover.kept)
        assert sm.read(told) == [Restore(recover.generation, None)]
        backlog += [told, WorkerAlive("w0", recover.generation, process=f"p{i}")]
        c.handle(Heartbeat("w0", recover.generation, float(i) + 0.5, process=f"p{i}"))


# -- adoption and the wire ------------------------------------------------------


def test_a_restarted_coordinator_does_not_adopt_while_a_process_waits() -> None:
    log: list[ControlMessage] = [
        Recovered(2, None),
        WorkerAlive("w0", 2, time=T, process="p0"),
        WorkerAlive("w1", 2, time=T, process="p1"),
    ]
    assert decide_adoption(log, WORKERS, T + 1, 6.0) is not None
    waiting = WorkerAlive("w0", 2, time=T + 0.5, process="p2", waiting=True)
    assert decide_adoption([*log, waiting], WORKERS, T + 1, 6.0) is None
    # One that waited long ago (and gave up) does not stop an adoption.
    gave_up = WorkerAlive("w0", 2, time=T - 10, process="p2", waiting=True)
    assert decide_adoption([*log, gave_up], WORKERS, T + 1, 6.0) is not None


def test_a_waiting_heartbeat_is_not_the_worker_running() -> None:
    # Only the waiting process's heartbeats are recent: the worker is not alive.
    log: list[ControlMessage] = [
        Recovered(2, None),
        WorkerAlive("w0", 2, time=T - 30, process="p0"),
        WorkerAlive("w1", 2, time=T, process="p1"),
        WorkerAlive("w0", 2, time=T - 20, process="p2", waiting=True),
    ]
    assert decide_adoption(log, WORKERS, T, 6.0) is None


def test_waiting_travels_on_the_wire_only_when_set() -> None:
    m = WorkerAlive("w0", 3, time=1.0, process="p", waiting=True)
    assert m.to_dict()["waiting"] is True
    assert decode(m.to_dict()) == m
    assert "waiting" not in WorkerAlive("w0", 3, process="p").to_dict()
    assert decode({**WorkerAlive("w0", 3).to_dict(), "waiting": "yes"}) == WorkerAlive("w0", 3)
