"""`kstream run`: the supervisor that coordinates a job and keeps its workers alive.

The runner is the I/O shell around `kstream.protocol.coordinator.Coordinator`: it turns
control-topic messages and child-process exits into events, carries out the
commands (control messages, checkpoint deletion, channel purging) and restarts
workers that die. Workers are separate OS processes (`kstream worker ...`);
with `spawn=False` it only coordinates, for workers started on other machines.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, assert_never

from confluent_kafka import TopicPartition

from kstream.dataflow.identity import JobIdentity, resume_problems
from kstream.dataflow.job import Job, sink_nodes
from kstream.dataflow.plan import Plan, plan, started_with
from kstream.errors import (
    AlreadyRunningError,
    CheckpointDamagedError,
    ConfigurationError,
    IdentityMismatchError,
    JobFailedError,
    KafkaUnavailableError,
    TimeoutConfigError,
)
from kstream.infra.admin import Admin
from kstream.protocol.coordinator import (
    Abort,
    AckReceived,
    CheckpointDamaged,
    Command,
    Complete,
    Coordinator,
    CoordinatorConfig,
    DeclineReceived,
    Discard,
    Event,
    Halt,
    Heartbeat,
    History,
    Recover,
    Tick,
    Trigger,
    WorkerLost,
    replay,
)
from kstream.protocol.limits import INTERNAL_TOPIC_MAX_BYTES, MAX_MESSAGE_BYTES
from kstream.protocol.messages import (
    Aborted,
    Acked,
    Completed,
    ControlMessage,
    Declined,
    Presence,
    Recovered,
    RestoreFailed,
    Triggered,
    WorkerAlive,
    WorkerFailed,
)
from kstream.protocol.names import runner_group, task_group
from kstream.protocol.presence import HEARTBEAT_S as PRESENCE_HEARTBEAT_S
from kstream.protocol.presence import WAIT_S, last_presence, needs_wait, still_alive
from kstream.runtime.control import ControlReader, ControlWriter, read_messages
from kstream.runtime.lock import ProcessLock, runner_lock_path, worker_lock_path
from kstream.runtime.run_report import RunReport
from kstream.runtime.sink import Guarantee
from kstream.runtime.snapshot import LocalCheckpointStorage
from kstream.runtime.worker import EXIT_JOB_FAILED

__all__ = ["RunStats", "Runner"]

log = logging.getLogger("kstream.runner")

#: Said with every fallback: sinks may already have committed output of newer checkpoints.
FALLBACK_DUPLICATES = (
    "Output the sinks committed after that checkpoint will be written again "
    "(duplicates, also under exactly-once)"
)
#: Channel purges are batched: at most one round of delete_records per period.
PURGE_PERIOD_S = 5.0
#: A worker restarted more often than this within `RESTART_WINDOW_S` fails the job.
MAX_RESTARTS = 20
RESTART_WINDOW_S = 120.0
#: Grace period for workers to exit on SIGTERM before they are killed.
STOP_TIMEOUT_S = 20.0
#: After the workers exit, how long the runner reads their final heartbeats (counts).
WIND_UP_TIMEOUT_S = 10.0


@dataclass
class RunStats:
    """What happened so far, for progress output and the demo's summary."""

    completed: int = 0
    aborted: int = 0
    recoveries: int = 0
    restarts: int = 0
    generation: int = 0
    latest: int | None = None
    #: Source offsets (topic -> partition -> next offset) of the latest completed checkpoint.
    source_offsets: dict[str, dict[int, int]] = field(default_factory=dict)
    last_alignment_ms: float = 0.0
    last_duration_s: float = 0.0
    max_sync_ms: float = 0.0
    sync_ms: list[float] = field(default_factory=list)


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
        fresh: bool = False,
        accept_changes: bool = False,
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
        self.plan: Plan = plan(job, workers)
        self.identity = JobIdentity.of(self.plan)
        #: Start from scratch, forgetting the job name's earlier checkpoints.
        self.fresh = fresh
        #: Resume a checkpoint of a job whose sources, sinks or operators changed.
        self.accept_changes = accept_changes
        self.stats = RunStats()
        #: Console notices and the exit summary (see `kstream.runtime.run_report`).
        self.report = RunReport(job.name)
        job_dir = self.state_dir / job.name
        self.storage = LocalCheckpointStorage(job_dir / "checkpoints")
        self.lock = ProcessLock(runner_lock_path(job_dir), f"job {job.name}")
        self._announce_fresh = False
        #: This runner's identity in its `coordinator` announcements.
        self._incarnation = uuid.uuid4().hex
        self._announced = 0.0
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self._logs: dict[int, IO[bytes]] = {}
        self._restart_times: list[float] = []
        self._acks: dict[int, dict[str, Acked]] = {}
        self._channel_offsets: dict[int, dict[str, dict[int, int]]] = {}
        self._last_purge = 0.0
        self._failed: str | None = None
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
            self._check_cluster()
        except BaseException:
            self.lock.release()
            raise

    def _check_cluster(self) -> None:
        """Check the cluster, the input and output topics; create internal topics."""
        admin = Admin(self.bootstrap)
        admin.check_reachable()
        for stage in self.job.stages:
            if stage.source is not None:
                stage.source.partitions(self.bootstrap)  # raises for a missing topic
        for stage in self.job.stages:
            for node in sink_nodes(stage.root):
                assert node.sink is not None
                if stage.source is None and node.sink.lineage:
                    raise ConfigurationError(
                        f"sink {node.sink.name}: lineage needs the sink in its source's stage "
                        "(no key_by or rebalance before it): positions do not cross channels"
                    )
                node.sink.check(self.bootstrap)
        if self.guarantee == "exactly-once":
            self.transaction_timeout_s = transaction_timeout(
                self.config, self.transaction_timeout_s, admin.broker_config(BROKER_MAX_TXN)
            )
        self._check_layout(admin)
        # Stated explicitly: a broker whose default is lower must not shrink them.
        admin.create_topics(
            self.plan.internal_topics(), {MAX_MESSAGE_BYTES: str(INTERNAL_TOPIC_MAX_BYTES)}
        )

    def _check_layout(self, admin: Admin) -> None:
        """Refuse a worker count the job's existing internal topics were not made for."""
        existing = {}
        for topic in self.plan.internal_topics():
            n = admin.partitions(topic)
            if n is not None:
                existing[topic] = n
        problem = started_with(self.job, existing, self.workers)
        if problem is not None:
            raise ConfigurationError(problem)

    def start(self) -> None:
        """Resume the coordinator from the control topic, open a generation, spawn workers."""
        messages = read_messages(self.bootstrap, self.job.name)
        self._refuse_if_coordinated_elsewhere(messages)
        history = self._resume_point(replay(messages, self.config.retained))
        tasks = frozenset(t.id for t in self.plan.tasks)
        self.coordinator = Coordinator(tasks, self.config, history)
        self._settle_restore_point()
        self.control = ControlWriter(self.bootstrap, self.job.name)
        probe = ControlReader(self.bootstrap, self.job.name, group=runner_group(self.job.name))
        end = probe.end_offset()
        probe.close()
        self.reader = ControlReader(
            self.bootstrap, self.job.name, group=runner_group(self.job.name), start=end
        )
        self._announce()
        self._execute(self.coordinator.start(time.monotonic()))
        latest = self.coordinator.latest_completed
        if latest is not None:
            self.say(f"resuming from checkpoint {latest}")
        if self.spawn:
            # All checked before any starts: a refusal then leaves no orphaned worker.
            for w in range(self.workers):
                self._check_worker_free(w)
            for w in range(self.workers):
                self._spawn(w)

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
        probe = ControlReader(self.bootstrap, self.job.name, group=runner_group(self.job.name))
        start = probe.end_offset()
        probe.close()
        reader = ControlReader(
            self.bootstrap, self.job.name, group=runner_group(self.job.name), start=start
        )
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

    def worker_command(self, index: int) -> list[str]:
        cmd = [
            sys.executable,
            "-m",
            "kstream",
            "worker",
            self.spec,
            "--worker",
            str(index),
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
        for k, v in self.params.items():
            cmd += ["-p", f"{k}={v}"]
        return cmd

    def log_path(self, index: int) -> Path:
        return self.state_dir / self.job.name / "logs" / f"worker-{index}.log"

    def _check_worker_free(self, index: int) -> None:
        """Raise `AlreadyRunningError` if a process not started here runs worker `index`.

        Our own worker is dead when this runs (the kernel dropped its lock), so a
        held lock is someone's `kstream worker` started by hand; restarting ours
        into it would only fail again and again.
        """
        probe = ProcessLock(
            worker_lock_path(self.state_dir / self.job.name, index),
            f"worker {index} of job {self.job.name}",
        )
        probe.acquire()
        probe.release()

    def _spawn(self, index: int) -> None:
        path = self.log_path(index)
        path.parent.mkdir(parents=True, exist_ok=True)
        if index not in self._logs:
            self._logs[index] = path.open("ab")
        env = {**os.environ, **self.worker_env}
        self.procs[index] = subprocess.Popen(
            self.worker_command(index),
            stdin=subprocess.DEVNULL,
            stdout=self._logs[index],
            stderr=subprocess.STDOUT,
            env=env,
        )

    def worker_pids(self) -> dict[int, int]:
        return {i: p.pid for i, p in self.procs.items() if p.poll() is None}

    def _check_workers(self, now: float) -> None:
        for index, proc in list(self.procs.items()):
            code = proc.poll()
            if code is None:
                continue
            if code == EXIT_JOB_FAILED:
                self._failed = self._failed or f"worker {index} failed; see {self.log_path(index)}"
                return
            how = f"killed by signal {-code}" if code < 0 else f"exited with code {code}"
            self._restart_times = [t for t in self._restart_times if now - t < RESTART_WINDOW_S]
            self._restart_times.append(now)
            if len(self._restart_times) > MAX_RESTARTS:
                self._failed = (
                    f"workers died {MAX_RESTARTS} times within {RESTART_WINDOW_S:.0f}s; "
                    f"last: worker {index} {how}; see {self.log_path(index)}"
                )
                return
            assert self.coordinator is not None
            # The rollback is announced before the replacement starts, so it joins the new
            # generation instead of the failed one.
            self._execute(self.coordinator.handle(WorkerLost(f"w{index}", how, now)))
            self.stats.restarts += 1
            self._check_worker_free(index)
            self._spawn(index)

    # -- the loop -----------------------------------------------------------

    def step(self, timeout: float = 0.05) -> None:
        """One round: control messages, clock, worker liveness. Raises `JobFailedError`."""
        assert self.coordinator is not None
        assert self.reader is not None
        for _, msg in self.reader.poll(timeout):
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
        if self._failed:
            raise JobFailedError(self._failed)
        if now - self._last_purge > PURGE_PERIOD_S:
            self._last_purge = now
            self._purge()

    def _event(self, msg: ControlMessage, now: float) -> Event | None:
        """The coordinator's event for a message read; other messages are acted on here."""
        match msg:
            case Acked(checkpoint=n, generation=g, task=task):
                if g == self.stats.generation:
                    self._acks.setdefault(n, {})[task] = msg
                return AckReceived(n, g, task, now, size=msg.size, alignment_ms=msg.alignment_ms)
            case Declined():
                return DeclineReceived(msg.checkpoint, msg.generation, msg.task, msg.reason, now)
            case WorkerAlive():
                self._notify(self.report.observe(msg, now))
                return Heartbeat(msg.worker, msg.generation, now)
            case WorkerFailed():
                self._failed = f"worker {msg.worker}: {msg.reason}"
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
                case Abort():
                    self.stats.aborted += 1
                    self._acks.pop(c.checkpoint, None)
                    self._send(Aborted(c.checkpoint, c.generation, c.reason, time.time()))
                case Recover():
                    if not self._restorable(c):
                        continue  # the fallback's own Recover was carried out instead
                    if self.stats.generation:
                        self.stats.recoveries += 1
                    self.stats.generation = c.generation
                    self._acks.clear()
                    fresh, self._announce_fresh = self._announce_fresh, False
                    self._send(
                        Recovered(c.generation, c.checkpoint, c.reason, time.time(), fresh=fresh)
                    )
                case Halt():
                    raise CheckpointDamagedError(
                        f"job {self.job.name}: {c.reason}. {self._halt_advice()}"
                    )
                case Discard():
                    for n in c.checkpoints:
                        self.storage.discard(n)
                        self._channel_offsets.pop(n, None)
                case _:
                    assert_never(c)

    def _on_complete(self, c: Complete) -> None:
        acks = self._acks.pop(c.checkpoint, {})
        for n in [m for m in self._acks if m < c.checkpoint]:
            del self._acks[n]
        sources: dict[str, dict[int, int]] = {}
        channels: dict[str, dict[int, int]] = {}
        syncs = []
        for a in acks.values():
            for topic, parts in a.source_offsets.items():
                sources.setdefault(topic, {}).update(parts)
            for topic, parts in a.channel_offsets.items():
                channels.setdefault(topic, {}).update(parts)
            syncs.append(a.sync_ms)
        self._channel_offsets[c.checkpoint] = channels
        s = self.stats
        s.completed += 1
        s.latest = c.checkpoint
        s.source_offsets = sources
        s.last_alignment_ms = c.alignment_ms
        s.last_duration_s = c.duration_s
        if syncs:
            s.sync_ms.append(max(syncs))
            s.max_sync_ms = max(s.max_sync_ms, max(syncs))

    def _purge(self) -> None:
        """Delete channel records before the oldest retained checkpoint's positions."""
        if not self._channel_offsets:
            return
        oldest = min(self._channel_offsets)
        tps = [
            TopicPartition(topic, p, o)
            for topic, parts in self._channel_offsets[oldest].items()
            for p, o in parts.items()
            if o > 0
        ]
        try:
            Admin(self.bootstrap).delete_records_before(tps)
        except Exception as exc:
            log.warning("channel purge failed (will retry): %s", exc)

    # -- shutdown -----------------------------------------------------------

    def stop(self) -> None:
        """Stop the workers (SIGTERM, then SIGKILL) and close connections."""
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for proc in self.procs.values():
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for f in self._logs.values():
            f.close()
        self._wind_up()
        if self.reader is not None:
            self.reader.close()
        if self.control is not None:
            self._announce(stopped=True)
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


BROKER_MAX_TXN = "transaction.max.timeout.ms"


def transaction_timeout(
    config: CoordinatorConfig, requested_s: float | None, broker_max_ms: str | None
) -> float:
    """The producers' transaction timeout, checked against checkpointing and the broker.

    An epoch's transaction lives from its first record until the checkpoint after
    it completes: up to one interval plus one checkpoint timeout, twice if that
    checkpoint fails and the epoch waits for the next. A transaction the broker
    times out is aborted, silently losing the epoch, so a setting that allows
    that is refused at start-up.
    """
    need = 2 * (config.interval + config.timeout)
    cap = int(broker_max_ms) / 1000 if broker_max_ms else None
    if requested_s is not None and requested_s < need:
        raise TimeoutConfigError(
            f"--transaction-timeout {requested_s:g}s is shorter than 2 x (checkpoint interval "
            f"{config.interval:g}s + checkpoint timeout {config.timeout:g}s) = {need:g}s: a "
            "pre-committed transaction could expire before its checkpoint completes"
        )
    chosen = requested_s if requested_s is not None else max(need, 600.0)
    if cap is not None and chosen > cap:
        if requested_s is None and need <= cap:
            return cap
        raise TimeoutConfigError(
            f"transactions must live {chosen:g}s but the broker caps them at "
            f"{BROKER_MAX_TXN}={cap * 1000:.0f}; raise that or shorten the checkpoint "
            "interval/timeout"
        )
    return chosen
