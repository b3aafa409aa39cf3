"""`kstream run`: the runner, which coordinates a job and keeps its workers alive.

`Runner(config, job)` prepares a run: `prepare` owns the job (a file lock),
starts the worker processes as standbys and checks the cluster and topics
(`kstream.runtime.runner.preflight`); `start` reads the control topic, checks
what it would resume (`kstream.runtime.runner.takeover`, `kstream.protocol.resume`)
and returns the `RunningJob` (`kstream.runtime.runner.running`): the coordinator's
I/O shell, its loop and its wind-up. With ``start.spawn`` off the runner only
coordinates, for workers started on other machines.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable
from pathlib import Path

from kstream.dataflow.identity import identity_of
from kstream.dataflow.job import Job
from kstream.dataflow.plan import Plan, plan
from kstream.errors import (
    CheckpointDamagedError,
    CheckpointError,
    ConfigurationError,
    IdentityMismatchError,
)
from kstream.infra.admin import Admin
from kstream.protocol.barrier import Alignment
from kstream.protocol.coordination import CheckpointDamaged, Halt
from kstream.protocol.coordinator import Coordinator, replay
from kstream.protocol.identity import resume_problems
from kstream.protocol.names import (
    commit_topic,
    coordinator_transactional_id,
    runner_group,
    task_group,
)
from kstream.protocol.resume import Refuse, Resume, StartFresh, decide_adoption, decide_resume
from kstream.runtime.checkpoint.open import open_storage
from kstream.runtime.checkpoint.storage import check_state_serde
from kstream.runtime.config import RunConfig
from kstream.runtime.control import ControlReader, ControlWriter, read_log
from kstream.runtime.lock import ProcessLock, runner_lock_path
from kstream.runtime.runner.from_savepoint import import_savepoint
from kstream.runtime.runner.metrics import RunnerMetrics
from kstream.runtime.runner.preflight import check_cluster
from kstream.runtime.runner.purge import CONTROL_HISTORY, ChannelPurger
from kstream.runtime.runner.report import RunReport
from kstream.runtime.runner.rescale import check_rescalable, relayout_topics, rescaled_from
from kstream.runtime.runner.running import (
    FALLBACK_DUPLICATES,
    RunningJob,
    halt_advice,
    stored_tasks,
    validate,
)
from kstream.runtime.runner.stats import RunStats
from kstream.runtime.runner.supervisor import Supervisor
from kstream.runtime.runner.takeover import (
    clear_earlier_records,
    refuse_if_coordinated_elsewhere,
    refuse_if_history_lost,
    refuse_if_topics_lost,
)

__all__ = ["RunStats", "Runner", "RunningJob"]


class Runner:
    """Coordinates `job` as `config` says; `config.job` names how workers load it.

    `say` tells the user (console lines); `worker_env` is added to the
    environment of every worker process this runner starts.
    """

    def __init__(
        self,
        config: RunConfig,
        job: Job,
        *,
        say: Callable[[str], None] = print,
        worker_env: dict[str, str] | None = None,
    ) -> None:
        if not config.job.name:
            config = dataclasses.replace(config, job=dataclasses.replace(config.job, name=job.name))
        if config.job.name != job.name:
            raise ConfigurationError(
                f"the run configuration names job {config.job.name!r}, the job is {job.name!r}"
            )
        if config.checkpoints.concurrent and config.alignment is not Alignment.UNALIGNED:
            # Aligned, a subtask aligns one snapshot at a time: concurrent ones serialise.
            raise ConfigurationError(
                "concurrent snapshots need --alignment unaligned "
                "(aligned, a subtask aligns one snapshot at a time)"
            )
        if config.start.allow_feedback:
            job.allow_feedback = True
        #: Settled by `prepare` (the transaction timeout), then sent to every worker.
        self.config = dataclasses.replace(config, state_dir=config.state_dir.resolve())
        self.job = job
        self.say = say
        self.worker_env = worker_env or {}
        self.plan: Plan = plan(job, config.workers)
        self.identity = identity_of(self.plan)
        self.stats = RunStats()
        #: The coordinator's metrics (`kstream.runtime.runner.metrics`), served on request.
        self.metrics = RunnerMetrics(job.name, self.stats)
        #: Console notices and the exit summary (see `kstream.runtime.runner.report`).
        self.report = RunReport(job.name)
        job_dir = self.config.state_dir / job.name
        #: Checked by `prepare` (`ManagedCheckpointStorage.probe`).
        self.storage = open_storage(self.config, job.name, probe=False)
        self.lock = ProcessLock(runner_lock_path(job_dir), f"job {job.name}")
        #: The worker processes this runner starts (with ``start.spawn``).
        self.supervisor = Supervisor(
            job.name,
            job_dir,
            self.worker_command,
            self.worker_env,
            job_ref=self.config.job.to_json(),
            config=lambda: self.config.to_json(),
        )
        self.purger = ChannelPurger(config.bootstrap)
        #: Control messages kept before the first one a restart reads (for people).
        self.control_history = CONTROL_HISTORY
        self._admin = Admin(config.bootstrap)
        #: The layout of the checkpoint this run rescales (None: it keeps the layout).
        self.rescaled_from: Plan | None = None
        #: The job's channel and commit-marker topics that existed before this run
        #: created the missing ones: they may hold an earlier run's records.
        self._earlier_topics: set[str] = set()

    # -- set-up -------------------------------------------------------------

    def prepare(self) -> None:
        """Own the job, then check the cluster and topics and create internal topics.

        Raises `AlreadyRunningError` at once if another runner has this job and state directory.
        """
        self.lock.acquire()
        try:
            # First: an unreachable store stops the run before a worker starts.
            self.storage.probe()
            if self.config.start.spawn:
                # All checked before any starts: a refusal then leaves no orphaned worker.
                for w in range(self.config.workers):
                    self.supervisor.check_free(w)
                # Their interpreters, imports and the job module load while this
                # process checks the cluster and reads the control topic; they touch
                # nothing until `start` names their index, after the rollback.
                self.supervisor.prestart(range(self.config.workers))
            self._admin.check_reachable()
            if self.config.start.from_savepoint:
                # Before anything reads the control topic: then it is the job's latest.
                import_savepoint(self.config, self.plan, self.identity, self.storage, self.say)
            # Before `check_cluster` creates the missing ones (see `clear_earlier_records`).
            earlier = {*self.plan.channel_topics(), commit_topic(self.job.name)}
            self._earlier_topics = earlier & self._admin.topics()
            before = self._rescaling()
            timeout_s = check_cluster(
                self.plan,
                bootstrap=self.config.bootstrap,
                guarantee=self.config.guarantee,
                config=self.config.checkpoints,
                transaction_timeout_s=self.config.transaction_timeout_s,
                create_topics=self.config.start.create_topics,
                say=self.say,
                relayout=None
                if before is None
                else lambda: relayout_topics(self._admin, before, self.plan, self.say),
            )
            self.rescaled_from = before
            self.config = dataclasses.replace(self.config, transaction_timeout_s=timeout_s)
        except BaseException:
            self.supervisor.stop()
            self.lock.release()
            raise

    def _rescaling(self) -> Plan | None:
        """The layout of the checkpoint to resume when this start rescales it (None:
        it does not); refuses, with one line, one that cannot be rescaled."""
        if self.config.start.fresh:
            return None
        messages = [m for _, m in read_log(self.config.bootstrap, self.job.name)]
        history = replay(messages, self.config.checkpoints.retained)
        before = rescaled_from(history, self.plan, fresh=False)
        if before is None:
            return None
        for n in reversed(history.completed):
            try:
                check_rescalable(self.storage, before, n)
                break
            except CheckpointError:
                # Damaged: the restore point settles on an older one
                # (`_settle_restore_point`), which is the one to check.
                continue
        return before

    def start(self) -> RunningJob:
        """Resume the coordinator from the control topic, open a generation, spawn workers.

        On an error the standbys `prepare` started are stopped and the job's lock
        is released.
        """
        try:
            running = self._start()
            running.begin()
        except BaseException:
            self.supervisor.stop()
            self.lock.release()
            raise
        return running

    def _start(self) -> RunningJob:
        bootstrap, name = self.config.bootstrap, self.job.name
        written = read_log(bootstrap, name)
        read_at = time.time()
        messages = [m for _, m in written]
        refuse_if_coordinated_elsewhere(bootstrap, name, messages, self.say)
        history = replay(messages, self.config.checkpoints.retained)
        start = self.config.start
        if not start.fresh:
            layout = self.rescaled_from or self.plan
            refuse_if_history_lost(self.storage, layout, history.completed, messages)
        # The snapshot clock never goes back, even if the control topic lost old
        # records to retention: stored checkpoints name ids too.
        stored = max(self.storage.completed(), default=0)
        if stored > history.max_checkpoint:
            history = dataclasses.replace(history, max_checkpoint=stored)
        fatal, changed = resume_problems(history.identity, self.identity)
        decided = decide_resume(
            history,
            fatal,
            changed,
            job=name,
            fresh=start.fresh,
            accept_changes=start.accept_changes,
        )
        match decided:
            case Refuse(reason=reason):
                raise IdentityMismatchError(reason)
            case StartFresh(history=history, notice=notice):
                if notice is not None:
                    self.say(notice)
                for n in self.storage.completed():
                    self.storage.discard(n)
                # At-most-once sources resume after their group's committed offsets:
                # forget them.
                self._admin.delete_groups(task_group(name, t.id) for t in self.plan.tasks)
            case Resume(history=history, warning=warning):
                if warning is not None:
                    self.say(warning)
        tasks = frozenset(t.id for t in self.plan.tasks)
        # Told its workers: a generation's first checkpoint is triggered once every
        # worker has restored (and an interval has passed since the rollback), not a
        # full interval after the rollback while some still restore.
        workers = frozenset(f"w{i}" for i in range(self.config.workers))
        # Who runs each subtask: a rollback for timed-out checkpoints replaces the
        # workers of the subtasks that never acked.
        placement = {
            t.id: f"w{w}" for w in range(self.config.workers) for t in self.plan.tasks_of(w)
        }
        coordinator = Coordinator(tasks, self.config.checkpoints, history, workers, placement)
        self._settle_restore_point(coordinator)
        refuse_if_topics_lost(
            self.storage,
            self.rescaled_from or self.plan,
            self._admin,
            coordinator.latest_completed,
            # Rescaled: the channels are new, and read from their start.
            channels=self.rescaled_from is None,
        )
        if history.generation == 0:
            clear_earlier_records(self._admin, name, self._earlier_topics, self.say)
        adoption = None
        if not start.spawn and isinstance(decided, Resume):
            # Workers started elsewhere outlive a coordinator; spawned ones die with it.
            liveness = self.config.checkpoints.liveness_timeout
            adoption = decide_adoption(messages, workers, read_at, liveness)
        return RunningJob(
            self.config,
            plan=self.plan,
            identity=self.identity,
            storage=self.storage,
            stats=self.stats,
            report=self.report,
            supervisor=self.supervisor,
            purger=self.purger,
            lock=self.lock,
            admin=self._admin,
            say=self.say,
            control_history=self.control_history,
            coordinator=coordinator,
            control=ControlWriter(bootstrap, name, coordinator_transactional_id(name)),
            reader=ControlReader.at_end(bootstrap, name, runner_group(name)),
            seen=written,
            fresh=isinstance(decided, StartFresh),
            adoption=adoption,
            metrics=self.metrics,
        )

    def _settle_restore_point(self, coordinator: Coordinator) -> None:
        """Before the first generation: drop damaged checkpoints, newest first; say so once."""
        damaged: list[str] = []
        while (n := coordinator.latest_completed) is not None:
            problems = validate(self.storage, self.plan, self.identity, self.config, n)
            if not problems:
                problems = self._unreadable(n)
            if not problems:
                break
            damaged.append(f"checkpoint {n} ({problems[0]})")
            for c in coordinator.handle(CheckpointDamaged(n, problems[0], time.monotonic())):
                if isinstance(c, Halt):
                    raise CheckpointDamagedError(
                        f"job {self.job.name}: no intact checkpoint remains: damaged "
                        f"{'; '.join(damaged)}. {halt_advice(self.storage)}"
                    )
        if damaged:
            self.say(
                f"WARNING: damaged {'; '.join(damaged)}; falling back to checkpoint "
                f"{coordinator.latest_completed}. {FALLBACK_DUPLICATES}"
            )
        n = coordinator.latest_completed
        if n is not None:
            # Before any worker starts: state written by another serde would fail
            # every restore (each worker checks too), or be misread.
            for task in stored_tasks(self.storage, self.plan, n):
                check_state_serde(self.storage.load(n, task), self.job.state_serde.name)

    def _unreadable(self, n: int) -> list[str]:
        """Why the metadata of checkpoint `n` that the start reads (the snapshots of
        its layout) cannot be read: a damaged one falls back like any other damage."""
        try:
            for task in stored_tasks(self.storage, self.plan, n):
                self.storage.load(n, task)
            for spec in (self.rescaled_from or self.plan).tasks:
                self.storage.load(n, spec.id)
        except CheckpointError as exc:
            return [str(exc)]
        return []

    # -- workers ------------------------------------------------------------

    def worker_command(self) -> list[str]:
        """A worker process's command line: a standby, told the job and then its index
        and the run configuration on stdin (`kstream.runtime.runner.supervisor`).
        No setting is on it: `ps` shows none, and there is one copy of each."""
        return [
            sys.executable,
            # No current directory on the import path before kstream is imported:
            # a folder named kstream there (a clone, say) would shadow the package
            # this runner runs. The job module is still found there (`load_job`).
            "-P",
            "-m",
            "kstream",
            "worker",
            "--standby",
        ]

    def log_path(self, index: int) -> Path:
        """Where worker `index` writes its output."""
        return self.supervisor.log_path(index)
