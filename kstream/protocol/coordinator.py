"""The checkpoint coordinator and the recovery decision, as a pure state machine.

The coordinator triggers checkpoints at an interval, registers the ones a
source subtask started itself (`InitiatedReceived`) and relays their trigger
to the other sources, collects one acknowledgement per subtask, declares a
checkpoint complete when all have acked, aborts it when it times out or a
subtask declines it, and rolls the whole job back to the completed checkpoint
with the largest id when a worker is lost. Ids are Lamport clocks
(`kstream.protocol.snapshot_id`): the coordinator's own are
``next_after(largest id seen, COORDINATOR)``. `Coordinator.handle` takes one event
and returns commands; the caller does the I/O (the control topic, deleting
retained checkpoints) and supplies the clock through the events. The events,
the commands, `CoordinatorConfig` and `History` are values of their own
(`kstream.protocol.coordination`); this module holds the rules.

Invariants (checked by the tests):

* checkpoint ids are unique, and the coordinator's own increase, across
  recoveries and restarts (it has seen every id in the control topic);
* a source-initiated checkpoint is registered once, in its generation, and
  only within `max_in_flight`; otherwise it is aborted at once (never left
  pending, so it cannot hold up anything);
* completions come in increasing id order (a completion aborts every older
  pending checkpoint), so the newest completed is the one with the largest id;
  with `CoordinatorConfig.concurrent` an older one may complete after a newer
  one, and the restore point is still the completed one with the largest id;
* a checkpoint completes only with an ack from every subtask, all from the
  current generation;
* after `Recover(g, n)` nothing of generation < g is acted upon, and `n` is
  the newest completed checkpoint;
* at most `max_in_flight` checkpoints are pending at once; a timed-out one is
  aborted and does not delay the next trigger;
* a checkpoint timing out more than `tolerable_timeouts` times in a row in one
  generation (no completion between; declines neither count nor break the
  run) rolls the job back once, with one `Recover` that names the workers of
  the subtasks that never acked the last of them (by `placement`)
  `unresponsive`: their
  heartbeats come from a thread, so a subtask stuck for good in user code
  would otherwise stall the job's output for ever; a timeout does not count
  (nor break the run) when every such worker said, while the checkpoint was
  pending, that its checkpoint storage was slow to take a snapshot
  (`Heartbeat.storing`), even if it has answered since: the worker processes
  on and a rollback would restore from that same storage, so the checkpoint
  aborts (the reason names the snapshot) and the job goes on;
* a worker's heartbeat may name a call of the job's code that has not returned
  for long (`Heartbeat.stuck_on`, `kstream.runtime.worker.stuck`); such a rollback
  gives its line as the reason, and when the same call is found stuck at the
  next such rollback (after the replaced worker met the record again) the job
  fails with `Fail` naming it instead: a call that never returns would
  otherwise roll the job back for ever;
* after `Recover` the generation's first trigger waits until every worker of
  `workers` has restored (sent a heartbeat of the generation not marked
  restoring) and an interval has passed, whichever is later: no checkpoint can
  complete before every subtask is restored, and one triggered earlier is
  taken by sources that have not read anything yet, so it commits no new
  output; the interval still bounds how often the coordinator triggers (a job
  that leaves snapshots to its sources sets it very long). Without `workers`
  it waits the interval alone;
* after `idle_after` completions in a row of which every ack was quiet and
  during which no worker woke, triggers come every `idle_interval` (or the
  interval, if longer); a completion with any ack not quiet, a wake-up
  (`Heartbeat.woke`, also while a checkpoint is pending) or a rollback ends
  that at once, and the next trigger is due an interval after the last one;
* a pause of the coordinator's own process (`Paused`) counts against no
  worker's liveness and no checkpoint's timeout: it could hear nobody then;
* a process of a worker index that another process runs in the current
  generation never joins it; it waits, saying so (`Heartbeat.waiting`), and
  the coordinator opens a new generation at once keeping it (`Recover.kept`):
  two processes of one index never run one generation (each would write the
  other's output and snapshots again), and a restarted worker never waits for
  its predecessor's liveness timeout;
* a checkpoint reported damaged is never restored again: the job rolls back to
  the newest remaining one, or halts when none remains (it never silently
  starts over, which would drop the state and repeat the output).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import assert_never

from kstream.errors import ConfigurationError
from kstream.protocol.coordination import (
    UNRESPONSIVE_AFTER,
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
    InitiatedReceived,
    Paused,
    Recover,
    Tick,
    Trigger,
    WorkerLost,
)
from kstream.protocol.identity import JobIdentity
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
    generation_of,
)
from kstream.protocol.snapshot_id import COORDINATOR, LamportClock

__all__ = ["Coordinator", "replay"]

#: A rollback's reason names at most this many subtasks that never acked (control
#: messages cut reasons at 2,000 characters; a job may have thousands of subtasks).
MAX_NAMED = 10


@dataclass(slots=True)
class _Pending:
    triggered_at: float
    acked: dict[str, AckReceived] = field(default_factory=dict)
    #: The workers that said, while it was pending, that their checkpoint storage was
    #: slow to take a snapshot, and their latest such line (`Heartbeat.storing`).
    storing: dict[str, str] = field(default_factory=dict)
    #: A subtask acked it having done something, or a worker woke while it was
    #: pending: the job is not idle ({ref}`coordinator-idle`).
    busy: bool = False


@dataclass(slots=True)
class Coordinator:
    """Coordinates the checkpoints of one job over a fixed set of subtasks.

    Start it with `start(now)`, which returns the `Recover` that opens a new
    generation (a rollback to the latest completed checkpoint: it cannot know what
    the workers did while it was away), or with `adopt` when the running
    generation's workers are alive (`kstream.protocol.resume.decide_adoption`).
    """

    tasks: frozenset[str]
    config: CoordinatorConfig = field(default_factory=CoordinatorConfig)
    history: History = field(default_factory=History)
    #: The workers whose subtasks make up `tasks` (``w0``...). Empty: unknown, and
    #: the first trigger after a recovery waits the interval alone, not their restores.
    workers: frozenset[str] = frozenset()
    #: The worker that runs each subtask (task -> worker). Empty: unknown, and a
    #: rollback for timed-out checkpoints names no worker unresponsive (a stuck one
    #: is then replaced once found silent in the generations after it).
    placement: Mapping[str, str] = field(default_factory=dict)
    generation: int = field(init=False)
    #: The largest checkpoint id seen (`kstream.protocol.snapshot_id`).
    clock: LamportClock = field(init=False)
    completed: list[int] = field(init=False)
    pending: dict[int, _Pending] = field(default_factory=dict, init=False)
    last_trigger: float | None = field(default=None, init=False)
    heartbeats: dict[str, float] = field(default_factory=dict, init=False)
    #: Per worker, in how many generations in a row it was found silent.
    silences: dict[str, int] = field(default_factory=dict, init=False)
    #: Workers heard from in the current generation with a heartbeat not marked
    #: restoring: who is running it, not still restoring (`Heartbeat.restoring`).
    joined: set[str] = field(default_factory=set, init=False)
    #: Whether the current generation has had no checkpoint yet: its first waits
    #: for every worker to join as well as for the interval.
    awaiting_join: bool = field(default=False, init=False)
    #: Checkpoints of the current generation that timed out since its last
    #: completion (declines are not counted), and the subtasks that had not acked
    #: the last of them.
    timeouts: int = field(default=0, init=False)
    unacked: frozenset[str] = field(default=frozenset(), init=False)
    #: Per worker, the call of the job's code its latest heartbeat of the current
    #: generation reported stuck: (`Heartbeat.stuck_on`, `Heartbeat.stuck`).
    stuck: dict[str, tuple[str, str]] = field(default_factory=dict, init=False)
    #: The stuck calls behind rollbacks for timeouts so far (`Heartbeat.stuck_on`).
    stalled_on: set[str] = field(default_factory=set, init=False)
    #: Per worker, the snapshot its latest heartbeat of the current generation said
    #: the checkpoint storage is slow to take (`Heartbeat.storing`).
    storing: dict[str, str] = field(default_factory=dict, init=False)
    started: bool = field(default=False, init=False)
    #: A checkpoint is wanted now (`request_checkpoint`): the next `Tick` triggers one
    #: without waiting for the interval (still within `max_in_flight`, and after every
    #: worker joined a new generation).
    asap: bool = field(default=False, init=False)
    #: Per worker, the process (incarnation) running it in the current generation:
    #: the first heard from. Another process claiming a live index is a second
    #: incarnation (a restarted worker whose predecessor the coordinator never saw
    #: die, or a zombie): the job rolls back keeping the newest, which is named.
    incarnations: dict[str, str] = field(default_factory=dict, init=False)
    #: Completed checkpoints in a row of which every ack was quiet, with no worker
    #: waking while they were pending; from `config.idle_after` on, the job is idle.
    quiet_completions: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        if not self.tasks:
            raise ConfigurationError("a job needs at least one subtask")
        if self.placement and set(self.placement) != self.tasks:
            raise ConfigurationError("the placement must name the worker of every subtask")
        self.generation = self.history.generation
        self.clock = LamportClock(self.history.max_checkpoint)
        self.completed = sorted(self.history.completed)

    @property
    def idle(self) -> bool:
        """Whether the job counts as idle: it is checkpointed every `idle_interval`."""
        return 0 < self.config.idle_after <= self.quiet_completions

    @property
    def _interval(self) -> float:
        if self.idle:
            return max(self.config.interval, self.config.idle_interval)
        return self.config.interval

    def _woke(self) -> None:
        """Something happened: the job is not idle, and no pending checkpoint is quiet."""
        self.quiet_completions = 0
        for p in self.pending.values():
            p.busy = True

    @property
    def latest_completed(self) -> int | None:
        """The restore point: the completed checkpoint with the largest id."""
        return self.completed[-1] if self.completed else None

    def start(self, now: float) -> list[Command]:
        """Open a new generation restoring the latest completed checkpoint."""
        self.started = True
        return self._recover(now, "job started")

    def adopt(
        self,
        now: float,
        in_flight: tuple[int, ...],
        processes: tuple[tuple[str, str], ...] = (),
    ) -> list[Command]:
        """Carry on in the history's generation, whose workers are alive
        (`kstream.protocol.resume.decide_adoption`): no rollback. The checkpoints
        `in_flight` are aborted (this coordinator never saw their acks); the next is
        triggered an interval from now. `processes` are the workers' incarnations.
        """
        self.started = True
        self.pending.clear()
        self.last_trigger = now
        self.awaiting_join = False
        self.heartbeats = dict.fromkeys(self.workers, now)
        self.joined = set(self.workers)
        self.timeouts, self.unacked = 0, frozenset()
        self.stuck = {}
        self.storing = {}
        self.incarnations = {w: p for w, p in processes if p}
        return [Abort(n, self.generation, "coordinator restarted") for n in in_flight]

    def handle(self, event: Event) -> list[Command]:
        """Feed one event; return the commands to carry out, in order.

        Before `start` only `CheckpointDamaged` is acted upon (the runner
        validates the restore point before opening the first generation).
        """
        if isinstance(event, CheckpointDamaged):
            return self._on_damaged(event)
        if not self.started:
            return []
        match event:
            case Tick():
                return self._on_tick(event.now)
            case Paused():
                self._on_paused(event)
                return []
            case AckReceived():
                return self._on_ack(event)
            case DeclineReceived():
                return self._on_decline(event)
            case Heartbeat(waiting=True):
                if event.generation != self.generation or not event.process:
                    return []  # a generation opened since: the process joins that one
                # It will not join a generation another process of its index runs,
                # and must not (it would write what that one wrote, again): open a
                # new one, keeping it, as for any second claim. Not a sign of life
                # of the worker: that may be the dead predecessor it replaces.
                return self._recover(
                    event.now,
                    f"worker {event.worker} restarted: process {event.process} waits "
                    f"to join (was {self.incarnations.get(event.worker) or 'unknown'})",
                    kept=((event.worker, event.process),),
                )
            case Heartbeat():
                if event.generation == self.generation:
                    known = self.incarnations.setdefault(event.worker, event.process)
                    if event.process and known and known != event.process:
                        return self._recover(
                            event.now,
                            f"worker {event.worker} claimed by a second process "
                            f"{event.process} (was {known})",
                            kept=((event.worker, event.process),),
                        )
                    # Restoring or running, the worker is alive in this generation.
                    self.heartbeats[event.worker] = event.now
                    self.silences.pop(event.worker, None)
                    if not event.restoring:
                        self.joined.add(event.worker)
                    if event.stuck:
                        self.stuck[event.worker] = (event.stuck_on, event.stuck)
                    else:
                        self.stuck.pop(event.worker, None)
                    if event.storing:
                        self.storing[event.worker] = event.storing
                        for p in self.pending.values():
                            p.storing[event.worker] = event.storing
                    else:
                        self.storing.pop(event.worker, None)
                    if event.woke:
                        self._woke()
                return []
            case WorkerLost():
                self.silences.pop(event.worker, None)
                return self._recover(event.now, f"worker {event.worker} lost: {event.reason}")
            case InitiatedReceived():
                return self._on_initiated(event)
            case _:
                assert_never(event)

    def _on_paused(self, event: Paused) -> None:
        """Hold the pause against no worker's liveness and no checkpoint's timeout."""
        for w, seen in self.heartbeats.items():
            self.heartbeats[w] = min(seen + event.duration, event.now)
        for p in self.pending.values():
            p.triggered_at = min(p.triggered_at + event.duration, event.now)

    def _on_damaged(self, event: CheckpointDamaged) -> list[Command]:
        if event.checkpoint not in self.completed:
            return []  # already dropped (a late report from an older generation)
        was_latest = event.checkpoint == self.latest_completed
        self.completed.remove(event.checkpoint)
        why = f"checkpoint {event.checkpoint} is damaged: {event.reason}"
        if was_latest and not self.completed:
            return [Halt(f"{why}; no older completed checkpoint remains")]
        if was_latest and self.started:
            return self._recover(event.now, why)
        return []

    def _recover(
        self,
        now: float,
        reason: str,
        unresponsive: tuple[str, ...] = (),
        stalled: tuple[str, ...] = (),
        kept: tuple[tuple[str, str], ...] = (),
    ) -> list[Command]:
        self.generation += 1
        self.incarnations = dict(kept)
        self.pending.clear()
        # The first trigger waits an interval and for every worker to restore
        # (`_on_tick`): one sent earlier would find subtasks still restoring.
        self.last_trigger = now
        self.awaiting_join = True
        # Everyone gets a fresh liveness allowance in the new generation.
        self.heartbeats = dict.fromkeys(self.heartbeats, now)
        self.joined = set()
        self.timeouts, self.unacked = 0, frozenset()
        self.stuck = {}
        self.storing = {}
        self.quiet_completions = 0
        return [
            Recover(self.generation, self.latest_completed, reason, unresponsive, stalled, kept)
        ]

    def _on_tick(self, now: float) -> list[Command]:
        commands: list[Command] = []
        last_timed_out: int | None = None
        for n, p in sorted(self.pending.items()):
            if now - p.triggered_at > self.config.timeout:
                del self.pending[n]
                unacked = self.tasks.difference(p.acked)
                reason = f"not complete within {self.config.timeout:g}s"
                storing = {**p.storing, **self.storing}
                slow = self._storing(unacked, storing)
                if slow:
                    reason += f"; {slow[0]}"  # "w0 storing s1-0's snapshot of ..."
                commands.append(Abort(n, self.generation, reason))
                holding = {self.placement[t] for t in unacked if t in self.placement}
                # Held up by the storage alone, even if it has just answered again
                # (the snapshots queued behind a hang are written, their acks are
                # on the way): not a stall, so it neither counts nor breaks the run.
                if holding and holding <= storing.keys():
                    continue
                self.timeouts += 1
                self.unacked = unacked
                last_timed_out = n
        reasons: list[str] = []
        unresponsive: set[str] = set()
        stalled: set[str] = set()
        silent = sorted(
            w for w, seen in self.heartbeats.items() if now - seen > self.config.liveness_timeout
        )
        if silent:
            for w in silent:
                self.silences[w] = self.silences.get(w, 0) + 1
            unresponsive.update(w for w in silent if self.silences[w] >= UNRESPONSIVE_AFTER)
            reasons.append(
                f"worker {silent[0]} silent for more than {self.config.liveness_timeout:g}s"
            )
        if last_timed_out is not None and self.timeouts > self.config.tolerable_timeouts:
            stalled = {self.placement[t] for t in self.unacked if t in self.placement}
            calls = sorted(self.stuck[w] for w in stalled if w in self.stuck)
            again = [line for on, line in calls if on in self.stalled_on]
            if again:
                return [
                    *commands,
                    Fail(
                        f"{again[0]}; stuck again after the rollback it caused "
                        f"({self.timeouts} checkpoints timed out in a row): the job fails "
                        "rather than roll back for ever"
                    ),
                ]
            self.stalled_on.update(on for on, _ in calls)
            unresponsive |= stalled
            reasons.append(self._timeouts_reason(last_timed_out, stalled))
            reasons += [line for _, line in calls[:1]]
        if reasons:
            for w in unresponsive:
                self.silences.pop(w, None)  # its replacement starts with a clean record
            return commands + self._recover(
                now, "; ".join(reasons), tuple(sorted(unresponsive)), tuple(sorted(stalled))
            )
        due = self.last_trigger is None or now - self.last_trigger >= self._interval
        due = due or self.asap
        if self.awaiting_join and self.workers:
            due = due and self.all_joined
        if due and len(self.pending) < self.config.max_in_flight:
            n = self.clock.tick(COORDINATOR)
            self.pending[n] = _Pending(triggered_at=now)
            self.last_trigger = now
            self.awaiting_join = False
            self.asap = False
            commands.append(Trigger(n, self.generation))
        return commands

    def request_checkpoint(self) -> None:
        """Trigger a checkpoint at the next `Tick` that may (a savepoint's).

        The caller takes the first checkpoint triggered after this call that
        completes; if it is aborted, the caller asks again.
        """
        self.asap = True

    def _storing(self, tasks: frozenset[str], storing: dict[str, str]) -> list[str]:
        """The slow-storage lines (`storing`) of the workers of `tasks`, as "<worker> <line>"."""
        workers = sorted({self.placement[t] for t in tasks if t in self.placement})
        return [f"{w} {storing[w]}" for w in workers if w in storing]

    def _timeouts_reason(self, checkpoint: int, workers: set[str]) -> str:
        """Why the job rolls back for timeouts: which checkpoint, how many, who never acked."""
        names = sorted(self.unacked)
        listed = ", ".join(names[:MAX_NAMED])
        if len(names) > MAX_NAMED:
            listed += f" and {len(names) - MAX_NAMED} more"
        on = f" (on {', '.join(sorted(workers))})" if workers else ""
        return (
            f"checkpoint {checkpoint} not complete within {self.config.timeout:g}s: timeout "
            f"{self.timeouts} in a row, at most {self.config.tolerable_timeouts} tolerated; "
            f"never acked by {listed}{on}"
        )

    def next_trigger_in(self, now: float) -> float | None:
        """Seconds from `now` until the earliest `Tick` that acts, absent other
        events and liveness timeouts: one that triggers a checkpoint or aborts
        one past its timeout (which may roll the job back) (0: one at `now` may);
        None while only an event can make one act (not started, or the
        generation's first checkpoint waiting for workers to join: nothing is
        pending then).

        With the in-flight limit reached, that is when the oldest pending
        checkpoint times out (a `Tick` just after it aborts it, then triggers).
        The caller waits for events at most this long, so a trigger is not late
        by a turn of its loop; the rule itself is `_on_tick`'s.
        """
        if not self.started:
            return None
        if self.awaiting_join and self.workers and not self.all_joined:
            return None
        due = 0.0 if self.last_trigger is None else self.last_trigger + self._interval
        if self.asap:
            due = now
        if self.pending:
            oldest = min(p.triggered_at for p in self.pending.values()) + self.config.timeout
            full = len(self.pending) >= self.config.max_in_flight
            due = oldest if full else min(due, oldest)
        return max(0.0, due - now)

    @property
    def all_joined(self) -> bool:
        """Whether every worker of `workers` restored in the current generation
        (False while `workers` is unknown)."""
        return bool(self.workers) and self.workers <= self.joined

    def _on_ack(self, ack: AckReceived) -> list[Command]:
        pending = self.pending.get(ack.checkpoint)
        if ack.generation != self.generation or pending is None or ack.task not in self.tasks:
            return []
        pending.acked[ack.task] = ack
        pending.busy = pending.busy or not ack.quiet
        if len(pending.acked) < len(self.tasks):
            return []
        n = ack.checkpoint
        del self.pending[n]
        self.quiet_completions = 0 if pending.busy else self.quiet_completions + 1
        commands: list[Command] = [
            Complete(
                n,
                self.generation,
                duration_s=max(a.now for a in pending.acked.values()) - pending.triggered_at,
                size=sum(a.size for a in pending.acked.values()),
                alignment_ms=max(a.alignment_ms for a in pending.acked.values()),
            )
        ]
        # An older pending checkpoint is subsumed: n is a newer consistent cut
        # (concurrent snapshots are independent: an older one may complete still).
        for old in sorted(m for m in self.pending if m < n and not self.config.concurrent):
            del self.pending[old]
            commands.append(Abort(old, self.generation, f"subsumed by checkpoint {n}"))
        # The largest, unless concurrent: every older pending one was just aborted.
        bisect.insort(self.completed, n)
        self.timeouts, self.unacked = 0, frozenset()  # the job makes progress again
        if len(self.completed) > self.config.retained:
            dropped = tuple(self.completed[: -self.config.retained])
            del self.completed[: -self.config.retained]
            commands.append(Discard(dropped))
        return commands

    def _on_initiated(self, event: InitiatedReceived) -> list[Command]:
        """A source started `checkpoint`: register it and relay its trigger, or abort it."""
        n = event.checkpoint
        self.clock.observe(n)
        if event.generation != self.generation or event.task not in self.tasks:
            return []  # a generation everyone left: its barriers are dropped as stale
        if n in self.pending or n in self.completed:
            return []  # known already (the same announcement read twice)
        latest = self.latest_completed
        if latest is not None and n < latest and not self.config.concurrent:
            # Whatever it would cut, a newer cut is already the restore point.
            return [Abort(n, self.generation, f"older than completed checkpoint {latest}")]
        # Its initiator took nothing in flight when it started `n` (it starts one only
        # then), so every pending smaller id still has to reach it, and it will
        # decline them all (snapshots are taken in id order): abort them now, so
        # that the race of a trigger with a source's start costs one snapshot, not
        # both.
        overtaken = sorted(m for m in self.pending if m < n and not self.config.concurrent)
        commands: list[Command] = []
        for m in overtaken:
            del self.pending[m]
            commands.append(Abort(m, self.generation, f"overtaken by {n}, started by {event.task}"))
        if len(self.pending) >= self.config.max_in_flight:
            # Declined rather than queued: its initiator took it already, and its
            # barriers are on their way; an abort releases them everywhere.
            why = (
                f"started by {event.task} while {len(self.pending)} checkpoints were "
                f"in flight (at most {self.config.max_in_flight})"
            )
            return [*commands, Abort(n, self.generation, why)]
        self.pending[n] = _Pending(triggered_at=event.now)
        # A snapshot started anywhere restarts the interval: the coordinator's
        # own come only when no source started one for an interval, and do not
        # race a source's into the in-flight limit right after it.
        self.last_trigger = event.now
        self.awaiting_join = False
        return [*commands, Trigger(n, self.generation)]

    def _on_decline(self, decline: DeclineReceived) -> list[Command]:
        if decline.generation != self.generation or decline.checkpoint not in self.pending:
            return []
        del self.pending[decline.checkpoint]
        return [
            Abort(
                decline.checkpoint,
                self.generation,
                f"declined by {decline.task}: {decline.reason}",
            )
        ]


def replay(records: Iterable[ControlMessage], retained: int) -> History:
    """Rebuild `History` from control-topic messages, in topic order."""
    if retained < 1:
        # `completed[-0:]` would keep every checkpoint instead of none.
        raise ConfigurationError(f"retained checkpoints must be >= 1, got {retained}")
    generation = 0
    max_checkpoint = 0
    completed: list[int] = []
    identity: JobIdentity | None = None
    for msg in records:
        generation = max(generation, generation_of(msg) or 0)
        max_checkpoint = max(max_checkpoint, checkpoint_of(msg) or 0)
        match msg:
            case Recovered(fresh=True):
                # A fresh start: earlier checkpoints belong to a previous life of the job name.
                completed, identity = [], None
            case Completed():
                completed.append(msg.checkpoint)
                identity = msg.identity
            case (
                Recovered()
                | Triggered()
                | Initiated()
                | Acked()
                | Declined()
                | Aborted()
                | WorkerAlive()
                | WorkerFailed()
                | RestoreFailed()
                | Presence()
            ):
                pass  # only their generation and checkpoint ids count
            case SavepointRequested() | SavepointDone():
                pass  # no checkpoint of their own
            case _:
                assert_never(msg)
    # The restore points are the largest ids (completions come in id order anyway).
    return History(generation, max_checkpoint, tuple(sorted(completed)[-retained:]), identity)
