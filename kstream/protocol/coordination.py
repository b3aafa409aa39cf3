"""The coordinator's vocabulary: the events it takes, the commands it returns, its settings.

`kstream.protocol.coordinator.Coordinator.handle` takes one `Event` and returns
`Command`s; the caller (the runner) builds the events from what it reads and
carries the commands out. `CoordinatorConfig` holds the timing and retention
a coordinator runs with, and `History` what the control topic says about the
past (`kstream.protocol.coordinator.replay` rebuilds it). All are frozen values
with no behaviour beyond checking their own fields: the rules live in the
machine, not here.
"""

from __future__ import annotations

from dataclasses import dataclass

from kstream.errors import ConfigurationError
from kstream.protocol.identity import JobIdentity
from kstream.protocol.worker_alive import WorkerAlive

__all__ = [
    "IDLE_AFTER",
    "UNRESPONSIVE_AFTER",
    "Abort",
    "AckReceived",
    "CheckpointDamaged",
    "Command",
    "Complete",
    "CoordinatorConfig",
    "DeclineReceived",
    "Discard",
    "Event",
    "Fail",
    "Halt",
    "Heartbeat",
    "History",
    "InitiatedReceived",
    "Paused",
    "Recover",
    "Tick",
    "Trigger",
    "WorkerLost",
    "heartbeat_event",
]

#: A worker found silent in this many generations in a row is unresponsive: a
#: SIGSTOPped zombie wakes within one (and must be fenced, not killed), while a
#: process whose Kafka clients are stuck would be rolled back for ever.
UNRESPONSIVE_AFTER = 2
#: Quiet completions in a row after which a job counts as idle (`CoordinatorConfig.idle_after`).
IDLE_AFTER = 3

# -- events ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Tick:
    """Time passed; `now` is a monotonic-ish clock in seconds."""

    now: float


@dataclass(frozen=True, slots=True)
class AckReceived:
    """Subtask `task` snapshotted `checkpoint` in `generation`; `size` bytes of state."""

    checkpoint: int
    generation: int
    task: str
    now: float
    size: int = 0
    alignment_ms: float = 0.0
    #: The subtask did nothing since its previous ack (`Acked.quiet`).
    quiet: bool = False


@dataclass(frozen=True, slots=True)
class DeclineReceived:
    """Subtask `task` could not take `checkpoint` (e.g. its alignment was overtaken)."""

    checkpoint: int
    generation: int
    task: str
    reason: str
    now: float


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """Worker `worker` is alive in `generation`; `restoring`: not running it yet.

    `stuck` is the line of a call of the job's code that has not returned for
    long and `stuck_on` what identifies that call ("" for none).
    """

    worker: str
    generation: int
    now: float
    restoring: bool = False
    stuck: str = ""
    stuck_on: str = ""
    #: The worker process's incarnation id ("": unknown, never a claim).
    process: str = ""
    #: The process waits for a new generation instead of joining `generation`,
    #: which another process of its index runs (`WorkerAlive.waiting`): a claim.
    waiting: bool = False
    #: A snapshot its checkpoint storage is slow to take ("": none; `WorkerAlive.storing`).
    storing: str = ""
    #: The checkpoint after whose quiet ack the worker did something again (0: none;
    #: `WorkerAlive.woke`): the job is not idle.
    woke: int = 0


def heartbeat_event(msg: WorkerAlive, now: float) -> Heartbeat:
    """The coordinator's event for heartbeat `msg`, read at `now`."""
    return Heartbeat(
        msg.worker,
        msg.generation,
        now,
        restoring=msg.restoring,
        stuck=msg.stuck,
        stuck_on=msg.stuck_on,
        process=msg.process or "",
        waiting=msg.waiting,
        storing=msg.storing,
        woke=msg.woke,
    )


@dataclass(frozen=True, slots=True)
class WorkerLost:
    """The supervisor saw worker `worker` exit (or stop answering)."""

    worker: str
    reason: str
    now: float


@dataclass(frozen=True, slots=True)
class CheckpointDamaged:
    """Completed checkpoint `checkpoint` cannot be restored (failed validation or restore)."""

    checkpoint: int
    reason: str
    now: float


@dataclass(frozen=True, slots=True)
class InitiatedReceived:
    """Source subtask `task` started snapshot `checkpoint` itself, in `generation`.

    It has taken its own snapshot and written its barriers; the other sources
    still need the trigger.
    """

    checkpoint: int
    generation: int
    task: str
    now: float


@dataclass(frozen=True, slots=True)
class Paused:
    """The coordinator's own process did not run for `duration` seconds up to `now`.

    Stopped (SIGSTOP, a VM pause) or starved of CPU, it read no heartbeat and no
    ack in that time: the silence it would measure is its own, not the workers'.
    """

    duration: float
    now: float


Event = (
    Tick
    | Paused
    | AckReceived
    | DeclineReceived
    | Heartbeat
    | WorkerLost
    | CheckpointDamaged
    | InitiatedReceived
)

# -- commands ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Trigger:
    """Start checkpoint `checkpoint`: sources record offsets and emit barriers.

    Also the relay of a source-initiated checkpoint: its initiator, which took
    it already, ignores it.
    """

    checkpoint: int
    generation: int


@dataclass(frozen=True, slots=True)
class Complete:
    """Every subtask acked `checkpoint`: it is the new restore point. Durable once written."""

    checkpoint: int
    generation: int
    duration_s: float
    size: int
    alignment_ms: float


@dataclass(frozen=True, slots=True)
class Abort:
    """Give up `checkpoint`; subtasks stop aligning it and sinks abort its epoch."""

    checkpoint: int
    generation: int
    reason: str


@dataclass(frozen=True, slots=True)
class Recover:
    """Roll every subtask back to `checkpoint` (None: start over) in `generation`.

    `unresponsive` names workers found silent in `UNRESPONSIVE_AFTER` generations
    in a row: alive perhaps, but not reaching Kafka (a client stuck after broker
    faults was seen to do this); and, when checkpoints kept timing out
    (`CoordinatorConfig.tolerable_timeouts`), the workers of the subtasks that
    never acked the last one: a main loop stuck in user code obeys no control
    message (`stalled` names these). Rolling back cannot help them; the runner
    replaces the ones it started.
    """

    generation: int
    checkpoint: int | None
    reason: str
    unresponsive: tuple[str, ...] = ()
    stalled: tuple[str, ...] = ()
    #: (worker, process): the incarnation kept for an index two processes claimed.
    kept: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Discard:
    """Delete the stored data of completed checkpoints no longer retained."""

    checkpoints: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Halt:
    """No intact completed checkpoint remains: stop the job, say why."""

    reason: str


@dataclass(frozen=True, slots=True)
class Fail:
    """A call of the job's code stuck again after the rollback it caused: the job
    fails, `reason` naming the call (a failed job, not a restart)."""

    reason: str


Command = Trigger | Complete | Abort | Recover | Discard | Halt | Fail


@dataclass(frozen=True, slots=True)
class CoordinatorConfig:
    """Timing and retention. All durations in seconds."""

    interval: float = 1.0
    timeout: float = 60.0
    max_in_flight: int = 1
    retained: int = 3
    #: A worker silent for this long is lost. Several heartbeat periods, so one
    #: slow poll (a long GC-like pause in user code) is not a failure.
    liveness_timeout: float = 15.0
    #: Checkpoints that may time out in a row (in one generation, with no completion
    #: between) before the job rolls back; 0: at the first. A few, not 0: one user call
    #: slower than the timeout or a broker's leader election can cost a checkpoint or
    #: two, and a rollback replays the output since the last completion and restarts
    #: processes. Not many: with the default 60 s timeout, 3 fail a stuck job over
    #: after about four minutes.
    tolerable_timeouts: int = 3
    #: Concurrent snapshots (seed 004; unaligned checkpoints): pending ones are
    #: independent. A completion no longer aborts the older pending ones, nor does
    #: a source's registration abort the smaller ids pending ("overtaken"), nor is
    #: one older than the newest completed refused: each may still complete (the
    #: restore point stays the completed checkpoint with the largest id).
    concurrent: bool = False
    #: Completed checkpoints in a row whose every ack was quiet (`AckReceived.quiet`)
    #: after which the job counts as idle and is checkpointed every `idle_interval`
    #: only, until a subtask does something again ({ref}`coordinator-idle`); 0: never.
    idle_after: int = IDLE_AFTER
    #: The interval while idle (the checkpoint interval if that is longer).
    idle_interval: float = 10.0

    def __post_init__(self) -> None:
        if self.interval <= 0:
            raise ConfigurationError(f"checkpoint interval must be > 0, got {self.interval}")
        if self.timeout <= 0:
            raise ConfigurationError(f"checkpoint timeout must be > 0, got {self.timeout}")
        if self.max_in_flight < 1:
            raise ConfigurationError(
                f"max in-flight checkpoints must be >= 1: {self.max_in_flight}"
            )
        if self.retained < 1:
            raise ConfigurationError(f"retained checkpoints must be >= 1, got {self.retained}")
        if self.liveness_timeout <= 0:
            raise ConfigurationError("liveness timeout must be > 0")
        if self.tolerable_timeouts < 0:
            raise ConfigurationError(
                f"tolerable checkpoint timeouts must be >= 0, got {self.tolerable_timeouts}"
            )
        if self.idle_after < 0:
            raise ConfigurationError(f"idle_after must be >= 0, got {self.idle_after}")
        if self.idle_interval <= 0:
            raise ConfigurationError(f"idle interval must be > 0, got {self.idle_interval}")


@dataclass(frozen=True, slots=True)
class History:
    """What the control topic says about the past: enough to resume coordinating.

    `completed` lists retained completed checkpoints, oldest (smallest id)
    first; `identity` is the job identity recorded with the newest of them
    (None: none recorded); `max_checkpoint` is the largest id any message
    named (the coordinator's Lamport clock starts there).
    """

    generation: int = 0
    max_checkpoint: int = 0
    completed: tuple[int, ...] = ()
    identity: JobIdentity | None = None
