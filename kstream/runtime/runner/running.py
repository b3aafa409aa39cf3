"""A started job: the coordinator's I/O shell, its loop, and its wind-up.

`RunningJob` is what `kstream.runtime.runner.runner.Runner.start` returns. It
turns control-topic messages and child-process exits into events of
`kstream.protocol.coordinator.Coordinator` and carries out the commands
(control messages, checkpoint deletion, recovery); it restarts workers within
a budget (`kstream.protocol.restarts`), purges what no restart reads again
(`kstream.runtime.runner.purge`, `kstream.protocol.retention`) and counts the
run (`kstream.runtime.runner.stats`, `kstream.runtime.runner.report`). Call
`step` in a loop, then `stop`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import assert_never

from kstream.dataflow.plan import Plan
from kstream.errors import (
    CheckpointDamagedError,
    CheckpointError,
    JobFailedError,
    KafkaUnavailableError,
    ProducerFencedError,
)
from kstream.infra.admin import Admin
from kstream.infra.logs import context as log_context
from kstream.protocol.coordination import (
    UNRESPONSIVE_AFTER,
    Abort,
    AckReceived,
    CheckpointDamaged,
    Command,
    Complete,
    DeclineReceived,
    Discard,
    Event,
    Fail,
    Halt,
    InitiatedReceived,
    Paused,
    Recover,
    Tick,
    Trigger,
    WorkerLost,
    heartbeat_event,
)
from kstream.protocol.coordinator import Coordinator
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
)
from kstream.protocol.names import control_topic
from kstream.protocol.pause import PauseWatch
from kstream.protocol.presence import announce_due
from kstream.protocol.presence import period_s as presence_period_s
from kstream.protocol.restarts import RestartBudget
from kstream.protocol.resume import Adopt
from kstream.protocol.retention import ControlRetention, restatement
from kstream.runtime.checkpoint.storage import ManagedCheckpointStorage
from kstream.runtime.config import RunConfig
from kstream.runtime.control import ControlReader, ControlWriter
from kstream.runtime.lock import ProcessLock
from kstream.runtime.runner.metrics import RunnerMetrics
from kstream.runtime.runner.preflight import missing_topics
from kstream.runtime.runner.purge import ChannelPurger
from kstream.runtime.runner.report import RunReport
from kstream.runtime.runner.savepoints import Savepoints
from kstream.runtime.runner.stats import RunStats
from kstream.runtime.runner.supervisor import Supervisor

__all__ = ["FALLBACK_DUPLICATES", "RunningJob", "halt_advice", "validate"]

log = logging.getLogger("kstream.runner")

#: Said with every fallback: sinks may already have committed output of newer checkpoints.
FALLBACK_DUPLICATES = (
    "Output the sinks committed after that checkpoint will be written again "
    "(duplicates, also under exactly-once)"
)
#: At the stop, how long the runner waits for the checkpoint deletes it asked for.
STORAGE_CLOSE_TIMEOUT_S = 30.0
#: After the workers exit, how long the runner reads their final heartbeats (counts).
WIND_UP_TIMEOUT_S = 10.0
#: How often a running job checks that its topics still exist (a metadata request).
TOPIC_CHECK_S = 30.0
#: How long the runner's loop may wait for that answer; no answer is no verdict.
TOPIC_CHECK_TIMEOUT_S = 2.0


def validate(
    storage: ManagedCheckpointStorage, plan: Plan, identity: JobIdentity, config: RunConfig, n: int
) -> list[str]:
    """Why checkpoint `n` cannot be restored (empty: it can).

    Its subtasks are those of the parallelism it was taken at (`stored_tasks`:
    a rescaled job restores one taken at another). Its snapshots must carry
    the job's fingerprint, or the one the job had before key groups (a
    checkpoint of key format 1 or 2 resumed by this kstream).
    """
    problems = storage.validate(n, stored_tasks(storage, plan, n))
    # Under --accept-changes the snapshots carry the old job's fingerprint.
    if problems or config.start.accept_changes:
        return problems
    known = {identity.fingerprint, dataclasses.replace(identity, max_parallelism=0).fingerprint}
    for task in stored_tasks(storage, plan, n):
        try:
            meta = storage.load(n, task)
        except CheckpointError as exc:
            # Damaged since the storage's own check (or read twice and found so
            # the second time): a problem like any other, for the fallback.
            return [str(exc)]
        if meta.identity not in known:
            theirs = meta.identity or "none"
            return [f"{task} of checkpoint {n} was taken by another job (identity {theirs})"]
    return []


def stored_tasks(storage: ManagedCheckpointStorage, plan: Plan, n: int) -> list[str]:
    """The subtasks checkpoint `n` holds: per stage, the parallelism its first snapshot
    records (the plan's when it records none, or is missing: then `validate` says so)."""
    tasks: list[str] = []
    for stage in plan.job.stages:
        try:
            p = storage.load(n, f"s{stage.index}-0").parallelism
        except CheckpointError:
            p = 0
        tasks += [f"s{stage.index}-{i}" for i in range(p or plan.parallelism[stage.index])]
    return tasks


def halt_advice(storage: ManagedCheckpointStorage) -> str:
    """The way on when no intact checkpoint remains."""
    return (
        "Start it from scratch with --fresh (state is dropped and the input is read "
        f"again, so output is written again), or restore {storage.location} from a backup"
    )


class RunningJob:
    """Job `plan.job` coordinated by `coordinator`, which `Runner.start` built from
    the control topic (read up to `seen`) and whose restore point it settled.

    `fresh`: the first `recover` says the job started from scratch.
    """

    def __init__(
        self,
        config: RunConfig,
        *,
        plan: Plan,
        identity: JobIdentity,
        storage: ManagedCheckpointStorage,
        stats: RunStats,
        report: RunReport,
        supervisor: Supervisor,
        purger: ChannelPurger,
        lock: ProcessLock,
        admin: Admin,
        say: Callable[[str], None],
        control_history: int,
        coordinator: Coordinator,
        control: ControlWriter,
        reader: ControlReader,
        seen: list[tuple[int, ControlMessage]],
        fresh: bool,
        adoption: Adopt | None = None,
        metrics: RunnerMetrics | None = None,
    ) -> None:
        self.config = config
        self.plan = plan
        self.name = plan.job.name
        self.identity = identity
        self.storage = storage
        self.stats = stats
        #: What the metrics endpoint serves, if one is started (`kstream.infra.metrics`).
        self.metrics = metrics if metrics is not None else RunnerMetrics(self.name, stats)
        self.report = report
        self.supervisor = supervisor
        self.purger = purger
        self.lock = lock
        self.say = say
        self.coordinator = coordinator
        self.control = control
        self.reader = reader
        self.spawn = config.start.spawn
        #: Control messages kept before the first one a restart reads (for people).
        self.control_history = control_history
        self._admin = admin
        self._announce_fresh = fresh
        #: The running generation this coordinator carries on in, if it adopts one.
        self.adoption = adoption
        #: This runner's identity in its `coordinator` announcements.
        self._incarnation = uuid.uuid4().hex
        self._announced = 0.0
        #: The period the last announcement promised (`announce_due`).
        self._promised = presence_period_s(False)
        #: What a restart reads of the control topic; the rest is purged.
        self.retention = ControlRetention(config.checkpoints.retained)
        #: The control topic's end as far as read, and whether a restated
        #: `recover` was sent and not read back yet.
        self._control_end = 0
        self._restating = False
        self._acks: dict[int, dict[str, Acked]] = {}
        self._failed: str | None = None
        self._topics_checked = time.monotonic()
        #: Whether the current generation completed a checkpoint: the spare worker
        #: process is (re)started only then.
        self._spare_due = False
        #: Pauses of this process itself, long enough to make workers look silent.
        self._pauses = PauseWatch(config.checkpoints.liveness_timeout / 2)
        #: Worker restarts, against the budget (`kstream.protocol.restarts`).
        self._restarts = RestartBudget()
        #: Savepoint requests (`kstream.runtime.runner.savepoints`); checkpoints whose
        #: deletion waits for their savepoint's copy.
        self.savepoints = Savepoints(config, plan, identity, coordinator, self._send, say)
        self._discard_later: set[int] = set()
        self._sweep_due = False  # a completion was held: sweep after the commit
        for offset, m in seen:
            self._saw(offset, m)

    def begin(self) -> None:
        """Announce this runner, open the first generation, spawn the workers."""
        self._announce()
        if (a := self.adoption) is not None:
            # The workers run this generation: carry on, no rollback.
            self.stats.generation = a.generation
            self.report.started_at = time.monotonic()
            aborted = ""
            if a.in_flight:
                aborted = f"; aborting checkpoints {', '.join(map(str, a.in_flight))}"
            self.say(f"adopting generation {a.generation}: its workers are alive{aborted}")
            now = time.monotonic()
            self._execute(self.coordinator.adopt(now, a.in_flight, a.processes))
            return
        self._execute(self.coordinator.start(time.monotonic()))
        latest = self.coordinator.latest_completed
        if latest is not None:
            self.say(f"resuming from checkpoint {latest}")
        if self.spawn:
            # After the rollback is written: they join this generation.
            for w in range(self.config.workers):
                self.supervisor.spawn(w)

    def _announce(self, *, stopped: bool = False) -> None:
        """Tell the control topic this runner coordinates the job (or stopped doing so)."""
        now = time.time()
        presence = Presence(
            self._incarnation,
            os.getpid(),
            socket.gethostname(),
            str(self.config.state_dir),
            now,
            stopped,
            presence_period_s(self.coordinator.idle),
        )
        self.control.send(presence, flush=stopped)
        self._announced, self._promised = time.monotonic(), presence.every

    def _announce_if_due(self, now: float) -> None:
        if announce_due(now - self._announced, self._promised, self.coordinator.idle):
            self._announce()

    def _restorable(self, c: Recover) -> bool:
        """Validate the checkpoint `c` restores; if damaged, fall back (returns False)."""
        if c.checkpoint is None:
            return True
        problems = validate(self.storage, self.plan, self.identity, self.config, c.checkpoint)
        if not problems:
            return True
        self._damaged(c.checkpoint, problems[0])
        return False

    def _damaged(self, checkpoint: int, reason: str) -> None:
        """Checkpoint `checkpoint` cannot be restored: fall back loudly, or halt."""
        commands = self.coordinator.handle(CheckpointDamaged(checkpoint, reason, time.monotonic()))
        fallback = next((c for c in commands if isinstance(c, Recover)), None)
        if fallback is not None:
            self.say(
                f"WARNING: checkpoint {checkpoint} is damaged ({reason}); falling back to "
                f"checkpoint {fallback.checkpoint}. {FALLBACK_DUPLICATES}"
            )
        self._execute(commands)

    # -- workers ------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether every worker has restored and runs the current generation (not
        while a recovery is under way, or before the first one finished)."""
        c = self.coordinator
        return len(c.joined) >= self.config.workers

    def log_path(self, index: int) -> Path:
        return self.supervisor.log_path(index)

    def worker_pids(self) -> dict[int, int]:
        return self.supervisor.pids()

    def _check_workers(self, now: float) -> None:
        for index, _ in self.supervisor.exits():
            failure = self.supervisor.failure(index)
            if failure.deterministic:
                self._fatal(f"w{index}", failure.cause, failure.log)
                return
            how = failure.cause
            if not self._restart_allowed(index, how, now, failure.log):
                return
            # The rollback is announced before the replacement starts, so it joins the new
            # generation instead of the failed one.
            self._execute(self.coordinator.handle(WorkerLost(f"w{index}", how, now)))
            self._respawn(index)

    def _fatal(self, worker: str, cause: str, log: str) -> None:
        """Fail the job with `worker`'s `cause`: a failure every restart would meet again.

        The first cause stands: a worker reports it both on the control topic and
        when its process exits.
        """
        see = f"; see {log}" if log else ""
        self._failed = self._failed or (
            f"worker {worker}: {cause} (not retried: it would fail the same way again{see})"
        )

    def _replace_unresponsive(self, c: Recover, now: float) -> None:
        """Replace the started workers the coordinator named unresponsive in `c`: silent
        generation after generation, or running subtasks that never acked checkpoints
        that kept timing out.

        Runs after the rollback was announced, so the replacement joins the new
        generation. Workers started by hand (`--no-spawn`) are left alone.
        """
        for name in c.unresponsive:
            index = int(name.removeprefix("w"))
            if not self.supervisor.kill(index):
                continue
            why = (
                "ran subtasks that never acked checkpoints timing out in a row"
                if name in c.stalled
                else f"sent no heartbeat in {UNRESPONSIVE_AFTER} generations in a row"
            )
            self.say(f"worker {name} {why}: killed and restarted")
            if not self._restart_allowed(index, "unresponsive", now):
                return
            self._respawn(index)

    def _restart_allowed(self, index: int, how: str, now: float, log: str = "") -> bool:
        """Count a restart of worker `index`; False (and the job failed) when too many."""
        if self._restarts.allow(now):
            return True
        budget = self._restarts
        self._failed = (
            f"workers died {budget.max_restarts} times within {budget.window_s:.0f}s; "
            f"last: worker {index}: {how}; see {log or self.log_path(index)}"
        )
        return False

    def _respawn(self, index: int) -> None:
        self.stats.restarts += 1
        self.supervisor.check_free(index)
        self.supervisor.spawn(index)

    # -- the loop -----------------------------------------------------------

    def step(self, timeout: float = 0.05) -> None:
        """One round: control messages, clock, worker liveness. Raises `JobFailedError`.

        Waits for control messages up to `timeout`, but no longer than until the
        next checkpoint is due, and returns as soon as one arrives.
        """
        try:
            self._step(timeout)
        except KafkaUnavailableError:
            # A deleted control topic fails its writes before the periodic check
            # sees it: say which topic went, and the way on, rather than "pending".
            if self._topics_gone():
                raise JobFailedError(self._failed) from None
            raise

    @property
    def finished(self) -> bool:
        """Whether the job is to stop: a savepoint asked for with ``--stop`` is written."""
        return self.savepoints.finished

    def _hold(self, timeout: float) -> None:
        """A round while a stop savepoint is written: nothing else goes on."""
        self.savepoints.wait(timeout)
        self._savepoints_done()
        self._announce_if_due(time.monotonic())
        self._pauses.turn(time.monotonic())

    def _savepoints_done(self) -> None:
        """Outcomes of savepoints written; delete the checkpoints they held back."""
        if not self.savepoints.poll():
            return
        for n in sorted(self._discard_later - self.savepoints.protected):
            self._discard_later.discard(n)
            self.storage.discard(n)
            self.purger.discarded(n)

    def _step(self, timeout: float) -> None:
        if self.savepoints.holding():
            self._hold(timeout)
            return
        self._savepoints_done()
        self._paused(self._pauses.turn(time.monotonic()))
        due = self.coordinator.next_trigger_in(time.monotonic())
        if due is not None:
            timeout = min(timeout, due)
        polled = self.reader.poll(timeout)
        # Stopped inside the poll, say (Ctrl-Z lands anywhere): told before its messages.
        self._paused(self._pauses.turn(time.monotonic(), timeout))
        for offset, msg in polled:
            self._saw(offset, msg)
            event = self._event(msg, time.monotonic())
            if event is not None:
                # Held for the clock's commands below: the trigger a completion made due.
                self._execute(self.coordinator.handle(event), release=False)
            if self.savepoints.holding():
                self._release()
                return  # the job stops at this checkpoint: nothing after it counts
        now = time.monotonic()
        self._announce_if_due(now)
        self._execute(self.coordinator.handle(Tick(now)))
        self._notify(self.report.tick(now))
        if self.spawn:
            self._check_workers(now)
            if self._spare_due:
                # After the generation's first checkpoint: its imports would slow that down.
                self.supervisor.keep_spare()
        if now - self._topics_checked >= TOPIC_CHECK_S:
            self._topics_checked = now
            self._topics_gone()
        if self._failed:
            raise JobFailedError(self._failed)
        self._retain_control()
        self.purger.maybe_purge(now)

    def _paused(self, duration: float) -> None:
        """This process stood still for `duration` seconds (0: it did not): say so, and
        hold it against no worker (it read no heartbeat then) and no checkpoint."""
        if not duration:
            return
        self.say(
            f"the runner itself did not run for {duration:.0f}s (stopped, paused or starved "
            "of CPU); the workers' silence in that time is not held against them"
        )
        self.coordinator.handle(Paused(duration, time.monotonic()))

    def _saw(self, offset: int, msg: ControlMessage) -> None:
        self.retention.saw(offset, msg)
        self._control_end = max(self._control_end, offset + 1)
        if isinstance(msg, Recovered) and msg.restated:
            self._restating = False

    def _retain_control(self) -> None:
        """Name the control topic's purge point; restate a `recover` that holds it back.

        A generation that lasts keeps its `recover` at the point a joining
        worker must read from; once it is what holds the purge point back and
        is older than the history kept anyway, a copy after it (`restatement`)
        lets the purge pass it: about once per `control_history` messages.
        """
        keep = self.retention.keep_from()
        if keep is None:
            return
        tail = self._control_end - self.control_history
        recovered, at = self.retention.recovered, self.retention.recovered_at
        holds_back = recovered is not None and at == keep and at < tail
        # Only the current generation's: a copy of an older one written after a newer
        # `recover` (sent, not read back yet) would be the latest a joining worker sees.
        current = recovered is not None and recovered.generation == self.stats.generation
        if recovered is not None and holds_back and current and not self._restating:
            self._restating = True
            self.control.send(restatement(recovered), flush=False)
        self.purger.control(control_topic(self.name), min(keep, tail))

    def _topics_gone(self) -> bool:
        """Whether a topic of the job was deleted; if so the job is to stop, saying which.

        A deleted input stalls a job silently and a deleted output makes every
        commit fail, recovery after recovery: both need the user, not a retry.
        """
        missing = missing_topics(self.plan, self._admin, TOPIC_CHECK_TIMEOUT_S)
        if not missing:
            return False
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        self._failed = missing[0] + more
        return True

    def _event(self, msg: ControlMessage, now: float) -> Event | None:
        """The coordinator's event for a message read; other messages are acted on here."""
        match msg:
            case Acked(checkpoint=n, generation=g, task=task):
                if g == self.stats.generation:
                    self._acks.setdefault(n, {})[task] = msg
                return AckReceived(n, g, task, now, msg.size, msg.alignment_ms, msg.quiet)
            case Declined():
                return DeclineReceived(msg.checkpoint, msg.generation, msg.task, msg.reason, now)
            case Initiated():
                # The report learns of it before the relay or abort the coordinator answers.
                self._notify(self.report.observe(msg, now))
                return InitiatedReceived(msg.checkpoint, msg.generation, msg.task, now)
            case WorkerAlive():
                self._notify(self.report.observe(msg, now))
                return heartbeat_event(msg, now)
            case WorkerFailed():
                index = msg.worker.removeprefix("w")
                log = self.log_path(int(index)) if self.spawn and index.isdecimal() else ""
                self._fatal(msg.worker, msg.reason, str(log))
            case RestoreFailed(generation=g, checkpoint=damaged):
                if g == self.stats.generation and damaged is not None:
                    self._damaged(damaged, f"worker {msg.worker}: {msg.reason}")
            case Recovered() | Triggered() | Completed() | Aborted():
                pass  # this runner's own, heard back (`_send` told the report already)
            case Presence():
                pass  # another runner's: only looked for at start-up
            case SavepointRequested():
                self.savepoints.requested(msg)
            case SavepointDone():
                pass  # this runner's own, heard back
            case _:
                assert_never(msg)
        return None

    def _notify(self, lines: list[str]) -> None:
        for line in lines:
            self.say(line)

    def _send(self, message: ControlMessage, *, hold: bool = False) -> None:
        """Write a control message (`hold`: committed later); the report hears of it."""
        self.control.send(message, hold=hold)
        self._notify(self.report.observe(message, time.monotonic()))

    def _release(self) -> None:
        """Commit the held triggers and completions, then do what follows a completion."""
        self.control.release()
        if self._sweep_due:
            self._sweep_due = False
            self._sweep()

    def _execute(self, commands: list[Command], *, release: bool = True) -> None:
        """Carry `commands` out; held triggers and completions commit at the end if `release`."""
        for c in commands:
            match c:
                case Trigger():
                    self._send(Triggered(c.checkpoint, c.generation, time.time()), hold=True)
                    self.savepoints.triggered(c.checkpoint)
                case Complete():
                    done = Completed(
                        c.checkpoint,
                        c.generation,
                        duration_s=round(c.duration_s, 4),
                        size=c.size,
                        alignment_ms=c.alignment_ms,
                        time=time.time(),
                        identity=self.identity,
                    )
                    self._send(done, hold=True)
                    self._on_complete(c)
                    self.metrics.completed(c.duration_s, c.size, done.time)
                    self._spare_due = True
                case Abort():
                    self._acks.pop(c.checkpoint, None)
                    self._send(Aborted(c.checkpoint, c.generation, c.reason, time.time()))
                    self.metrics.aborted(c.reason)
                    self.savepoints.aborted(c.checkpoint)
                case Recover():
                    if self.stats.generation and self._topics_gone():
                        continue  # no recovery can bring a deleted topic back: stop
                    if not self._restorable(c):
                        continue  # the fallback's own Recover was carried out instead
                    if self.stats.generation:
                        self.stats.recoveries += 1
                        self.metrics.recovered(c.reason)
                    self.stats.generation = c.generation
                    log_context.update(generation=c.generation)
                    self._spare_due = False
                    self._acks.clear()
                    fresh, self._announce_fresh = self._announce_fresh, False
                    self._send(
                        Recovered(
                            c.generation,
                            c.checkpoint,
                            c.reason,
                            time.time(),
                            fresh=fresh,
                            kept=c.kept,
                        )
                    )
                    self._replace_unresponsive(c, time.monotonic())
                    self.savepoints.recovered()
                case Fail():
                    self._failed = self._failed or c.reason
                case Halt():
                    raise CheckpointDamagedError(
                        f"job {self.name}: {c.reason}. {halt_advice(self.storage)}"
                    )
                case Discard():
                    for n in c.checkpoints:
                        if n in self.savepoints.protected:
                            self._discard_later.add(n)  # its savepoint is being copied
                            continue
                        self.storage.discard(n)
                        self.purger.discarded(n)
                case _:
                    assert_never(c)
        if release:
            self._release()

    def _on_complete(self, c: Complete) -> None:
        acks = self._acks.pop(c.checkpoint, {})
        # Concurrent snapshots: an older one still pending may complete yet.
        pending = self.coordinator.pending if self.config.checkpoints.concurrent else {}
        for n in [m for m in self._acks if m < c.checkpoint and m not in pending]:
            del self._acks[n]
        self.savepoints.completed(c.checkpoint, acks.values())
        channels = self.stats.checkpoint_completed(c, acks.values())
        self.purger.completed(c.checkpoint, channels)
        self._sweep_due = True  # after the commit: deleting files would delay it

    def _sweep(self) -> None:
        # Stored parts of aborted checkpoints are never restored: without this
        # they would fill the disk on a long run with many aborts. Concurrent, only
        # below the oldest retained completion: a smaller id than the newest may
        # still complete (or be announced, its parts stored, not yet registered).
        completed = self.coordinator.completed
        below = min(completed) if self.config.checkpoints.concurrent and completed else None
        self.storage.sweep([*completed, *self.savepoints.protected], below=below)

    # -- shutdown -----------------------------------------------------------

    def stop(self) -> None:
        """Stop the workers (SIGTERM, then SIGKILL) and close connections."""
        with contextlib.suppress(ProducerFencedError, KafkaUnavailableError):
            self.control.release()  # held by a turn a stop cut short: sent, so committed
        try:
            self.savepoints.close()
        except KafkaUnavailableError as exc:
            log.warning("savepoint outcomes not written on the control topic: %s", exc)
        self.supervisor.stop()
        self._wind_up()
        self.purger.close()
        self.storage.close(STORAGE_CLOSE_TIMEOUT_S)
        self.reader.close()
        try:
            self._announce(stopped=True)
        except ProducerFencedError:
            pass  # replaced by another coordinator: the cause of the stop, told once
        except KafkaUnavailableError as exc:
            # Stopping goes on (and the error that stopped the job is the one told):
            # the next runner waits for this one's heartbeat to age instead.
            log.warning("the stop was not announced on the control topic: %s", exc)
        self.lock.release()

    def _wind_up(self) -> None:
        """Collect the workers' final counts; end the checkpoints the stop leaves pending.

        Checkpoints still pending can never complete (their acks would reach no
        coordinator), so an `abort` records why they ended; the next run would
        otherwise show them as rolled back.
        """
        try:
            for _, msg in self.reader.read_to_end(WIND_UP_TIMEOUT_S):
                if isinstance(msg, WorkerAlive):
                    self.report.observe(msg, time.monotonic())
            for n in sorted(self.coordinator.pending):
                self._send(Aborted(n, self.coordinator.generation, "job stopped", time.time()))
                self.metrics.aborted("job stopped")
            self.coordinator.pending.clear()
        except ProducerFencedError:
            pass  # replaced by another coordinator: the cause of the stop, told once
        except KafkaUnavailableError as exc:
            log.warning("final control messages not read or written: %s", exc)
        self._notify(self.report.flush(time.monotonic()))
