"""The worker-side recovery state machine: joins, generations, deferred messages, interrupts."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from kstream.protocol.messages import (
    Aborted,
    Acked,
    Completed,
    ControlMessage,
    Initiated,
    Recovered,
    Triggered,
    WorkerAlive,
)
from kstream.protocol.recovery import (
    Abort,
    Announced,
    Commit,
    Interrupt,
    Restore,
    Trigger,
    Where,
    WorkerAction,
    WorkerRecovery,
)


def joined(generation: int = 1, checkpoint: int | None = None) -> WorkerRecovery:
    sm = WorkerRecovery()
    sm.read(Recovered(generation, checkpoint))
    assert sm.caught_up() == [Restore(generation, checkpoint)]
    return sm


# -- examples -------------------------------------------------------------------


def test_a_worker_joins_the_latest_generation_of_the_backlog_and_replays_what_follows() -> None:
    sm = WorkerRecovery()
    for msg in [
        Recovered(1, None),
        Triggered(generation=1, checkpoint=1),
        Completed(generation=1, checkpoint=1),
        Recovered(2, 1),
        Triggered(
            generation=2, checkpoint=2
        ),  # sent while this process was starting: it must act on it
        WorkerAlive("w0", 2),
    ]:
        assert sm.read(msg) == []
    assert not sm.joined
    assert sm.caught_up() == [Restore(2, 1), Trigger(2)]
    assert sm.generation == 2
    assert sm.caught_up() == []  # once


def test_a_stale_recover_after_a_newer_one_does_not_take_a_joining_worker_back() -> None:
    sm = WorkerRecovery()
    for msg in [
        Recovered(1, None),
        Recovered(2, 1),
        Recovered(1, None),  # left by a stale writer after the newer generation
        Triggered(generation=2, checkpoint=2),
        Triggered(generation=1, checkpoint=3),
    ]:
        assert sm.read(msg) == []
    assert sm.caught_up() == [Restore(2, 1), Trigger(2)]
    assert sm.generation == 2


def test_without_a_generation_in_the_backlog_the_next_recovered_joins() -> None:
    sm = WorkerRecovery()
    sm.read(Triggered(generation=1, checkpoint=1))
    assert sm.caught_up() == []
    assert sm.read(Completed(generation=1, checkpoint=1)) == []  # no generation joined yet
    assert sm.read(Recovered(3, 2)) == [Restore(3, 2)]
    assert sm.read(Triggered(generation=3, checkpoint=3)) == [Trigger(3)]


def test_the_main_loop_acts_on_its_generation_only() -> None:
    sm = joined(2, 5)
    assert sm.read(Triggered(generation=1, checkpoint=6)) == []
    assert sm.read(Triggered(generation=2, checkpoint=6)) == [Trigger(6)]
    assert sm.read(Completed(generation=2, checkpoint=6)) == [Commit(6)]
    assert sm.read(Aborted(generation=2, checkpoint=7)) == [Abort(7)]
    assert sm.read(Recovered(2, 5)) == []  # not newer
    assert sm.read(Acked(checkpoint=6, generation=2, task="s0-0")) == []
    # A source's own snapshot, announced: the other sources hold theirs.
    assert sm.read(Initiated(8, 2, "s3-0")) == [Announced(8)]
    assert sm.read(Initiated(9, 1, "s3-0")) == []  # a generation left
    assert sm.read(Recovered(3, 6)) == [Restore(3, 6)]
    assert sm.read(Completed(generation=2, checkpoint=7)) == []


def test_a_sink_wait_frees_producers_at_once_and_defers_the_rest() -> None:
    sm = joined()
    assert sm.read(Triggered(generation=1, checkpoint=2), Where.SINK_WAIT) == []
    assert sm.read(Completed(generation=1, checkpoint=1), Where.SINK_WAIT) == [Commit(1)]
    assert sm.read(Aborted(generation=1, checkpoint=2), Where.SINK_WAIT) == [Abort(2)]
    assert sm.deferred == (Triggered(generation=1, checkpoint=2),)
    assert sm.resume() == [Trigger(2)]
    assert sm.deferred == ()


def test_a_rollback_during_a_sink_wait_interrupts_and_keeps_the_rest_of_the_batch() -> None:
    sm = joined()
    batch: list[ControlMessage] = [
        Recovered(2, 1),
        Triggered(generation=2, checkpoint=2),
        Completed(generation=1, checkpoint=1),
    ]
    actions = [a for m in batch for a in sm.read(m, Where.SINK_WAIT)]
    # The old generation is over: its completion after the recovery is not acted on.
    assert actions == [Interrupt(2)]
    assert sm.resume() == [Restore(2, 1), Trigger(2)]


def test_main_reads_act_on_deferred_messages_first() -> None:
    sm = joined()
    sm.read(Triggered(generation=1, checkpoint=2), Where.SINK_WAIT)
    assert sm.read(Triggered(generation=1, checkpoint=3)) == [Trigger(2), Trigger(3)]


def test_a_stopping_worker_commits_what_completed_and_nothing_after_a_rollback() -> None:
    sm = joined()
    assert sm.read(Triggered(generation=1, checkpoint=2), Where.STOPPING) == []
    assert sm.read(Completed(generation=1, checkpoint=1), Where.STOPPING) == [Commit(1)]
    assert sm.read(Aborted(generation=1, checkpoint=2), Where.STOPPING) == [Abort(2)]
    assert sm.read(Recovered(2, 1), Where.STOPPING) == []
    assert sm.read(Completed(generation=2, checkpoint=3), Where.STOPPING) == []
    assert sm.generation == 1


# -- properties -------------------------------------------------------------------


@st.composite
def control_topics(draw: st.DrawFn) -> list[ControlMessage]:
    """What a coordinator writes: generations, checkpoints of each, and noise."""
    msgs: list[ControlMessage] = []
    generation, checkpoint, completed = 0, 0, None
    for _ in range(draw(st.integers(0, 40))):
        kind = draw(st.sampled_from(["recover", "trigger", "complete", "abort", "noise", "stale"]))
        if kind == "recover" or generation == 0:
            generation += draw(st.integers(1, 2))
            msgs.append(Recovered(generation, completed))
        elif kind == "trigger":
            checkpoint += 1
            msgs.append(Triggered(checkpoint, generation))
        elif kind == "complete" and checkpoint:
            completed = checkpoint
            msgs.append(Completed(checkpoint, generation))
        elif kind == "abort" and checkpoint:
            msgs.append(Aborted(checkpoint, generation))
        elif kind == "noise":
            msgs.append(
                draw(
                    st.sampled_from(
                        [Acked(checkpoint, generation, "s1-0"), WorkerAlive("w0", generation)]
                    )
                )
            )
        elif kind == "stale" and generation > 1:
            old = draw(st.integers(1, generation - 1))
            msgs.append(
                draw(
                    st.sampled_from(
                        [
                            Triggered(checkpoint + 1, old),
                            Completed(checkpoint, old),
                            Aborted(checkpoint, old),
                            Recovered(old, None),
                        ]
                    )
                )
            )
    return msgs


def reference(msgs: list[ControlMessage], backlog: int) -> list[tuple[int, WorkerAction]]:
    """Every message read in the main loop, the simplest reading of the rules.

    Returns (generation, action) pairs: the generation whose subtasks the action is for.
    """
    start, generation = 0, 0
    newest: Recovered | None = None
    out: list[tuple[int, WorkerAction]] = []
    for i, m in enumerate(msgs[:backlog]):
        # A joining worker takes the newest generation (a stale recover comes later).
        if isinstance(m, Recovered) and m.generation >= generation:
            start, generation, newest = i + 1, m.generation, m
    if newest is not None:
        out.append((generation, Restore(generation, newest.checkpoint)))
    for m in msgs[start if generation else backlog :]:
        if isinstance(m, Recovered) and m.generation > generation:
            generation = m.generation
            out.append((generation, Restore(generation, m.checkpoint)))
        elif generation and getattr(m, "generation", None) == generation:
            if isinstance(m, Triggered):
                out.append((generation, Trigger(m.checkpoint)))
            elif isinstance(m, Completed):
                out.append((generation, Commit(m.checkpoint)))
            elif isinstance(m, Aborted):
                out.append((generation, Abort(m.checkpoint)))
    return out


@dataclass
class Shell:
    """Feeds a `WorkerRecovery` as the worker process does, recording what it is told."""

    sm: WorkerRecovery = field(default_factory=WorkerRecovery)
    #: The generation of the subtasks this worker runs (set by each restore).
    generation: int = 0
    done: list[tuple[int, WorkerAction]] = field(default_factory=list)
    interrupts: list[int] = field(default_factory=list)
    #: Inside a sink's wait (only possible once joined).
    waiting: bool = False
    #: An interrupt was raised: the wait unwinds at the end of the batch.
    unwinding: bool = False

    def carry_out(self, actions: list[WorkerAction]) -> None:
        for a in actions:
            if isinstance(a, Interrupt):
                assert self.waiting, "interrupt outside a wait"
                assert not self.unwinding, "two interrupts in one wait"
                self.interrupts.append(a.generation)
                self.unwinding = True
            else:
                if isinstance(a, Restore):
                    assert a.generation > self.generation
                    assert not self.waiting, "subtasks replaced inside a sink's wait"
                    self.generation = a.generation
                self.done.append((self.generation, a))


def by_kind(done: list[tuple[int, WorkerAction]]) -> dict[str, list[tuple[int, WorkerAction]]]:
    """Restores; per generation, triggers; per generation, commits and aborts (each in order)."""
    return {
        "restore": [x for x in done if isinstance(x[1], Restore)],
        "trigger": [x for x in done if isinstance(x[1], Trigger)],
        "finish": [x for x in done if isinstance(x[1], Commit | Abort)],
    }


@settings(max_examples=400, deadline=None)
@given(msgs=control_topics(), data=st.data())
def test_any_mix_of_main_loop_and_sink_waits_acts_as_the_main_loop_alone(
    msgs: list[ControlMessage], data: st.DataObject
) -> None:
    """Whatever a sink's waits defer, the worker ends up doing what reading every message
    in its main loop would: the same restores, and per generation the same triggers and
    the same commits and aborts in the same order (a wait may act on a completion before
    a trigger it deferred). No message is lost; an interrupt comes exactly when a newer
    generation is read in a wait, and its restore is the next one carried out."""
    backlog = data.draw(st.integers(0, len(msgs)))
    shell = Shell()
    for m in msgs[:backlog]:
        shell.carry_out(shell.sm.read(m))
    shell.carry_out(shell.sm.caught_up())
    for m in msgs[backlog:]:
        if shell.unwinding and not data.draw(st.booleans()):
            # The interrupted wait has unwound: back in the main loop.
            shell.waiting = shell.unwinding = False
            shell.carry_out(shell.sm.resume())
        elif not shell.unwinding and shell.sm.joined:
            shell.waiting = data.draw(st.booleans())
        before = shell.sm.generation
        where = Where.SINK_WAIT if shell.waiting else Where.MAIN
        actions = shell.sm.read(m, where)
        newer = isinstance(m, Recovered) and m.generation > before
        expect_interrupt = where is Where.SINK_WAIT and newer and not shell.unwinding
        assert (Interrupt(m.generation) in actions) == expect_interrupt, (m, actions)
        shell.carry_out(actions)
        if shell.interrupts and where is Where.SINK_WAIT:
            # Nothing is acted on for a generation that is over while the wait unwinds.
            assert not shell.unwinding or actions in ([], [Interrupt(shell.interrupts[-1])])
    shell.waiting = shell.unwinding = False
    shell.carry_out(shell.sm.resume())
    assert shell.sm.deferred == ()
    assert by_kind(shell.done) == by_kind(reference(msgs, backlog))
    for g in shell.interrupts:
        i = next(
            i for i, (_, a) in enumerate(shell.done) if isinstance(a, Restore) and a.generation == g
        )
        assert shell.done[i][1] == Restore(
            g, next(m.checkpoint for m in msgs if isinstance(m, Recovered) and m.generation == g)
        )


@settings(max_examples=200, deadline=None)
@given(msgs=control_topics())
def test_a_stopping_worker_only_finishes_checkpoints_of_its_generation(
    msgs: list[ControlMessage],
) -> None:
    sm = joined(1)
    done: list[WorkerAction] = []
    for m in msgs:
        done += sm.read(m, Where.STOPPING)
    # Until a newer generation: exactly the completions and aborts of generation 1.
    until = next(
        (i for i, m in enumerate(msgs) if isinstance(m, Recovered) and m.generation > 1), len(msgs)
    )
    expected: list[WorkerAction] = []
    for m in msgs[:until]:
        if isinstance(m, Completed) and m.generation == 1:
            expected.append(Commit(m.checkpoint))
        elif isinstance(m, Aborted) and m.generation == 1:
            expected.append(Abort(m.checkpoint))
    assert done == expected
    assert sm.generation == 1
