"""Where a starting job resumes: its latest checkpoint, from scratch, or not at all.

Pure: `decide_resume` weighs what the control topic says (`History`), how the
job differs from the one that took the checkpoint (`resume_problems`'s two
lists), and the user's ``--fresh`` / ``--accept-changes``. The runner carries
out the answer: for `StartFresh` it discards the stored checkpoints and the
sources' consumer groups, for `Refuse` it stops with the reason.

`decide_adoption` says whether a restarted coordinator may carry on in the
running generation (its workers alive) instead of rolling the job back.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from kstream.protocol.coordination import History
from kstream.protocol.messages import (
    Aborted,
    Completed,
    ControlMessage,
    Initiated,
    Recovered,
    RestoreFailed,
    Triggered,
    WorkerAlive,
    WorkerFailed,
)

__all__ = ["Adopt", "Refuse", "Resume", "StartFresh", "decide_adoption", "decide_resume"]


@dataclass(frozen=True, slots=True)
class Resume:
    """Coordinate from `history` (its latest completed checkpoint, if any).

    `warning`: said once when the checkpoint is resumed across changes.
    """

    history: History
    warning: str | None = None


@dataclass(frozen=True, slots=True)
class StartFresh:
    """Start from scratch with `history`: no completed checkpoint, but the
    generation and checkpoint id keep increasing, so an earlier run's channel
    records, commit markers and zombie writers stay distinguishable from this
    run's. `notice` (None: nothing was forgotten) says what is forgotten."""

    history: History
    notice: str | None = None


@dataclass(frozen=True, slots=True)
class Refuse:
    """Do not start: `reason` says why and the ways on."""

    reason: str


def decide_resume(
    history: History,
    fatal: Sequence[str],
    changed: Sequence[str],
    *,
    job: str,
    fresh: bool,
    accept_changes: bool,
) -> Resume | StartFresh | Refuse:
    """Where job `job` starts, given the control topic's `history` and how the job
    differs from the one that recorded its latest completion: `fatal` differences
    can never be resumed across, `changed` ones only with `accept_changes`
    (`kstream.dataflow.identity.resume_problems`; ignored without a completion).
    """
    if fresh:
        notice = None
        if history.completed:
            notice = (
                f"starting job {job} fresh: checkpoints "
                f"{', '.join(map(str, history.completed))} are forgotten, sources read "
                "from their start position, state starts empty"
            )
        return StartFresh(History(history.generation, history.max_checkpoint), notice)
    if not history.completed:
        return Resume(history)
    n = history.completed[-1]
    if fatal:
        return Refuse(
            f"job {job} cannot resume checkpoint {n}: {'; '.join([*fatal, *changed])}. "
            "Start it from scratch with --fresh (state is dropped, input is read again), "
            "or use another --job-name (or the old settings)"
        )
    if changed and not accept_changes:
        return Refuse(
            f"job {job} differs from the job that took checkpoint {n}: "
            f"{'; '.join(changed)}. Start it from scratch with --fresh, use another "
            "--job-name, or, if the change is compatible with the state, resume on "
            "purpose with --accept-changes"
        )
    if changed:
        return Resume(
            history, f"WARNING: resuming checkpoint {n} across changes: {'; '.join(changed)}"
        )
    return Resume(history)


@dataclass(frozen=True, slots=True)
class Adopt:
    """A restarted coordinator carries on in `generation` instead of rolling back.

    `in_flight`: the checkpoints of that generation neither completed nor
    aborted: the new coordinator aborts them (it never saw their acks).
    `processes`: each worker's process in that generation (its incarnation).
    """

    generation: int
    in_flight: tuple[int, ...]
    processes: tuple[tuple[str, str], ...] = ()


def decide_adoption(
    messages: Sequence[ControlMessage],
    workers: Collection[str],
    now: float,
    liveness_timeout: float,
) -> Adopt | None:
    """Whether a coordinator restarting after `messages` (the control topic, in order)
    may adopt the running generation: every worker of `workers` sent a heartbeat of
    the newest generation within `liveness_timeout` of `now` (wall clock, as
    heartbeats carry), none failed in it, and no process waits to join a new one
    (`WorkerAlive.waiting`, within the timeout: it is what a restarted worker
    says, and adopting would only make it wait for the next rollback). A waiting
    process's heartbeat is no sign of the worker running the generation. None:
    roll back as always.

    The workers' sinks then commit their pending epochs at the generation's next
    completion; an in-flight checkpoint aborted here is one such epoch more.
    """
    generation = 0
    for msg in messages:
        if isinstance(msg, Recovered):
            generation = max(generation, msg.generation)
    if generation == 0 or not workers:
        return None
    seen: dict[str, WorkerAlive] = {}
    started: set[int] = set()
    ended: set[int] = set()
    failed = waiting = False
    for msg in messages:
        match msg:
            case Recovered(generation=g, restated=False) if g == generation:
                failed = False  # failures before the generation opened are settled
            case WorkerAlive(generation=g, waiting=True) if g == generation:
                if msg.time is None or now - msg.time <= liveness_timeout:
                    waiting = True
            case WorkerAlive(generation=g) if g == generation:
                seen[msg.worker] = msg
            case WorkerFailed() | RestoreFailed():
                # A failure a restart cannot mend, or a restore point gone bad:
                # the runner decides as before.
                failed = True
            case Triggered(generation=g) | Initiated(generation=g) if g == generation:
                started.add(msg.checkpoint)
            case Completed() | Aborted():
                ended.add(msg.checkpoint)
            case _:
                pass
    if failed or waiting:
        return None
    for w in workers:
        beat = seen.get(w)
        if beat is None or beat.time is None or now - beat.time > liveness_timeout:
            return None
    processes = tuple(sorted((w, seen[w].process or "") for w in workers))
    return Adopt(generation, tuple(sorted(started - ended)), processes)
