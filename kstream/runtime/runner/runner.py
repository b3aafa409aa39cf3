"""`kstream run`: the runner, which coordinates a job and keeps its workers alive.

The runner is the I/O shell around `kstream.protocol.coordinator.Coordinator`: it turns
control-topic messages and child-process exits into events and carries out the
commands (control messages, checkpoint deletion, recovery). Around it: the
start-up checks (`kstream.runtime.runner.preflight`), the worker processes
(`kstream.runtime.runner.supervisor`; with `spawn=False` the runner only coordinates,
for workers started on other machines), channel purging (`kstream.runtime.runner.purge`)
and the run's statistics (`kstream.runtime.runner.stats`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import assert_never

from confluent_kafka import TopicPartition

from kstream.dataflow.identity import identity_of
from kstream.dataflow.job import Job
from kstream.dataflow.outputs import Guarantee
from kstream.dataflow.plan import Plan, plan
from kstream.errors import (
    AlreadyRunningError,
    CheckpointDamagedError,
    CheckpointError,
    ConfigurationError,
    IdentityMismatchError,
    InternalTopicLostError,
    JobFailedError,
    KafkaUnavailableError,
)
from kstream.infra.admin import Admin
from kstream.protocol.barrier import Alignment
from kstream.protocol.control_retention import ControlRetention, restatement
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
from kstream.protocol.coordinator import Coordinator, replay
from kstream.protocol.identity import resume_problems
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
    Triggered,
    WorkerAlive,
    WorkerFailed,
)
from kstream.protocol.names import (
    commit_topic,
    control_topic,
    runner_group,
    task_group,
)
from kstream.protocol.pause import PauseWatch
from kstream.protocol.presence import HEARTBEAT_S as PRESENCE_HEARTBEAT_S
from kstream.protocol.presence import WAIT_S, last_presence, needs_wait, still_alive
from kstream.protocol.resume_check import (
    Need,
    StoredCheckpoint,
    channel_needs,
    lost_history,
    marker_need,
    refusal,
    unmet,
)
from kstream.runtime.checkpoint.storage import LocalCheckpointStorage, check_state_serde
from kstream.runtime.control import ControlReader, ControlWriter, read_log
from kstream.runtime.lock import ProcessLock, runner_lock_path
from kstream.runtime.runner.preflight import check_cluster, missing_topics
from kstream.runtime.runner.purge import CONTROL_HISTORY, ChannelPurger
from kstream.runtime.runner.report import RunReport
from kstream.runtime.runner.stats import RunStats
from kstream.runtime.runner.supervisor import MAX_RESTARTS, RESTART_WINDOW_S, Supervisor

__all__ = ["RunStats", "Runner"]

log = logging.getLogger("kstream.runner")

#: Said with every fallback: sinks may already have committed output of newer checkpoints.
FALLBACK_DUPLICATES = (
    "Output the sinks committed after that checkpoint will be written again "
    "(duplicates, also under exactly-once)"
)
#: After the workers exit, how long the runner reads their final heartbeats (counts).
WIND_UP_TIMEOUT_S = 10.0
#: How often a running job checks that its topics still exist (a metadata request).
TOPIC_CHECK_S = 30.0
#: How long the runner's loop may wait for that answer; no answer is no verdict.
TOPIC_CHECK_TIMEOUT_S = 2.0


class Runner:
    """Coordinates `job` with `workers` workers."""

    def __init__(
        self,
        job: Job,
        *,
        spec: str,
        params: dict[str, str],
        bootstrap: str,
        workers: int,
        state_dir: Path,
        config: CoordinatorConfig,
        spawn: bool = True,
        say: Callable[[str], None] = print,
        worker_env: dict[str, str] | None = None,
        guarantee: Guarantee = "exactly-once",
        transaction_timeout_s: float | None = None,
        max_channel_lag: int | None = None,
        alignment: Alignment = Alignment.ALIGNED,
        alignment_timeout_s: float | None = None,
        source_snapshot_interval_s: float | None = None,
        fresh: bool = False,
        accept_changes: bool = False,
        create_topics: bool = False,
    ) -> None:
        self.job = job
        self.spec = spec
        self.params = params
        self.bootstrap = bootstrap
        self.workers = workers
        self.state_dir = state_dir.resolve()
        self.config = config
        self.spawn = spawn
        self.say = say
        self.worker_env = worker_env or {}
        self.guarantee: Guarantee = guarantee
        self.transaction_timeout_s = transaction_timeout_s
        #: Flow control's bound for the workers (None: their default).
        self.max_channel_lag = max_channel_lag
        #: How the workers' subtasks snapshot (`kstream.protocol.barrier.Alignment`).
        self.alignment = alignment
        self.alignment_timeout_s = alignment_timeout_s
        #: Every source subtask starts a snapshot itself this often (None: as its source says).
        self.source_snapshot_interval_s = source_snapshot_interval_s
        if config.concurrent and alignment is not Alignment.UNALIGNED:
            # Aligned, a subtask aligns one snapshot at a time: concurrent ones serialise.
            raise ConfigurationError(
                "concurrent snapshots need --alignment unaligned "
                "(aligned, a subtask aligns one snapshot at a time)"
            )
        self.plan: Plan = plan(job, workers)
        self.identity = identity_of(self.plan)
        #: Start from scratch, forgetting the job name's earlier checkpoints.
        self.fresh = fresh
        #: Resume a checkpoint of a job whose sources, sinks or operators changed.
        self.accept_changes = accept_changes
        #: Create missing output topics like the input (`--create-topics`).
        self.create_topics = create_topics
        self.stats = RunStats()
        #: Console notices and the exit summary (see `kstream.runtime.runner.report`).
        self.report = RunReport(job.name)
        job_dir = self.state_dir / job.name
        self.storage = LocalCheckpointStorage(job_dir / "checkpoints")
        self.lock = ProcessLock(runner_lock_path(job_dir), f"job {job.name}")
        self._announce_fresh = False
        #: This runner's identity in its `coordinator` announcements.
        self._incarnation = uuid.uuid4().hex
        self._announced = 0.0
        #: The worker processes this runner starts (with `spawn`).
        self.supervisor = Supervisor(job.name, job_dir, self.worker_command, self.worker_env)
        self.purger = ChannelPurger(bootstrap)
        #: What a restart reads of the control topic; the rest is purged.
        self.retention = ControlRetention(config.retained)
        #: Control messages kept before the first one a restart reads (for people).
        self.control_history = CONTROL_HISTORY
        #: The control topic's end as far as read, and whether a restated
        #: `recover` was sent and not read back yet.
        self._control_end = 0
        self._restating = False
        self._acks: dict[int, dict[str, Acked]] = {}
        self._failed: str | None = None
        self._admin = Admin(bootstrap)
        self._topics_checked = time.monotonic()
        #: The job's channel and commit-marker topics that existed before this run
        #: created the missing ones: they may hold an earlier run's records.
        self._earlier_topics: set[str] = set()
        #: Whether the current generation completed a checkpoint: the spare worker
        #: process is (re)started only then.
        self._spare_due = False
        #: Pauses of this process itself, long enough to make workers look silent.
        self._pauses = PauseWatch(config.liveness_timeout / 2)
        self.coordinator: Coordinator | None = None
        self.control: ControlWriter | None = None
        self.reader: ControlReader | None = None

    # -- set-up -------------------------------------------------------------

    def prepare(self) -> None:
        """Own the job, then check the cluster and topics and create internal topics.

        Raises `AlreadyRunningError` at once if another runner has this job and state directory.
        """
        self.lock.acquire()
        try:
            if self.spawn:
                # All checked before any starts: a refusal then leaves no orphaned worker.
                for w in range(self.workers):
                    self.supervisor.check_free(w)
                # Their interpreters, imports and the job module load while this
                # process checks the cluster and reads the control topic; they touch
                # nothing until `start` names their index, after the rollback.
                self.supervisor.prestart(range(self.workers))
            self._admin.check_reachable()
            # Before `check_cluster` creates the missing ones (see `_clear_earlier_records`).
            earlier = {*self.plan.channel_topics(), commit_topic(self.job.name)}
            self._earlier_topics = earlier & self._admin.topics()
            self.transaction_timeout_s = check_cluster(
                self.plan,
                bootstrap=self.bootstrap,
                guarantee=self.guarantee,
                config=self.config,
                transaction_timeout_s=self.transaction_timeout_s,
                create_topics=self.create_topics,
                say=self.say,
            )
        except BaseException:
            self.supervisor.stop()
            self.lock.release()
            raise

    def start(self) -> None:
        """Resume the coordinator from the control topic, open a generation, spawn workers.

        On an error the standbys `prepare` started are stopped.
        """
        try:
            self._start()
        except BaseException:
            self.supervisor.stop()
            raise

    def _start(self) -> None:
        written = read_log(self.bootstrap, self.job.name)
        messages = [m for _, m in written]
        for offset, m in written:
            self._saw(offset, m)
        self._refuse_if_coordinated_elsewhere(messages)
        history = replay(messages, self.config.retained)
        if not self.fresh:
            self._refuse_if_history_lost(history, messages)
        # The snapshot clock never goes back, even if the control topic lost old
        # records to retention: stored checkpoints name ids too.
        stored = max(self.storage.completed(), default=0)
        if stored > history.max_checkpoint:
            history = dataclasses.replace(history, max_checkpoint=stored)
        history = self._resume_point(history)
        tasks = frozenset(t.id for t in self.plan.tasks)
        # Told its workers: a generation's first checkpoint is triggered once every
        # worker has restored (and an interval has passed since the rollback), not a
        # full interval after the rollback while some still restore.
        workers = frozenset(f"w{i}" for i in range(self.workers))
        # Who runs each subtask: a rollback for timed-out checkpoints replaces the
        # workers of the subtasks that never acked.
        placement = {t.id: f"w{w}" for w in range(self.workers) for t in self.plan.tasks_of(w)}
        self.coordinator = Coordinator(tasks, self.config, history, workers, placement)
        self._settle_restore_point()
        self._refuse_if_topics_lost()
        if history.generation == 0:
            self._clear_earlier_records()
        self.control = ControlWriter(self.bootstrap, self.job.name)
        self.reader = ControlReader.at_end(
            self.bootstrap, self.job.name, runner_group(self.job.name)
        )
        self._announce()
        self._execute(self.coordinator.start(time.monotonic()))
        latest = self.coordinator.latest_completed
        if latest is not None:
            self.say(f"resuming from checkpoint {latest}")
        if self.spawn:
            # After the rollback is written: they join this generation.
            for w in range(self.workers):
                self.supervisor.spawn(w)

    def _refuse_if_history_lost(self, history: History, messages: list[ControlMessage]) -> None:
        """Raise `InternalTopicLostError` if a checkpoint is on disk but the control
        topic lost its history (`kstream.protocol.resume_check.lost_history`):
        resuming would start from scratch and read the whole input again."""
        stored = self.storage.completed()
        if not stored:
            return
        n = stored[-1]
        generations = []
        for task in self.plan.tasks:
            try:
                generations.append(self.storage.load(n, task.id).generation)
            except CheckpointError:
                continue  # a part never stored: the others tell the generation
        started = max((m.generation for m in messages if isinstance(m, Recovered)), default=0)
        why = lost_history(
            StoredCheckpoint(n, max(generations, default=0)), history.completed, started
        )
        if why is not None:
            topic = control_topic(self.job.name)
            raise InternalTopicLostError(refusal(self.job.name, n, topic, why))

    def _refuse_if_topics_lost(self) -> None:
        """Raise `InternalTopicLostError` if a channel or commit-marker topic lost records the
        checkpoint to resume reads (`kstream.protocol.resume_check.unmet`)."""
        assert self.coordinator is not None
        n = self.coordinator.latest_completed
        if n is None:
            return
        needs: list[Need] = []
        for task in self.plan.tasks:
            meta = self.storage.load(n, task.id)
            needs += channel_needs(meta.channel_offsets, meta.channel_replay)
            for name, sink in meta.sink.items():
                ordinal = name.rpartition("#")[2]
                try:
                    partition = self.plan.marker_partition(task, int(ordinal))
                except (ValueError, ConfigurationError):
                    continue  # not a sink of this job (resumed across changes)
                need = marker_need(commit_topic(self.job.name), partition, sink)
                if need is not None:
                    needs.append(need)
        read = sorted({need.topic for need in needs if need.end > 0})
        if not read:
            return
        existing = self._admin.topics()
        marks = {t: self._admin.watermarks(t) if t in existing else None for t in read}
        problem = unmet(needs, marks)
        if problem is not None:
            raise InternalTopicLostError(refusal(self.job.name, n, *problem))

    def _clear_earlier_records(self) -> None:
        """Delete what an earlier run of the job name left in its channel and commit-marker
        topics, before the first generation the control topic knows of.

        Generations count from the control topic: without its history (a job
        started with --fresh after it was deleted) this run's generations
        restart at 1, and an earlier run's channel records of the same number
        would read as this run's, as would its commit markers. Nothing here is
        restored (no checkpoint is resumed), so all of it goes.
        """
        tps = [
            TopicPartition(topic, p, high)
            for topic in sorted(self._earlier_topics)
            for p, (low, high) in self._admin.watermarks(topic).items()
            if high > low
        ]
        if tps:
            self._admin.delete_records_before(tps)
            self.say(
                f"job {self.job.name} starts its first generation: records an earlier run "
                f"left in {', '.join(sorted({tp.topic for tp in tps}))} are deleted"
            )

    def _refuse_if_coordinated_elsewhere(self, history: list[ControlMessage]) -> None:
        """Raise `AlreadyRunningError` if another runner coordinates this job on this cluster.

        The file lock only sees runners sharing the state directory; this sees
        any runner of the job name on the cluster (`kstream.protocol.presence`). A
        predecessor that did not say it stopped is given `WAIT_S` to prove it
        is alive with a heartbeat; one that crashed only delays this start.
        """
        last = last_presence(history)
        if last is None or not needs_wait(last, time.time()):
            return
        reader = ControlReader.at_end(self.bootstrap, self.job.name, runner_group(self.job.name))
        seen: list[ControlMessage] = []
        try:
            deadline = time.monotonic() + WAIT_S
            while time.monotonic() < deadline:
                seen += [m for _, m in reader.poll(0.2)]
                alive = still_alive(seen)
                if alive is not None:
                    raise AlreadyRunningError(
                        f"job {self.job.name} is already running on {self.bootstrap}: its "
                        f"runner ({alive.describe()}) is alive; stop it first, or use "
                        "another --job-name"
                    )
        finally:
            reader.close()
        self.say(
            f"the last runner of job {self.job.name} ({last.describe()}) did not say it "
            f"stopped and sent no heartbeat for {WAIT_S:.0f}s: taking over"
        )

    def _announce(self, *, stopped: bool = False) -> None:
        """Tell the control topic this runner coordinates the job (or stopped doing so)."""
        assert self.control is not None
        now = time.time()
        presence = Presence(
            self._incarnation, os.getpid(), socket.gethostname(), str(self.state_dir), now, stopped
        )
        self.control.send(presence, flush=stopped)
        self._announced = time.monotonic()

    def _resume_point(self, history: History) -> History:
        """The history to coordinate from: checked against this job, or reset for `fresh`."""
        if self.fresh:
            if history.completed:
                self.say(
                    f"starting job {self.job.name} fresh: checkpoints "
                    f"{', '.join(map(str, history.completed))} are forgotten, sources read "
                    "from their start position, state starts empty"
                )
            for n in self.storage.completed():
                self.storage.discard(n)
            # At-most-once sources resume after their group's committed offsets: forget them.
            Admin(self.bootstrap).delete_groups(
                task_group(self.job.name, t.id) for t in self.plan.tasks
            )
            self._announce_fresh = True
            # Ids and generations keep increasing: old channel records, commit markers
            # and zombie writers stay distinguishable from the new run's.
            return History(history.generation, history.max_checkpoint)
        if not history.completed:
            return history
        fatal, changed = resume_problems(history.identity, self.identity)
        n = history.completed[-1]
        if fatal:
            raise IdentityMismatchError(
                f"job {self.job.name} cannot resume checkpoint {n}: {'; '.join(fatal + changed)}. "
                "Start it from scratch with --fresh (state is dropped, input is read again), "
                "or use another --job-name (or the old settings)"
            )
        if changed and not self.accept_changes:
            raise IdentityMismatchError(
                f"job {self.job.name} differs from the job that took checkpoint {n}: "
                f"{'; '.join(changed)}. Start it from scratch with --fresh, use another "
                "--job-name, or, if the change is compatible with the state, resume on "
                "purpose with --accept-changes"
            )
        if changed:
            self.say(f"WARNING: resuming checkpoint {n} across changes: {'; '.join(changed)}")
        return history

    def _settle_restore_point(self) -> None:
        """Before the first generation: drop damaged checkpoints, newest first; say so once."""
        assert self.coordinator is not None
        damaged: list[str] = []
        while (n := self.coordinator.latest_completed) is not None:
            problems = self._validate(n)
            if not problems:
                break
            damaged.append(f"checkpoint {n} ({problems[0]})")
            for c in self.coordinator.handle(CheckpointDamaged(n, problems[0], time.monotonic())):
                if isinstance(c, Halt):
                    raise CheckpointDamagedError(
                        f"job {self.job.name}: no intact checkpoint remains: damaged "
                        f"{'; '.join(damaged)}. {self._halt_advice()}"
                    )
        if damaged:
            self.say(
                f"WARNING: damaged {'; '.join(damaged)}; falling back to checkpoint "
                f"{self.coordinator.latest_completed}. {FALLBACK_DUPLICATES}"
            )
        n = self.coordinator.latest_completed
        if n is not None:
            # Before any worker starts: state written by another serde would fail
            # every restore (each worker checks too), or be misread.
            for task in self.plan.tasks:
                check_state_serde(self.storage.load(n, task.id), self.job.state_serde.name)

    def _validate(self, checkpoint: int) -> list[str]:
        tasks = [t.id for t in self.plan.tasks]
        # Under --accept-changes the snapshots carry the old job's fingerprint.
        identity = "" if self.accept_changes else self.identity.fingerprint
        return self.storage.validate(checkpoint, tasks, identity)

    def _halt_advice(self) -> str:
        return (
            "Start it from scratch with --fresh (state is dropped and the input is read "
            f"again, so output is written again), or restore {self.storage.root} from a backup"
        )

    def _restorable(self, c: Recover) -> bool:
        """Validate the checkpoint `c` restores; if damaged, fall back (returns False)."""
        assert self.coordinator is not None
        if c.checkpoint is None:
            return True
        problems = self._validate(c.checkpoint)
        if not problems:
            return True
        self._damaged(c.checkpoint, problems[0])
        return False

    def _damaged(self, checkpoint: int, reason: str) -> None:
        """Checkpoint `checkpoint` cannot be restored: fall back loudly, or halt."""
        assert self.coordinator is not None
        commands = self.coordinator.handle(CheckpointDamaged(checkpoint, reason, time.monotonic()))
        fallback = next((c for c in commands if isinstance(c, Recover)), None)
        if fallback is not None:
            self.say(
                f"WARNING: checkpoint {checkpoint} is damaged ({reason}); falling back to "
                f"checkpoint {fallback.checkpoint}. {FALLBACK_DUPLICATES}"
            )
        self._execute(commands)

    # -- workers ------------------------------------------------------------

    def worker_command(self) -> list[str]:
        """A worker process's command line: a standby, told its index on stdin
        (`kstream.runtime.runner.supervisor`)."""
        cmd = [
            sys.executable,
            # No current directory on the import path before kstream is imported:
            # a folder named kstream there (a clone, say) would shadow the package
            # this runner runs. The job module is still found there (`load_job`).
            "-P",
            "-m",
            "kstream",
            "worker",
            self.spec,
            "--standby",
            "--workers",
            str(self.workers),
            "--job-name",
            self.job.name,
            "--bootstrap-servers",
            self.bootstrap,
            "--state-dir",
            str(self.state_dir),
            "--guarantee",
            self.guarantee,
        ]
        if self.transaction_timeout_s is not None:
            cmd += ["--transaction-timeout", str(self.transaction_timeout_s)]
        if self.max_channel_lag is not None:
            cmd += ["--max-channel-lag", str(self.max_channel_lag)]
        cmd += ["--alignment", self.alignment.value]
        if self.alignment_timeout_s is not None:
            cmd += ["--alignment-timeout", str(self.alignment_timeout_s)]
        if self.source_snapshot_interval_s is not None:
            cmd += ["--source-snapshot-interval", str(self.source_snapshot_interval_s)]
        if self.config.concurrent:
            cmd += ["--concurrent-snapshots", str(self.config.max_in_flight)]
        for k, v in self.params.items():
            cmd += ["-p", f"{k}={v}"]
        return cmd

    @property
    def running(self) -> bool:
        """Whether every worker has restored and runs the current generation (not
        while a recovery is under way, or before the first one finished)."""
        c = self.coordinator
        return c is not None and len(c.joined) >= self.workers

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
            assert self.coordinator is not None
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
        if self.supervisor.restart_allowed(now):
            return True
        self._failed = (
            f"workers died {MAX_RESTARTS} times within {RESTART_WINDOW_S:.0f}s; "
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

    def _step(self, timeout: float) -> None:
        assert self.coordinator is not None
        assert self.reader is not None
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
                self._execute(self.coordinator.handle(event))
        now = time.monotonic()
        if now - self._announced >= PRESENCE_HEARTBEAT_S:
            self._announce()
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
        assert self.coordinator is not None
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
        if keep is None or self.control is None:
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
        self.purger.control(control_topic(self.job.name), min(keep, tail))

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
                return AckReceived(n, g, task, now, size=msg.size, alignment_ms=msg.alignment_ms)
            case Declined():
                return DeclineReceived(msg.checkpoint, msg.generation, msg.task, msg.reason, now)
            case Initiated():
                # The report learns of it before the relay or abort the coordinator answers.
                self._notify(self.report.observe(msg, now))
                return InitiatedReceived(msg.checkpoint, msg.generation, msg.task, now)
            case WorkerAlive():
                self._notify(self.report.observe(msg, now))
                return Heartbeat(
                    msg.worker,
                    msg.generation,
                    now,
                    restoring=msg.restoring,
                    stuck=msg.stuck,
                    stuck_on=msg.stuck_on,
                )
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
            case _:
                assert_never(msg)
        return None

    def _notify(self, lines: list[str]) -> None:
        for line in lines:
            self.say(line)

    def _send(self, message: ControlMessage) -> None:
        """Write a control message; the report hears of it."""
        assert self.control is not None
        self.control.send(message)
        self._notify(self.report.observe(message, time.monotonic()))

    def _execute(self, commands: list[Command]) -> None:
        for c in commands:
            match c:
                case Trigger():
                    self._send(Triggered(c.checkpoint, c.generation, time.time()))
                case Complete():
                    self._send(
                        Completed(
                            c.checkpoint,
                            c.generation,
                            duration_s=round(c.duration_s, 4),
                            size=c.size,
                            alignment_ms=c.alignment_ms,
                            time=time.time(),
                            identity=self.identity,
                        )
                    )
                    self._on_complete(c)
                    self._spare_due = True
                case Abort():
                    self._acks.pop(c.checkpoint, None)
                    self._send(Aborted(c.checkpoint, c.generation, c.reason, time.time()))
                case Recover():
                    if self.stats.generation and self._topics_gone():
                        continue  # no recovery can bring a deleted topic back: stop
                    if not self._restorable(c):
                        continue  # the fallback's own Recover was carried out instead
                    if self.stats.generation:
                        self.stats.recoveries += 1
                    self.stats.generation = c.generation
                    self._spare_due = False
                    self._acks.clear()
                    fresh, self._announce_fresh = self._announce_fresh, False
                    self._send(
                        Recovered(c.generation, c.checkpoint, c.reason, time.time(), fresh=fresh)
                    )
                    self._replace_unresponsive(c, time.monotonic())
                case Fail():
                    self._failed = self._failed or c.reason
                case Halt():
                    raise CheckpointDamagedError(
                        f"job {self.job.name}: {c.reason}. {self._halt_advice()}"
                    )
                case Discard():
                    for n in c.checkpoints:
                        self.storage.discard(n)
                        self.purger.discarded(n)
                case _:
                    assert_never(c)

    def _on_complete(self, c: Complete) -> None:
        assert self.coordinator is not None
        acks = self._acks.pop(c.checkpoint, {})
        # Concurrent snapshots: an older one still pending may complete yet.
        pending = self.coordinator.pending if self.config.concurrent else {}
        for n in [m for m in self._acks if m < c.checkpoint and m not in pending]:
            del self._acks[n]
        channels = self.stats.checkpoint_completed(c, acks.values())
        self.purger.completed(c.checkpoint, channels)
        # Stored parts of aborted checkpoints are never restored: without this
        # they would fill the disk on a long run with many aborts. Concurrent, only
        # below the oldest retained completion: a smaller id than the newest may
        # still complete (or be announced, its parts stored, not yet registered).
        completed = self.coordinator.completed
        below = min(completed) if self.config.concurrent and completed else None
        self.storage.sweep(completed, below=below)

    # -- shutdown -----------------------------------------------------------

    def stop(self) -> None:
        """Stop the workers (SIGTERM, then SIGKILL) and close connections."""
        self.supervisor.stop()
        self._wind_up()
        self.purger.close()
        if self.reader is not None:
            self.reader.close()
        if self.control is not None:
            try:
                self._announce(stopped=True)
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
        if self.reader is None or self.control is None or self.coordinator is None:
            return
        try:
            for _, msg in self.reader.read_to_end(WIND_UP_TIMEOUT_S):
                if isinstance(msg, WorkerAlive):
                    self.report.observe(msg, time.monotonic())
            for n in sorted(self.coordinator.pending):
                self._send(Aborted(n, self.coordinator.generation, "job stopped", time.time()))
            self.coordinator.pending.clear()
        except KafkaUnavailableError as exc:
            log.warning("final control messages not read or written: %s", exc)
        self._notify(self.report.flush(time.monotonic()))
