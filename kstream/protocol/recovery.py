"""Worker-side recovery: which generation a worker runs and what each control message asks of it.

A worker's life is a sequence of generations. It joins by reading the control
topic to its end and restoring from the latest `Recovered` (generation g,
checkpoint n); from then on it acts on the `Triggered`, `Completed` and
`Aborted` messages of generation g and starts over when a newer `Recovered`
arrives. `WorkerRecovery` makes those decisions, as a pure state machine:
control messages in, `WorkerAction`s out, no I/O, no clock. The worker process
(`kstream.runtime.worker.process`) reads the topic and carries out the actions.

Where the worker is when it reads a message matters, and the caller says so:

* `MAIN`, the worker's loop between batches: every message is acted on.
* `SINK_WAIT`, inside a transactional sink whose producers all hold
  pre-committed epochs, waiting for a checkpoint to complete
  (`SinkContext.pump`). Only `Completed`/`Aborted` of the current generation
  can free a producer, so only they are acted on at once; everything else is
  deferred, in order, until the worker is back in `MAIN`. A newer `Recovered`
  also yields `Interrupt`: the wait must unwind (the subtasks are being
  replaced), and once it has, the deferred `Recovered` restores. Messages read
  after it in the same wait are deferred as well, never dropped.
* `STOPPING`, reading the topic to its end before a clean exit: only
  completions and aborts of the current generation are acted on, so the output
  of checkpoints that completed is committed before the process leaves.

Every message read, wherever, advances the worker's snapshot clock (`clock`,
the largest checkpoint id named so far): a source subtask names a snapshot it
starts itself after it (`kstream.protocol.snapshot_id`). A new worker process
reads the whole topic when it joins, so its clock never goes back.

Until the worker has caught up with the topic (`caught_up`), messages are only
collected: it restores from the `Recovered` of the backlog's newest generation
(the last of them) and then acts on the messages after it (a trigger sent
while the process was starting).

**Never late.** A process joins only a generation no other process of its
worker index runs. If the backlog holds a heartbeat of the newest generation
from another process of its index (`WorkerAlive.process`; a predecessor that a
supervisor replaced before the coordinator declared it lost, or a live process
this one is a second claim against), it does not restore: it waits that
generation out (`waiting`), saying so in its heartbeats (`WorkerAlive.waiting`), and joins
the next `Recovered`, which the coordinator opens for it at once. Joining late
would restore the generation's starting point while the other process's output
and snapshots of that generation stand: the same records written twice, and
checkpoint ids of that generation snapshotted twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import assert_never

from kstream.protocol.messages import (
    Aborted,
    Acked,
    Completed,
    ControlMessage,
    Declined,
    Initiated,
    Presence,
    Recovered,
    RestoreFailed,
    SavepointDone,
    SavepointRequested,
    Triggered,
    WorkerAlive,
    WorkerFailed,
    checkpoint_of,
)
from kstream.protocol.snapshot_id import LamportClock

__all__ = [
    "Abort",
    "Announced",
    "Commit",
    "Interrupt",
    "Restore",
    "Trigger",
    "Where",
    "WorkerAction",
    "WorkerRecovery",
]


class Where(StrEnum):
    """Where the worker is when it reads a control message."""

    MAIN = "main"
    SINK_WAIT = "sink-wait"
    STOPPING = "stopping"


# -- actions -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Restore:
    """Replace every subtask, restored from `checkpoint` (None: scratch), in `generation`."""

    generation: int
    checkpoint: int | None


@dataclass(frozen=True, slots=True)
class Trigger:
    """Checkpoint `checkpoint` was triggered: source subtasks snapshot between batches."""

    checkpoint: int


@dataclass(frozen=True, slots=True)
class Announced:
    """A source subtask started `checkpoint` (its `Initiated`): the other sources
    hold their own initiations until it ends (`kstream.protocol.initiation`)."""

    checkpoint: int


@dataclass(frozen=True, slots=True)
class Commit:
    """Checkpoint `checkpoint` completed: sinks commit the epochs it covers."""

    checkpoint: int


@dataclass(frozen=True, slots=True)
class Abort:
    """Checkpoint `checkpoint` failed: aligners give it up, sinks keep its epoch for the next."""

    checkpoint: int


@dataclass(frozen=True, slots=True)
class Interrupt:
    """Unwind the sink's wait: generation `generation` replaces this one.

    The `Restore` follows from `WorkerRecovery.resume` once the worker is back
    in its loop.
    """

    generation: int


WorkerAction = Restore | Trigger | Announced | Commit | Abort | Interrupt


@dataclass(slots=True)
class WorkerRecovery:
    """The control-message decisions of one worker process (see the module docstring).

    `worker` and `process` name this process (``w<i>``, its incarnation id); with
    either empty it never waits (it cannot tell another process of its index).
    """

    #: The generation whose subtasks run; 0 before the first `Restore`.
    generation: int = 0
    #: This process's worker name and incarnation id (`WorkerAlive.process`).
    worker: str = ""
    process: str = ""
    #: Not joined: the generation another process of this index runs, waited out
    #: until a newer `Recovered` (0: not waiting).
    waiting: int = 0
    #: The largest checkpoint id read in any control message.
    clock: LamportClock = field(default_factory=LamportClock)
    #: Whether the backlog of the control topic has been read (`caught_up`).
    _caught_up: bool = field(default=False, init=False)
    #: While joining: the `Recovered` of the newest generation read, and the messages after it.
    _latest: Recovered | None = field(default=None, init=False)
    _since: list[ControlMessage] = field(default_factory=list, init=False)
    #: While joining: generations another process of this index was heard running.
    _others: set[int] = field(default_factory=set, init=False)
    #: Messages read in a sink's wait, to be acted on back in the main loop.
    _deferred: list[ControlMessage] = field(default_factory=list, init=False)
    #: A newer `Recovered` was read in a wait or while stopping: the current
    #: generation is over, nothing more is acted on until `resume`.
    _superseded: bool = field(default=False, init=False)

    @property
    def joined(self) -> bool:
        """Whether the worker restored its subtasks in some generation."""
        return self.generation > 0

    @property
    def heartbeat_generation(self) -> int:
        """The generation this process's heartbeats name: the one it runs, or the
        one it waits out (`waiting`), or 0."""
        return self.generation or self.waiting

    @property
    def deferred(self) -> tuple[ControlMessage, ...]:
        """Messages waiting for `resume`, in the order they were read."""
        return tuple(self._deferred)

    def caught_up(self) -> list[WorkerAction]:
        """The control topic's backlog has been read to its end: join its latest generation.

        Returns the `Restore` and the actions of the messages after it, or
        nothing if no generation was started yet, or another process of this
        index runs the latest (`waiting`): the next `Recovered` joins.
        """
        if self._caught_up:
            return []
        self._caught_up = True
        latest, since, others = self._latest, self._since, self._others
        self._latest, self._since, self._others = None, [], set()
        if latest is None:
            return []
        if latest.generation in others:
            # Its messages after the `Recovered` are that process's business.
            self.waiting = latest.generation
            return []
        actions = self._recover(latest)
        for msg in since:
            actions += self._act(msg)
        return actions

    def read(self, msg: ControlMessage, where: Where = Where.MAIN) -> list[WorkerAction]:
        """Feed one message read `where`; return the actions to carry out, in order."""
        self.clock.observe(checkpoint_of(msg))
        if not self._caught_up:
            # The newest generation, not the last `Recovered` written: one a stale
            # writer left after a newer one must not take a joining worker back.
            if isinstance(msg, Recovered) and (
                self._latest is None or msg.generation >= self._latest.generation
            ):
                self._latest, self._since = msg, []
            else:
                self._since.append(msg)
            if self._another_process(msg):
                assert isinstance(msg, WorkerAlive)
                self._others.add(msg.generation)
            return []
        match where:
            case Where.MAIN:
                return self.resume() + self._act(msg)
            case Where.SINK_WAIT:
                return self._in_wait(msg)
            case Where.STOPPING:
                return self._stopping(msg)
            case _:
                assert_never(where)

    def resume(self) -> list[WorkerAction]:
        """Back in the main loop: act on the deferred messages, in order."""
        deferred, self._deferred = self._deferred, []
        self._superseded = False
        actions: list[WorkerAction] = []
        for msg in deferred:
            actions += self._act(msg)
        return actions

    # -- the rules -----------------------------------------------------------

    def _another_process(self, msg: ControlMessage) -> bool:
        """Whether `msg` says another process of this worker index runs its generation."""
        return (
            isinstance(msg, WorkerAlive)
            and bool(self.worker and self.process)
            and msg.worker == self.worker
            and bool(msg.process)
            and msg.process != self.process
            and not msg.waiting  # waiting, it runs nothing
            and msg.generation > 0
        )

    def _recover(self, msg: Recovered) -> list[WorkerAction]:
        self.generation = msg.generation
        self.waiting = 0
        return [Restore(msg.generation, msg.checkpoint)]

    def _act(self, msg: ControlMessage) -> list[WorkerAction]:
        """The main loop's rule: act on the current generation, restore on a newer one
        (newer than the one waited out, too)."""
        g = self.generation
        match msg:
            case Recovered(generation=gen) if gen > max(g, self.waiting):
                return self._recover(msg)
            case Triggered(checkpoint=n, generation=gen) if gen == g and g > 0:
                return [Trigger(n)]
            case Initiated(checkpoint=n, generation=gen) if gen == g and g > 0:
                # Every one of this generation ends in a complete or an abort.
                return [Announced(n)]
            case Completed(checkpoint=n, generation=gen) if gen == g and g > 0:
                return [Commit(n)]
            case Aborted(checkpoint=n, generation=gen) if gen == g and g > 0:
                return [Abort(n)]
            case Recovered() | Triggered() | Completed() | Aborted():
                return []  # of a generation this worker left, or has not joined
            case (
                Acked()
                | Declined()
                | Initiated()  # of a generation this worker left, or has not joined
                | WorkerAlive()
                | WorkerFailed()
                | RestoreFailed()
            ):
                return []  # for the coordinator
            case Presence():
                return []  # for other runners
            case SavepointRequested() | SavepointDone():
                return []  # between `kstream savepoint` and the coordinator
            case _:
                assert_never(msg)

    def _in_wait(self, msg: ControlMessage) -> list[WorkerAction]:
        """Inside a sink's wait: free producers now, keep the rest for the main loop."""
        g = self.generation
        current = not self._superseded
        if current and isinstance(msg, Completed | Aborted) and msg.generation == g:
            return self._act(msg)
        self._deferred.append(msg)
        if current and isinstance(msg, Recovered) and msg.generation > g:
            self._superseded = True
            return [Interrupt(msg.generation)]
        return []

    def _stopping(self, msg: ControlMessage) -> list[WorkerAction]:
        """Before a clean exit: commit or abort what the current generation decided."""
        if self._superseded:
            return []
        if isinstance(msg, Recovered) and msg.generation > self.generation:
            self._superseded = True  # what follows belongs to a generation this process leaves
            return []
        if isinstance(msg, Completed | Aborted) and msg.generation == self.generation:
            return self._act(msg)
        return []
