"""A worker process: runs its subtasks and follows the control topic.

The worker's life is a sequence of generations. At start-up it reads the
control topic to its end and joins the latest `recover` (generation g,
checkpoint n): every one of its subtasks is restored from n. From then on it
acts on control messages of generation g (`trigger`, `complete`, `abort`) and
starts over when a newer `recover` arrives. It sends `ack`/`decline` per
subtask and a `heartbeat` every `HEARTBEAT_S`.

What each control message means here is decided by the pure state machine
`kstream.protocol.recovery.WorkerRecovery`; this module reads the topic, tells
it where it read each message (main loop, a sink's wait, stopping) and carries
out its actions.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, assert_never

from confluent_kafka import KafkaError, Producer
from confluent_kafka import Message as KafkaMessage

from kstream.dataflow.graph import sink_nodes
from kstream.dataflow.identity import identity_of
from kstream.dataflow.job import Job
from kstream.dataflow.outputs import Guarantee, RollbackInterrupt
from kstream.dataflow.plan import Plan, TaskSpec, plan
from kstream.errors import (
    AlreadyRunningError,
    CheckpointError,
    KafkaUnavailableError,
    RecordLostError,
)
from kstream.infra.admin import Admin
from kstream.infra.logs import context as log_context
from kstream.protocol.counters import WorkerCounters
from kstream.protocol.limits import INTERNAL_TOPIC_MAX_BYTES, MAX_MESSAGE_BYTES, producer_limit
from kstream.protocol.messages import (
    Acked,
    ControlMessage,
    Recovered,
    RestoreFailed,
    WorkerAlive,
    WorkerFailed,
)
from kstream.protocol.names import commit_topic, control_topic, dead_letter_topic, worker_group
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
from kstream.runtime.checkpoint.open import open_storage
from kstream.runtime.checkpoint.storing import Storing
from kstream.runtime.config import DEFAULT_TRANSACTION_TIMEOUT_S, RunConfig
from kstream.runtime.control import ControlReader, ControlWriter
from kstream.runtime.failure import classify
from kstream.runtime.kafka import BATCHING, IDEMPOTENT, client_config, connect
from kstream.runtime.lock import ProcessLock, worker_lock_path
from kstream.runtime.parent import runner_gone, runner_pid
from kstream.runtime.worker.channel_task import ChannelTask
from kstream.runtime.worker.context import TaskContext
from kstream.runtime.worker.faults import Faults
from kstream.runtime.worker.heartbeat import Heartbeat
from kstream.runtime.worker.metrics import WorkerMetrics
from kstream.runtime.worker.source_task import SourceTask
from kstream.runtime.worker.stuck import CallWatch
from kstream.runtime.worker.subtask import Subtask

__all__ = ["Worker", "open_task"]

log = logging.getLogger("kstream.worker")

#: Heartbeat period; the coordinator's liveness timeout is several of these.
HEARTBEAT_S = 2.0
#: How long one turn of an idle worker's loop waits for input, shared by its
#: subtasks (librdkafka waits out each subtask's part): control messages
#: (triggers, completions) and finished snapshots wait at most about this long
#: for the loop while it is idle, at a few Python calls per turn.
IDLE_WAIT_S = 0.01
#: How long a new worker waits for the coordinator's first `recover`.
JOIN_TIMEOUT_S = 60.0
#: How long a cleanly stopping worker waits for the coordinator's last transaction
#: to become readable (`ControlReader.settled_end`): milliseconds as a rule;
#: well inside the runner's grace before it kills a stopping worker (20 s).
STOP_SETTLE_S = 10.0


class Worker:
    """Worker `index` of `config.workers` for `job`, which `config.job` names.

    The job is loaded by the caller (loading a job module is the command
    line's business); everything else this worker does is as `config` says.
    """

    def __init__(self, config: RunConfig, index: int, job: Job) -> None:
        workers = config.workers
        bootstrap = config.bootstrap
        state_dir = config.state_dir
        guarantee = config.guarantee
        self.config = config
        self.job = job
        self.index = index
        self.name = f"w{index}"
        self.plan = plan(job, workers)
        self.specs = self.plan.tasks_of(index)
        self.bootstrap = bootstrap
        root = state_dir / job.name
        # Checked at once (one request): a worker that cannot store checkpoints stops now.
        self.storage = open_storage(config, job.name)
        self.state_root = root / f"worker-{index}"
        self.lock = ProcessLock(worker_lock_path(root, index), f"worker {index} of job {job.name}")
        self.identity = identity_of(self.plan).fingerprint
        _await_control_topic(bootstrap, job.name)
        self.control = ControlWriter(bootstrap, job.name)
        #: Records of the shared producer (channels, plain sinks, dead letters) that
        #: Kafka did not take: the job must roll back, or they would be lost.
        self._undelivered: list[str] = []
        #: The largest record the shared producer writes (`kstream.protocol.limits`).
        self.max_record_bytes = _shared_producer_limit(bootstrap, self.plan, guarantee)
        self.producer = Producer(
            client_config(
                bootstrap,
                IDEMPOTENT,
                BATCHING,
                {
                    # A channel with a gap (a record lost, a later barrier delivered)
                    # would break the snapshot's consistency: make any gap fatal, so the
                    # worker dies and the job rolls back instead.
                    "enable.gapless.guarantee": True,
                    "queue.buffering.max.kbytes": 1_048_576,
                    # Every record it accepts, and every batch it builds, fits each topic
                    # it writes; writers check records against this before producing.
                    "message.max.bytes": self.max_record_bytes,
                    # Every delivery is reported, not only failures (as `BATCHING`
                    # would have it): flow control counts its channel records'
                    # deliveries (`FlowControl.counted`, a callback per channel
                    # record, which carries up to 500 stream records). The other
                    # records (plain sink output, dead letters) come to one
                    # producer-wide callback that keeps the failures.
                    "delivery.report.only.error": False,
                    "on_delivery": self._on_delivery_error,
                },
            )
        )
        # Before its first channel record, which would wait half a second otherwise.
        connect(self.producer, self.control.topic)
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="snapshot-upload")
        #: What `executor` is storing: a slow store excuses the checkpoints it holds up.
        self.storing = Storing()
        self.faults = Faults.from_env()
        self.guarantee: Guarantee = guarantee
        timeout_s = config.transaction_timeout_s
        if timeout_s is None:
            timeout_s = DEFAULT_TRANSACTION_TIMEOUT_S
        self.transaction_timeout_ms = int(timeout_s * 1000)
        self.flow = config.flow
        self.alignment = config.alignment
        self.alignment_timeout_s = config.alignment_timeout_s
        self.alignment_hold_bytes = config.alignment_hold_bytes
        self.source_snapshot_interval_s = config.source_snapshot_interval_s
        #: Concurrent snapshots, at most this many in flight (0: one after another).
        self.concurrent = config.concurrent_snapshots
        self.tasks: list[Subtask] = []
        #: After a quiet ack ({ref}`coordinator-idle`): that checkpoint and the
        #: subtasks' total activity then; the first turn that finds more activity
        #: sends a wake-up (`WorkerAlive.woke`). None: no quiet ack since the last one.
        self._quiet_since: tuple[int, int] | None = None
        #: Heartbeats go out from the main loop and, while it is busy, from a thread.
        self.heartbeat = Heartbeat(
            HEARTBEAT_S,
            lambda message, flush: self.control.send(message, flush=flush),
            lambda: self.recovery.heartbeat_generation,
            self._die_if_orphaned,
            lambda: self.restoring,
            self._stuck,
            lambda: self.recovery.waiting > 0,
            self.storing.slow,
        )
        #: Reports a call of the job's code that does not return (`kstream.runtime.worker.stuck`).
        self.watch = CallWatch()
        #: Identifies this process in heartbeats: its counters start at zero.
        self.process = uuid.uuid4().hex[:12]
        #: Counters of the subtasks this process closed (earlier generations).
        self._counted = WorkerCounters()
        self._last_dead_letter = ""
        self._reader: ControlReader | None = None
        #: What the control messages ask of this worker (generations, deferrals).
        self.recovery = WorkerRecovery(worker=self.name, process=self.process)
        #: The generation whose subtasks are restored and running (0: none yet).
        self._running = 0
        #: The runner that spawned this process, if one did: the worker dies with it.
        self.runner_pid = runner_pid()
        #: What a metrics endpoint serves (`kstream.infra.metrics`), if one is started.
        self.metrics = WorkerMetrics(job.name, self.name)

    @property
    def generation(self) -> int:
        """The generation this worker's subtasks run in (0 before it joined)."""
        return self.recovery.generation

    @property
    def restoring(self) -> bool:
        """Whether the subtasks of `generation` are still being restored."""
        return self._running != self.recovery.generation

    def _on_delivery_error(self, err: KafkaError | None, msg: KafkaMessage) -> None:
        if err is not None:
            self.delivery_failed(err, msg)

    def delivery_failed(self, err: KafkaError, msg: KafkaMessage) -> None:
        """Note a lost record of the shared producer (`WorkerPorts`)."""
        self._undelivered.append(f"{msg.topic()}[{msg.partition()}]: {err.str()}")

    def raise_if_undelivered(self) -> None:
        """Raise `RecordLostError` if a record of the shared producer was lost.

        The worker then dies and the job rolls back to its latest checkpoint,
        which no lost record can be part of: a checkpoint is acked only after
        this check (and a sink's pre-commit flushes and checks first).
        """
        if self._undelivered:
            raise RecordLostError(
                f"{len(self._undelivered)} records not delivered, e.g. {self._undelivered[0]}"
            )

    def send_control(self, message: ControlMessage) -> None:
        """Write `message` to the control topic (`WorkerPorts`)."""
        self.control.send(message)

    # -- generations --------------------------------------------------------

    def _join(self, reader: ControlReader) -> None:
        """Read the control topic to its end; restore from the latest `recover`, unless
        another process of this index runs it: then wait for the next one."""
        # History: a rollback that kept another process as this worker was about a
        # predecessor; only claims settled from now on concern this process.
        for _, msg in reader.read_to_end():
            self.recovery.read(msg)
        self._carry_out(self.recovery.caught_up())
        if self.recovery.waiting:
            log.info(
                "%s: another process runs generation %d of this worker; waiting for the next",
                self.name,
                self.recovery.waiting,
            )
            # Now, not at the thread's next beat: the coordinator opens the generation
            # this process joins as soon as it reads this claim.
            self._heartbeat(force=True, flush=True)
        deadline = time.monotonic() + JOIN_TIMEOUT_S
        while not self.recovery.joined:
            if time.monotonic() > deadline:
                raise KafkaUnavailableError(
                    f"no coordinator: nothing told job {self.job.name} to start within "
                    f"{JOIN_TIMEOUT_S:.0f}s (is `kstream run` running?)"
                )
            for _, msg in reader.poll(0.5):
                self._carry_out(self._read(msg))

    def _read(self, msg: ControlMessage, where: Where = Where.MAIN) -> list[WorkerAction]:
        """`WorkerRecovery.read`, after checking that no rollback names another
        process as this worker (`Recovered.kept`): this one then stops."""
        if isinstance(msg, Recovered):
            kept = dict(msg.kept).get(self.name)
            if kept is not None and kept != self.process:
                raise AlreadyRunningError(
                    f"{self.name} of job {self.job.name}: another process ({kept}) runs "
                    f"this worker index; this one ({self.process}) stops"
                )
        return self.recovery.read(msg, where)

    def _restore(self, generation: int, checkpoint: int | None) -> None:
        started = time.monotonic()
        self._retire_tasks()
        # Only this generation's completions (and the restored tables) are trusted.
        self.storage.forget()
        rt = TaskContext(
            bootstrap=self.bootstrap,
            plan=self.plan,
            generation=generation,
            producer=self.producer,
            storage=self.storage,
            state_root=self.state_root,
            executor=self.executor,
            ports=self,
            storing=self.storing,
            faults=self.faults,
            guarantee=self.guarantee,
            transaction_timeout_ms=self.transaction_timeout_ms,
            max_record_bytes=self.max_record_bytes,
            identity=self.identity,
            flow=self.flow,
            alignment=self.alignment,
            alignment_timeout_s=self.alignment_timeout_s,
            alignment_hold_bytes=self.alignment_hold_bytes,
            clock=self.recovery.clock,
            source_snapshot_every=self.source_snapshot_interval_s,
            concurrent=self.concurrent,
        )
        self.tasks = []
        try:
            for spec in self.specs:
                self.tasks.append(open_task(rt, spec, checkpoint))
        except CheckpointError as exc:
            # Tell the coordinator why, so it can fall back to an older checkpoint
            # instead of restarting this worker into the same failure.
            self.send_control(RestoreFailed(self.name, generation, checkpoint, str(exc)))
            raise
        log_context.update(generation=generation)
        log.info(
            "%s: generation %d, restored %s from %s in %.2fs",
            self.name,
            generation,
            ", ".join(t.id for t in self.tasks) or "no subtasks",
            f"checkpoint {checkpoint}" if checkpoint is not None else "scratch",
            time.monotonic() - started,
            extra={"checkpoint": checkpoint},
        )
        self._running = generation
        self._quiet_since = None  # a rollback ends idleness at the coordinator too
        self.metrics.running(self.tasks, generation, time.monotonic() - started)
        # Flushed: the coordinator triggers the generation's first checkpoint as
        # soon as every worker's first heartbeat not marked restoring arrives.
        self._heartbeat(force=True, flush=True)

    def announce(self, checkpoint: int) -> None:
        """A subtask of this worker started `checkpoint`: tell the others now."""
        for t in self.tasks:
            t.announced(checkpoint)

    # -- control ------------------------------------------------------------

    def _carry_out(self, actions: list[WorkerAction]) -> None:
        """Do what `WorkerRecovery` decided. Raises `RollbackInterrupt` last, if told to."""
        interrupt = False
        for action in actions:
            match action:
                case Restore(generation=gen, checkpoint=n):
                    self._restore(gen, n)
                case Trigger(checkpoint=n):
                    for t in self.tasks:
                        t.trigger(n)
                case Announced(checkpoint=n):
                    for t in self.tasks:
                        t.announced(n)
                case Commit(checkpoint=n):
                    self.faults.hit("completed-before-commit", n)
                    for t in self.tasks:
                        t.on_complete(n)
                    # Its tables are referenced, not uploaded, by the next snapshots.
                    self.storage.note_complete(n)
                    self.faults.hit("committed", n)
                case Abort(checkpoint=n):
                    for t in self.tasks:
                        t.on_abort(n)
                case Interrupt():
                    interrupt = True
                case _:
                    assert_never(action)
        if interrupt:
            raise RollbackInterrupt

    def pump(self) -> None:
        """Serve `complete`/`abort` of this generation now, from inside a subtask.

        A transactional sink whose producers all hold pre-committed epochs waits
        here for a checkpoint to complete. Other messages are deferred to the main
        loop; a rollback interrupts the wait (the subtask is being replaced), after
        every message of the batch was read, so none is lost.
        """
        assert self._reader is not None
        actions: list[WorkerAction] = []
        for _, msg in self._reader.poll(0.05):
            actions += self._read(msg, Where.SINK_WAIT)
        self._carry_out(actions)
        self._send_acks()
        self._heartbeat()

    def _activity(self) -> int:
        return sum(t.activity for t in self.tasks)

    def _wake_if_busy(self) -> None:
        """After a quiet ack, tell the coordinator at once when a subtask does something
        again: the job may count as idle, checkpointed rarely, and this work's output
        must not wait for that ({ref}`coordinator-idle`)."""
        if self._quiet_since is not None and self._activity() != self._quiet_since[1]:
            checkpoint, self._quiet_since = self._quiet_since[0], None
            self._heartbeat(force=True, flush=True, woke=checkpoint)

    def _send_acks(self) -> None:
        """Ack every snapshot stored since the last call, flushed once at the end.

        An ack is quiet when its subtask did nothing since its previous ack; the
        first quiet one arms the wake-up (`_wake_if_busy`)."""
        reported = acked = False
        for t in self.tasks:
            while t.pending and t.pending[0].future.done():
                if not reported:
                    # Counters go out before the ack, in the same ordered stream: once
                    # a checkpoint completes, everything before its barriers has been
                    # counted, and what a killed process did after it is replayed (and
                    # counted) after the rollback. No record goes uncounted.
                    self._heartbeat(force=True)
                    reported = True
                p = t.pending.pop(0)
                exc = p.future.exception()
                if exc is not None:
                    # Declined at once: the checkpoint aborts, processing goes on from
                    # the state in memory (the last completed checkpoint stays the
                    # restore point), and the next checkpoint tries the storage again.
                    why = f"snapshot not stored: {exc}"
                    log.warning(
                        "%s: checkpoint %d: %s",
                        t.id,
                        p.meta.checkpoint,
                        why,
                        extra={"subtask": t.id, "checkpoint": p.meta.checkpoint},
                    )
                    t.decline(p.meta.checkpoint, why)
                    continue
                m = p.future.result()
                self.metrics.acked(m.task, m.size, m.alignment_ms, m.sync_ms)
                activity = t.activity
                quiet = t.acked_activity == activity
                t.acked_activity = activity
                if quiet and self._quiet_since is None:
                    self._quiet_since = (m.checkpoint, self._activity())
                self.control.send(
                    Acked(
                        m.checkpoint,
                        m.generation,
                        m.task,
                        size=m.size,
                        alignment_ms=round(m.alignment_ms, 3),
                        sync_ms=round(m.sync_ms, 3),
                        channel_offsets=m.channel_offsets,
                        source_offsets=m.source_offsets,
                        unaligned=p.unaligned,
                        in_flight=p.in_flight,
                        cut_on=p.cut_on,
                        marker_offsets=self._marker_offsets(m.sink),
                        quiet=quiet,
                    ),
                    # One round trip for all of them (and the heartbeat before): below.
                    flush=False,
                )
                acked = True
        if acked:
            self.control.flush()

    def _marker_offsets(self, sinks: dict[str, Any]) -> dict[str, dict[int, int]]:
        """The committed marker offsets a snapshot's sinks name (see `Acked.marker_offsets`)."""
        found: dict[int, int] = {}
        for meta in sinks.values():
            marker = meta.get("marker") if isinstance(meta, dict) else None
            if isinstance(marker, list) and len(marker) == 2:
                found[int(marker[0])] = int(marker[1])
        return {commit_topic(self.job.name): found} if found else {}

    def _retire_tasks(self) -> None:
        """Close every subtask, keeping what it counted."""
        self.metrics.retire()
        for t in self.tasks:
            self._counted = self._counted + t.counters()
            self._last_dead_letter = t.stats.last_dead_letter or self._last_dead_letter
            t.close()
        self.tasks = []

    def counters(self) -> WorkerCounters:
        """What this process did so far, over all its generations."""
        total = self._counted
        for t in self.tasks:
            total = total + t.counters()
        return total

    def _heartbeat(self, force: bool = False, flush: bool = False, woke: int = 0) -> None:
        if force or self.heartbeat.due(time.monotonic()):
            self._die_if_orphaned()
            latest = self._last_dead_letter
            for t in self.tasks:
                latest = t.stats.last_dead_letter or latest
            self.heartbeat.publish(
                WorkerAlive(
                    self.name,
                    self.recovery.heartbeat_generation,
                    time=time.time(),
                    process=self.process,
                    counters=self.counters(),
                    dead_letter=latest,
                    restoring=self.restoring,
                    waiting=self.recovery.waiting > 0,
                    storing=self.storing.slow(),
                    alignment=tuple(a for t in self.tasks if (a := t.alignment()) is not None),
                    woke=woke,
                ),
                flush=flush,
            )

    def _stuck(self) -> tuple[str, str]:
        stuck = self.watch.stuck()
        return ("", "") if stuck is None else (stuck.line, stuck.on)

    def _die_if_orphaned(self) -> None:
        if runner_gone(self.runner_pid):
            # Where the kernel cannot kill orphans for us (`kstream.runtime.parent`).
            os.kill(os.getpid(), signal.SIGKILL)

    # -- main loop ----------------------------------------------------------

    def run(self, should_stop: Callable[[], bool]) -> None:
        """Run until `should_stop()`; raises `JobFailedError` when the job must stop.

        Raises `AlreadyRunningError` at once if another process runs this worker index.
        """
        self.lock.acquire()
        # Staged snapshots a killed predecessor left behind are never stored now.
        shutil.rmtree(self.state_root / "staging", ignore_errors=True)
        reader = ControlReader(self.bootstrap, self.job.name, group=worker_group(self.job.name))
        self._reader = reader
        self.heartbeat.start(
            WorkerAlive(self.name, self.generation, process=self.process, counters=self.counters())
        )
        self.watch.start()
        try:
            self._join(reader)
            idle = False
            while not should_stop():
                self._carry_out(self.recovery.resume())
                for _, msg in reader.poll(0):
                    self._carry_out(self._read(msg))
                processed = 0
                wait = IDLE_WAIT_S / len(self.tasks) if idle and self.tasks else 0.0
                watch = self.watch
                try:
                    for t in self.tasks:
                        watch.task = t
                        processed += t.poll(wait)
                        # Between subtasks too: a stored snapshot's ack waits for one
                        # subtask's batch, not every one's. Control messages are not
                        # read here: a rollback replaces `self.tasks`, and the rest of
                        # this round would poll the closed subtasks.
                        self._send_acks()
                    watch.task = None
                    if processed:
                        for t in self.tasks:
                            t.flush()
                except RollbackInterrupt:
                    watch.task = None
                    continue  # the deferred `recover` replaces every subtask
                idle = processed == 0
                self.producer.poll(0)
                self.raise_if_undelivered()
                self._wake_if_busy()
                self._send_acks()
                self._heartbeat()
            # A clean stop: commit what completed checkpoints cover before leaving,
            # so the output of the last checkpoint does not wait for the next run.
            # Settled: the completion the coordinator committed just before it
            # stopped this worker may not be readable yet.
            for _, msg in reader.read_to_end(settle=STOP_SETTLE_S):
                self._carry_out(self._read(msg, Where.STOPPING))
            # The final counts, for the runner's summary.
            self._heartbeat(force=True, flush=True)
        except BaseException as exc:
            self._report_end(exc)
            raise
        finally:
            self.watch.stop()
            self.heartbeat.stop()
            self._retire_tasks()
            reader.close()
            self.executor.shutdown(wait=True)
            self.producer.flush(10)
            self.lock.release()

    def _report_end(self, exc: BaseException) -> None:
        """Best effort, as the worker dies of `exc`: its final counts, and a failure that
        would repeat on every restart told to the runner (`kstream.runtime.failure`).

        The counts make the runner's summary include what this process read since
        its last heartbeat. The `worker-failed` message stops the job also when its
        runner did not spawn this process (`--no-spawn`): restarting cannot grant an
        ACL, import a module or make a user function stop exiting.
        """
        failure = classify(exc)
        if isinstance(exc, KafkaUnavailableError):
            return  # nothing gets through: leave at once, the restart will retry
        try:
            self._heartbeat(force=True, flush=True)
            if failure.deterministic:
                self.control.send(WorkerFailed(self.name, failure.cause))
        except Exception as err:  # the cause of death matters more
            log.warning("%s: could not tell the control topic why it stops: %s", self.name, err)


def open_task(rt: TaskContext, spec: TaskSpec, restore_from: int | None) -> Subtask:
    """Build the subtask for `spec`, restored from checkpoint `restore_from` (None: fresh)."""
    if rt.plan.stage(spec).source is not None:
        return SourceTask(rt, spec, restore_from)
    return ChannelTask(rt, spec, restore_from)


def _await_control_topic(bootstrap: str, job: str) -> None:
    """Return once the job's control topic exists; raise `KafkaUnavailableError` after
    `JOIN_TIMEOUT_S`.

    The coordinator creates it. A worker started by hand on another machine
    (``kstream run --no-spawn``) may well start first: it waits, as it waits for
    the first `recover`, instead of failing on a topic that is not there yet.
    """
    admin = Admin(bootstrap)
    topic = control_topic(job)
    deadline = time.monotonic() + JOIN_TIMEOUT_S
    said = False
    while admin.partitions(topic) is None:
        if time.monotonic() > deadline:
            raise KafkaUnavailableError(
                f"no coordinator: {topic} was not created within {JOIN_TIMEOUT_S:.0f}s "
                "(is `kstream run` running?)"
            )
        if not said:
            log.info("waiting for the coordinator to create %s", topic)
            said = True
        time.sleep(0.5)  # polling the cluster's metadata; nothing to wait on instead


def _shared_producer_limit(bootstrap: str, job_plan: Plan, guarantee: Guarantee) -> int:
    """``message.max.bytes`` of the shared producer, from the topics it writes.

    It writes the channels, the dead letters and the output of Kafka sinks
    without transactions (transactional sinks have producers of their own).
    Topics not created yet get the limit kstream creates internal topics with.
    """
    topics = [*job_plan.channel_topics(), dead_letter_topic(job_plan.job.name)]
    if guarantee != "exactly-once":
        for stage in job_plan.job.stages:
            for node in sink_nodes(stage.root):
                assert node.sink is not None
                topics.extend(node.sink.topics())
    found = Admin(bootstrap).topic_config(topics, MAX_MESSAGE_BYTES)
    return producer_limit(int(found.get(t, INTERNAL_TOPIC_MAX_BYTES)) for t in topics)
