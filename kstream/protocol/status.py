"""A job's status as its control topic tells it (pure, no I/O): what `kstream status` shows.

`job_status(job, messages, now)` reads the control messages of a job in topic
order (`kstream.runtime.control.read_messages`) and the current wall-clock time,
and returns a frozen `JobStatus`: whether the coordinator runs, each worker's
latest heartbeat (its age, generation, flags and record rates), each subtask's
latest ack, the latest completed checkpoint, the checkpoints in progress and
the recoveries with their causes. It reads nothing but the messages, so it
describes a stopped job as well as a running one.

Times are the writers' wall clocks (`time.time()` on their hosts): ages across
hosts are off by the clocks' skew. An ack carries no time of its own; its time
is that of the newest timed message before it (each worker sends a heartbeat
right before its acks, so that is at most a batch of acks earlier).

Rates come from heartbeats: their counters are running totals of one process
(`kstream.protocol.counters`), so a worker's rate is the growth between the
oldest and the newest heartbeat of its current process within `RATE_WINDOW_S`
(at least `RATE_MIN_S` apart; else unknown). A restarted worker is a new
process and its rate starts again.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from kstream.protocol.causes import recovery_cause
from kstream.protocol.checkpoint_history import CheckpointRecord, checkpoint_history
from kstream.protocol.counters import JobCounters, WorkerCounters
from kstream.protocol.messages import (
    Acked,
    Completed,
    ControlMessage,
    Declined,
    Presence,
    Recovered,
    WorkerAlive,
    WorkerFailed,
)

__all__ = [
    "ALIVE_S",
    "COORDINATOR_ALIVE_S",
    "JSON_VERSION",
    "RATE_MIN_S",
    "RATE_WINDOW_S",
    "CheckpointStatus",
    "JobStatus",
    "RecoveryStatus",
    "SubtaskAck",
    "SubtaskStatus",
    "WorkerStatus",
    "checkpoint_acks",
    "job_status",
]

#: A worker whose latest heartbeat is older than this is not alive (`kstream run`'s
#: default ``--liveness-timeout``).
ALIVE_S = 15.0
#: A coordinator announces itself every second (`kstream.protocol.presence`); one
#: silent for this long is not running (killed, or cut off from the cluster).
COORDINATOR_ALIVE_S = 10.0
#: Rates are measured over the heartbeats of the last this many seconds.
RATE_WINDOW_S = 10.0
#: ... if they span at least this long (heartbeats right before acks come close together).
RATE_MIN_S = 1.0
#: The ``version`` of `JobStatus.to_json`'s document.
JSON_VERSION = 1

State = Literal["running", "stopped", "silent", "unknown"]


@dataclass(frozen=True, slots=True)
class WorkerStatus:
    """One worker as its latest heartbeat tells it."""

    worker: str
    alive: bool
    #: When its latest heartbeat was written (None: the heartbeat had no time).
    last_seen: float | None
    age_s: float | None
    generation: int
    process: str | None
    restoring: bool
    waiting: bool
    #: A slow snapshot store, in one line ("" none).
    storing: str
    #: A call of the job's code that has not returned for long ("" none).
    stuck: str
    records_in: int
    records_out: int
    dead_letters: int
    #: Records per second over `RATE_WINDOW_S`; None when unknown (or not alive).
    in_per_s: float | None
    out_per_s: float | None


@dataclass(frozen=True, slots=True)
class SubtaskStatus:
    """One subtask as its latest ack (or decline) tells it."""

    subtask: str
    checkpoint: int
    generation: int
    #: About when it acked (see the module's docstring); None if nothing timed came before.
    acked_at: float | None
    age_s: float | None
    size: int
    alignment_ms: float
    sync_ms: float
    unaligned: bool
    in_flight: int
    #: Its latest ack is older than the job's latest completed checkpoint.
    behind: bool
    #: Why it last declined a checkpoint of the current generation ("" never).
    declined: str = ""


@dataclass(frozen=True, slots=True)
class CheckpointStatus:
    """The latest completed checkpoint."""

    checkpoint: int
    generation: int
    completed_at: float | None
    age_s: float | None
    duration_s: float | None
    size: int | None
    alignment_ms: float | None


@dataclass(frozen=True, slots=True)
class RecoveryStatus:
    """One ``recover`` of the control topic: the job's start or a rollback."""

    generation: int
    #: The checkpoint restored (None: the start, no checkpoint).
    checkpoint: int | None
    time: float | None
    reason: str
    #: A bounded name of the reason (`kstream.protocol.causes`); ``start`` for a start.
    cause: str
    fresh: bool


@dataclass(frozen=True, slots=True)
class JobStatus:
    """Everything `kstream status` shows (see `job_status`)."""

    job: str
    now: float
    #: ``running``: the coordinator announced itself within `COORDINATOR_ALIVE_S`;
    #: ``stopped``: it said it stopped; ``silent``: it did neither (killed, or cut
    #: off); ``unknown``: no announcement at all (a kstream before presences).
    state: State
    #: The coordinator's latest announcement: when, and where it ran.
    last_seen: float | None
    coordinator: str
    generation: int
    workers: tuple[WorkerStatus, ...]
    subtasks: tuple[SubtaskStatus, ...]
    latest_checkpoint: CheckpointStatus | None
    in_progress: tuple[int, ...]
    completed: int
    aborted: int
    #: Rollbacks (not starts) in the whole history.
    recoveries: int
    #: The newest ``recover`` messages, oldest first (at most `RECENT`).
    recent_recoveries: tuple[RecoveryStatus, ...]
    #: Totals over every process ever seen (`JobCounters`).
    records_in: int
    records_out: int
    dead_letters: int
    #: Sum of the alive workers' rates (None: no alive worker has one).
    in_per_s: float | None
    out_per_s: float | None
    #: The latest fatal error a worker reported since the latest ``recover`` ("" none).
    failure: str = ""
    #: Messages read.
    messages: int = 0

    RECENT = 10

    def to_json(self) -> dict[str, Any]:
        """The document `kstream status --json` prints (its schema: the operations guide)."""
        return {"version": JSON_VERSION, **asdict(self)}


@dataclass(slots=True)
class _Rates:
    """Heartbeats of one process within the rate window: (time, counters)."""

    seen: list[tuple[float, WorkerCounters]] = field(default_factory=list)

    def add(self, when: float, counters: WorkerCounters) -> None:
        self.seen.append((when, counters))
        while self.seen and when - self.seen[0][0] > RATE_WINDOW_S:
            self.seen.pop(0)

    def rates(self) -> tuple[float, float] | None:
        if len(self.seen) < 2:
            return None
        (t0, c0), (t1, c1) = self.seen[0], self.seen[-1]
        if t1 - t0 < RATE_MIN_S:
            return None
        dt = t1 - t0
        return (c1.records_in - c0.records_in) / dt, (c1.records_out - c0.records_out) / dt


def _age(now: float, when: float | None) -> float | None:
    return None if when is None else max(0.0, now - when)


def _task_order(task: str) -> tuple[int, int, str]:
    """``s<stage>-<index>`` in numeric order; anything else after."""
    stage, _, index = task.removeprefix("s").partition("-")
    if stage.isdigit() and index.isdigit():
        return int(stage), int(index), ""
    return 1 << 30, 0, task


def job_status(job: str, messages: Iterable[ControlMessage], now: float) -> JobStatus:
    """The status of `job` from its control `messages` (topic order) at wall-clock `now`."""
    history = list(messages)
    clock: float | None = None  # the newest time any message carried so far
    presence: Presence | None = None
    beats: dict[str, WorkerAlive] = {}
    rates: dict[str, _Rates] = {}
    counters = JobCounters()
    acks: dict[str, tuple[Acked, float | None]] = {}
    declines: dict[str, Declined] = {}
    latest: Completed | None = None
    recoveries: list[RecoveryStatus] = []
    failure = ""
    generation = 0
    for m in history:
        when = getattr(m, "time", None)
        if isinstance(when, float | int) and not isinstance(when, bool):
            clock = float(when) if clock is None else max(clock, float(when))
        match m:
            case Presence():
                presence = m
            case WorkerAlive():
                beats[m.worker] = m
                generation = max(generation, m.generation)
                if m.counters is not None:
                    key = m.process or m.worker
                    counters.observe(key, m.counters)
                    if m.time is not None:
                        rates.setdefault(key, _Rates()).add(m.time, m.counters)
            case Acked():
                acks[m.task] = (m, clock)
            case Declined():
                declines[m.task] = m
            case Completed():
                latest = m
            case Recovered(restated=False):
                generation = max(generation, m.generation)
                start = m.reason.startswith("job started")
                cause = "start" if start else recovery_cause(m.reason)
                recoveries.append(
                    RecoveryStatus(m.generation, m.checkpoint, m.time, m.reason, cause, m.fresh)
                )
                failure = ""
            case WorkerFailed():
                failure = f"{m.worker}: {m.reason}"
            case _:
                pass
    workers = []
    for name in sorted(beats, key=_task_order_worker):
        b = beats[name]
        age = _age(now, b.time)
        alive = age is not None and age < ALIVE_S
        c = b.counters or WorkerCounters()
        r = rates.get(b.process or b.worker)
        measured = r.rates() if r is not None and alive else None
        workers.append(
            WorkerStatus(
                name,
                alive,
                b.time,
                age,
                b.generation,
                b.process,
                b.restoring,
                b.waiting,
                b.storing,
                b.stuck,
                c.records_in,
                c.records_out,
                c.dead_letters,
                None if measured is None else measured[0],
                None if measured is None else measured[1],
            )
        )
    latest_id = latest.checkpoint if latest is not None else None
    subtasks = []
    for task in sorted(acks, key=_task_order):
        a, at = acks[task]
        d = declines.get(task)
        subtasks.append(
            SubtaskStatus(
                task,
                a.checkpoint,
                a.generation,
                at,
                _age(now, at),
                a.size,
                a.alignment_ms,
                a.sync_ms,
                a.unaligned,
                a.in_flight,
                latest_id is not None and a.checkpoint < latest_id,
                d.reason if d is not None and d.generation == generation else "",
            )
        )
    records = checkpoint_history(history)
    measured_in = [w.in_per_s for w in workers if w.in_per_s is not None]
    measured_out = [w.out_per_s for w in workers if w.out_per_s is not None]
    total = counters.total
    return JobStatus(
        job=job,
        now=now,
        state=_state(presence, now),
        last_seen=None if presence is None else presence.time,
        coordinator="" if presence is None else presence.describe(),
        generation=generation,
        workers=tuple(workers),
        subtasks=tuple(subtasks),
        latest_checkpoint=None
        if latest is None
        else CheckpointStatus(
            latest.checkpoint,
            latest.generation,
            latest.time,
            _age(now, latest.time),
            latest.duration_s,
            latest.size,
            latest.alignment_ms,
        ),
        in_progress=tuple(r.checkpoint for r in records if r.status == "in progress"),
        completed=sum(r.status == "completed" for r in records),
        aborted=sum(r.status == "aborted" for r in records),
        recoveries=sum(r.cause != "start" for r in recoveries),
        recent_recoveries=tuple(recoveries[-JobStatus.RECENT :]),
        records_in=total.records_in,
        records_out=total.records_out,
        dead_letters=total.dead_letters,
        in_per_s=sum(measured_in) if measured_in else None,
        out_per_s=sum(measured_out) if measured_out else None,
        failure=failure,
        messages=len(history),
    )


def _task_order_worker(worker: str) -> tuple[int, str]:
    """``w<index>`` in numeric order."""
    index = worker.removeprefix("w")
    return (int(index), "") if index.isdigit() else (1 << 30, worker)


def _state(presence: Presence | None, now: float) -> State:
    if presence is None:
        return "unknown"
    if presence.stopped:
        return "stopped"
    return "running" if now - presence.time < COORDINATOR_ALIVE_S else "silent"


@dataclass(frozen=True, slots=True)
class SubtaskAck:
    """One subtask's part in one checkpoint (`checkpoint_acks`)."""

    subtask: str
    #: Seconds from the trigger to about when it acked (see the module's
    #: docstring); None when either time is unknown.
    after_s: float | None
    size: int
    alignment_ms: float
    sync_ms: float
    unaligned: bool
    in_flight: int
    #: How it joined the snapshot (`Acked.cut_on`).
    cut_on: str
    #: Why it declined instead ("" if it acked).
    declined: str = ""


def checkpoint_acks(
    messages: Iterable[ControlMessage], checkpoint: int
) -> tuple[CheckpointRecord, list[SubtaskAck]] | None:
    """Checkpoint `checkpoint` as `checkpoint_history` tells it and each subtask's
    ack (or decline) of it in its generation, in topic order; None if no message
    names it."""
    history = list(messages)
    record = next((r for r in checkpoint_history(history) if r.checkpoint == checkpoint), None)
    if record is None:
        return None
    clock: float | None = None
    rows: list[SubtaskAck] = []
    for m in history:
        when = getattr(m, "time", None)
        if isinstance(when, float | int) and not isinstance(when, bool):
            clock = float(when) if clock is None else max(clock, float(when))
        if not isinstance(m, Acked | Declined) or m.checkpoint != checkpoint:
            continue
        if record.generation is not None and m.generation != record.generation:
            continue
        after = (
            None
            if clock is None or record.triggered_at is None
            else max(0.0, clock - record.triggered_at)
        )
        if isinstance(m, Acked):
            rows.append(
                SubtaskAck(
                    m.task,
                    after,
                    m.size,
                    m.alignment_ms,
                    m.sync_ms,
                    m.unaligned,
                    m.in_flight,
                    m.cut_on,
                )
            )
        else:
            rows.append(SubtaskAck(m.task, after, 0, 0.0, 0.0, False, 0, "", m.reason or "?"))
    return record, rows
