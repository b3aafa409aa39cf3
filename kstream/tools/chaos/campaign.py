"""The campaign loop: a job under a seeded stream of faults, fed all along, then judged.

One round of the loop (a fraction of a second) feeds the input due by now,
takes what became visible in the output, follows the job's control topic
(which checkpoint was triggered last, which completed), ends the faults that
last (a SIGSTOP's SIGCONT, a broker's restart), restarts the runner when it
died, and injects the faults that are due. A fault waits until the job has
completed a checkpoint since the previous fault (faults due at the same moment
go together), and until its target is there (the broker restarting, the runner
being restarted): the order of the schedule is kept, its times are the
earliest a fault happens.

After `duration` the faults stop, the input written is read back and the
campaign waits until every key's last output is its final value (the job
still makes progress), then stops the job cleanly and judges the output.
"""

from __future__ import annotations

import faulthandler
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kstream.errors import KStreamError
from kstream.infra.admin import Admin
from kstream.infra.broker import LocalBroker
from kstream.protocol.checkpoint_history import CheckpointRecord, checkpoint_history
from kstream.protocol.messages import Completed, ControlMessage, Recovered, Triggered
from kstream.protocol.names import control_topic
from kstream.protocol.snapshot_id import SnapshotId
from kstream.runtime.control import ControlReader, read_messages
from kstream.runtime.worker.faults import FAULT_FILE_ENV, POINTS
from kstream.tools.chaos.feeder import InputFeeder
from kstream.tools.chaos.own_broker import claim
from kstream.tools.chaos.reader import OutputReader, final_outputs, read_input
from kstream.tools.chaos.resources import SAMPLE_EVERY_S, ResourceSample, sample
from kstream.tools.chaos.schedule import KINDS, Fault, LastFault, may_strike, schedule
from kstream.tools.chaos.tables import PostgresTable, SinkTable, TableReader
from kstream.tools.chaos.targets import RunnerProcess, alive, signal_pid
from kstream.tools.chaos.verdict import Verdict
from kstream.tools.chaos.workload import Workload

__all__ = ["CampaignConfig", "CampaignResult", "Injected", "run_campaign"]

#: Partitions of the input and output topics.
PARTITIONS = 3
#: How long a worker is SIGSTOPped: longer than the coordinator's liveness
#: timeout (15 s), so it is declared lost while it still exists: a zombie.
WORKER_STOP_S = 20.0
#: How long the broker is SIGSTOPped: longer than its session timeout with the
#: controller (`broker.session.timeout.ms`, 9 s) and the worker liveness timeout.
BROKER_PAUSE_S = 20.0
#: How long PostgreSQL stays down in a ``postgres-restart``: long enough that the job
#: fails a checkpoint or a recovery against it.
POSTGRES_DOWN_S = 10.0
#: How long a SIGKILLed runner's workers may take to notice and die.
ORPHAN_TIMEOUT_S = 30.0
#: Pause before restarting a runner that exited, as a supervisor's back-off.
RESTART_BACKOFF_S = 2.0
#: An armed protocol point that this many checkpoints passed without firing is given up.
POINT_PATIENCE = 4
#: The longest a fault waits for the job to complete a checkpoint after the previous one.
GATE_TIMEOUT_S = 180.0
#: A round of the loop that takes longer than this prints its stack (a hang to fix).
ROUND_WATCHDOG_S = 10.0
#: Seconds between status lines on the console.
STATUS_EVERY_S = 15.0


@dataclass(frozen=True, slots=True)
class CampaignConfig:
    """What one campaign does; `port` is its own broker's (it creates, kills and wipes it)."""

    workload: Workload
    duration: float
    seed: int
    rate: float
    port: int
    out: Path
    workers: int = 3
    mean_gap: float = 15.0
    kinds: tuple[str, ...] = KINDS
    checkpoint_interval: float = 1.0
    worker_stop_s: float = WORKER_STOP_S
    broker_pause_s: float = BROKER_PAUSE_S
    drain_timeout: float = 600.0
    #: The job's `--guarantee`; the verdict asks exactly-once of the output whatever it is.
    guarantee: str = "exactly-once"
    #: A sink workload's table (`tables.sink_table`); None for a workload writing a topic.
    table: SinkTable | None = None
    #: Seconds before the first fault.
    warmup: float = 20.0
    postgres_down_s: float = POSTGRES_DOWN_S


@dataclass(frozen=True, slots=True)
class Injected:
    """A fault as it happened: `at` seconds after the start; `lasted` for pauses."""

    at: float
    kind: str
    target: str
    lasted: float = 0.0


@dataclass(frozen=True, slots=True)
class CampaignResult:
    """Everything the report shows."""

    config: CampaignConfig
    faults: tuple[Injected, ...]
    verdict: Verdict
    checkpoints: tuple[CheckpointRecord, ...]
    recoveries: int
    runner_starts: int
    #: Why the runner exited when the campaign had not killed it (e.g. the broker
    #: was down when it started): expected under faults, restarted each time.
    runner_exits: tuple[str, ...]
    #: What points at a defect: orphaned workers, a job that did not catch up.
    incidents: tuple[str, ...]
    drained: bool
    started_wall: float
    duration_s: float
    job_name: str = ""
    #: How many faults the schedule held (those still waiting at the end never happened).
    scheduled: int = 0
    #: Times the checker's live consumer was replaced because it stalled; outputs it missed.
    checker_reconnects: int = 0
    checker_missed: int = 0
    #: Reads of a sink workload's table that failed (its server restarting).
    checker_failed_reads: int = 0
    #: Times the campaign's input producer was replaced because it was stuck.
    feeder_replacements: int = 0
    #: When each output record became visible to the checker (seconds after the start).
    seen: tuple[float, ...] = ()
    #: Worker memory and the job's disk over time (`kstream.tools.chaos.resources`).
    resources: tuple[ResourceSample, ...] = ()

    @property
    def by_kind(self) -> dict[str, int]:
        return dict(Counter(f.kind for f in self.faults))

    @property
    def passed(self) -> bool:
        return (
            self.verdict.clean
            and self.drained
            and self.verdict.unfinished == 0
            and not self.incidents
        )


class _Campaign:
    def __init__(
        self, config: CampaignConfig, say: Callable[[str], None], broker: LocalBroker
    ) -> None:
        self.c = config
        self.say = say
        self.broker = broker
        self.bootstrap = self.broker.bootstrap
        tag = f"{config.workload.name}-s{config.seed}"
        self.input = f"chaos-{tag}-in"
        self.output = f"chaos-{tag}-out"
        self.job = f"chaos-{tag}"
        config.out.mkdir(parents=True, exist_ok=True)
        self.fault_file = config.out / "armed-faults"
        self.fault_file.unlink(missing_ok=True)
        self.fired_file = config.out / "armed-faults.fired"
        self.fired_file.unlink(missing_ok=True)
        self.started = time.monotonic()
        self.started_wall = time.time()
        if config.workload.sink and config.table is None:
            raise KStreamError(
                f"workload {config.workload.name} needs its table (CampaignConfig.table)"
            )
        self.queue = list(
            schedule(
                config.seed, config.duration, config.mean_gap, config.kinds, warmup=config.warmup
            )
        )
        self.scheduled = len(self.queue)
        self.injected: list[Injected] = []
        self.incidents: list[str] = []
        self.runner_exits: list[str] = []
        self.resumes: list[tuple[float, int, str, float]] = []  # (due, pid, what, since)
        self.stopped_workers: set[int] = set()
        self.broker_busy: threading.Thread | None = None
        #: A ``postgres-restart`` under way, and what ends its down time early (the end).
        self.database_busy: threading.Thread | None = None
        self.database_up_now = threading.Event()
        self.broker_paused = False
        self.orphans: tuple[list[int], float] | None = None
        self.runner_down_since: float | None = None
        self.latest_triggered: int | None = None
        self.completed = 0
        self.armed: tuple[str, int, int] | None = None  # point, checkpoint, pick
        self.fired_read = 0
        self.control: ControlReader | None = None
        #: Every control message, read as the job runs: the topic is purged behind
        #: what restarts need, so reading it at the end would miss the early history.
        self.messages: list[ControlMessage] = []
        self.last_fault: LastFault | None = None
        self.resources: list[ResourceSample] = []
        self.sampled = -SAMPLE_EVERY_S

    def now(self) -> float:
        return time.monotonic() - self.started

    def log(self, line: str) -> None:
        self.say(f"[{self.now():7.1f}s] {line}")

    def inject_done(
        self, kind: str, target: str, lasted: float = 0.0, at: float | None = None
    ) -> None:
        self.injected.append(Injected(self.now() if at is None else at, kind, target, lasted))
        self.log(f"{kind}: {target}")

    # -- set-up -----------------------------------------------------------

    def start(self) -> None:
        self.say(f"broker on {self.bootstrap} (the campaign's own: it is killed)")
        self.broker.start()
        topics = self.c.workload.topics(self.input, self.output)
        # Kept forever: a windowed job's results carry event time as their timestamp,
        # which may be older than any retention.
        Admin(self.bootstrap).create_topics(
            dict.fromkeys(topics, PARTITIONS), {"retention.ms": "-1"}
        )
        # Faults are timed from here, once the broker is up: a broker that was slow to
        # start (a loaded machine) must not eat the time the faults have.
        self.started = time.monotonic()
        self.lines = self.c.workload.generate(
            self.c.seed, max(1, int(self.c.rate * self.c.duration))
        )
        self.feeder = InputFeeder(self.bootstrap, self.input, self.lines, PARTITIONS, self.c.rate)
        params = self.c.workload.params(self.input, self.output)
        if self.c.table is not None:
            self.c.table.prepare()
            params.update(self.c.table.params)
            self.say(f"table: {self.c.table.location}")
        # -P: a `kstream` folder in the current directory must not shadow the package.
        command = [
            sys.executable, "-P", "-m", "kstream", "run", self.c.workload.spec,
            "--workers", str(self.c.workers),
            "--checkpoint-interval", str(self.c.checkpoint_interval),
            "--state-dir", str(self.c.out / "state"),
            "--job-name", self.job,
            "--bootstrap-servers", self.bootstrap,
            "--guarantee", self.c.guarantee,
        ]  # fmt: skip
        for k, v in params.items():
            command += ["-p", f"{k}={v}"]
        self.runner = RunnerProcess(
            command, self.c.out / "runner.log", {FAULT_FILE_ENV: str(self.fault_file)}
        )
        self.runner.start()
        self.reader: OutputReader | TableReader = (
            OutputReader(self.bootstrap, self.output, self.started, self.c.workload.output_key)
            if self.c.table is None
            else TableReader(self.c.table, self.started)
        )
        self.say(
            f"job {self.job}: {self.c.workload.spec}, {self.c.workers} workers, "
            f"{len(self.lines):,} lines at {self.c.rate:g}/s, {len(self.queue)} faults scheduled"
        )

    # -- one round --------------------------------------------------------

    def round(self, faults: bool) -> None:
        # A round never waits on Kafka for long; one that hangs says where, on stderr.
        faulthandler.dump_traceback_later(ROUND_WATCHDOG_S, exit=False)
        try:
            self._round(faults)
        finally:
            faulthandler.cancel_dump_traceback_later()

    def _round(self, faults: bool) -> None:
        self.feeder.feed()
        self.reader.poll(0.1)
        self._follow_control()
        self._sample()
        self._check_fired()
        self._resume_due()
        self._supervise_runner()
        if self.broker_busy is not None and not self.broker_busy.is_alive():
            self.broker_busy = None
            self.log("broker back")
        if self.database_busy is not None and not self.database_busy.is_alive():
            self.database_busy = None
            self.log("postgres back")
        while faults and self.queue and self.queue[0].at <= self.now():
            fault = self.queue[0]
            if not self._gate_open(fault) or not self._inject(fault):
                break
            self.queue.pop(0)
            self.last_fault = LastFault(fault.at, self.now(), self.completed)

    def _gate_open(self, fault: Fault) -> bool:
        """`schedule.may_strike`, saying so when a job that completes nothing is hit anyway."""
        if may_strike(fault, self.last_fault, self.completed, self.now(), GATE_TIMEOUT_S):
            last = self.last_fault
            if last is not None and self.completed == last.completed and fault.at != last.scheduled:
                self.log(f"no checkpoint completed for {GATE_TIMEOUT_S:.0f}s since the last fault")
            return True
        return False

    def _follow_control(self) -> None:
        if self.control is None:
            if Admin(self.bootstrap).partitions(control_topic(self.job)) is None:
                return
            self.control = ControlReader(self.bootstrap, self.job, f"kstream-chaos-{self.job}")
        for _, msg in self.control.poll(0):
            self._observe(msg)

    def _sample(self) -> None:
        if self.now() - self.sampled < SAMPLE_EVERY_S:
            return
        self.sampled = self.now()
        workers = self.runner.workers() if self.orphans is None else []
        self.resources.append(
            sample(
                self.now(),
                workers,
                self.broker.directory / "data",
                self.c.out / "state" / self.job,
                internal=f"kstream.{self.job}.",
            )
        )

    def _observe(self, msg: ControlMessage) -> None:
        self.messages.append(msg)
        match msg:
            case Triggered(checkpoint=n):
                self.latest_triggered = max(n, self.latest_triggered or 0)
            case Completed():
                self.completed += 1
            case Recovered(generation=g, reason=reason, restated=False) if g > 1:
                self.log(f"  job recovered: generation {g} ({reason})")
            case _:
                pass

    def _check_fired(self) -> None:
        if self.armed is None:
            return
        point, n, _ = self.armed
        try:
            lines = self.fired_file.read_text().splitlines()
        except FileNotFoundError:
            lines = []
        fresh = lines[self.fired_read :]
        self.fired_read = len(lines)
        if fresh:
            pids = ", ".join(line.split()[-1] for line in fresh)
            self.inject_done("fault-point", f"{point}@{n} fired in pid {pids}")
            self.armed = None
            self.fault_file.unlink(missing_ok=True)
        elif _sequence(self.latest_triggered or 0) >= _sequence(n) + POINT_PATIENCE:
            self.log(f"fault-point {point}@{n} was not reached (checkpoint skipped); re-arming")
            self.queue.insert(0, Fault(self.now(), "fault-point", self.armed[2] + 1))
            self.armed = None

    def _resume_due(self) -> None:
        for item in [r for r in self.resumes if r[0] <= self.now()]:
            self.resumes.remove(item)
            _, pid, what, since = item
            if signal_pid(pid, signal.SIGCONT):
                self.log(f"SIGCONT {what} after {self.now() - since:.1f}s")
            self.stopped_workers.discard(pid)
            if what == "broker":
                self.broker_paused = False

    def _supervise_runner(self) -> None:
        if self.orphans is not None:
            pids, since = self.orphans
            left = [p for p in pids if alive(p)]
            if left and self.now() - since < ORPHAN_TIMEOUT_S:
                return
            if left:
                self.incidents.append(
                    f"{self.now():.1f}s: workers {left} outlived their SIGKILLed runner "
                    f"for {ORPHAN_TIMEOUT_S:.0f}s (orphans); killed"
                )
                self.log(self.incidents[-1])
                for p in left:
                    signal_pid(p, signal.SIGKILL)
            self.orphans = None
            self.runner.start()
            self.log(f"runner restarted (start {self.runner.starts})")
            return
        code = self.runner.exit_code()
        if code is None:
            self.runner_down_since = None
            return
        if self.runner_down_since is None:
            self.runner_down_since = self.now()
            self.runner_exits.append(f"{self.now():.1f}s: code {code}: {self.runner.last_line()}")
            self.log(f"runner exited with code {code}: {self.runner.last_line()}")
        if self.now() - self.runner_down_since >= RESTART_BACKOFF_S:
            self.runner.start()
            self.runner_down_since = None
            self.log(f"runner restarted (start {self.runner.starts})")

    # -- faults -----------------------------------------------------------

    def _broker_free(self) -> bool:
        return self.broker_busy is None and not self.broker_paused

    def _inject(self, fault: Fault) -> bool:
        """Inject `fault` now; False if its target is not there yet (it waits)."""
        kind = fault.kind
        workers = self.runner.workers() if self.orphans is None else []
        if kind in ("worker-kill", "worker-stop"):
            candidates = [p for p in workers if p not in self.stopped_workers]
            if not candidates:
                return False
            pid = candidates[fault.pick % len(candidates)]
            if kind == "worker-kill":
                signal_pid(pid, signal.SIGKILL)
                self.inject_done(kind, f"SIGKILL worker pid {pid}")
            else:
                signal_pid(pid, signal.SIGSTOP)
                self.stopped_workers.add(pid)
                self.resumes.append(
                    (self.now() + self.c.worker_stop_s, pid, f"worker {pid}", self.now())
                )
                self.inject_done(
                    kind,
                    f"SIGSTOP worker pid {pid} for {self.c.worker_stop_s:g}s",
                    self.c.worker_stop_s,
                )
            return True
        if kind == "fault-point":
            if self.armed is not None or self.latest_triggered is None or not workers:
                return False
            point = sorted(POINTS)[fault.pick % len(POINTS)]
            # Two of the coordinator's checkpoints ahead (ids are Lamport clocks).
            n = SnapshotId(SnapshotId.decode(self.latest_triggered).sequence + 2, 0).encode()
            tmp = self.fault_file.with_name(self.fault_file.name + ".tmp")
            tmp.write_text(f"{point}@{n}\n")
            tmp.replace(self.fault_file)  # atomic: a worker never reads half a file
            self.armed = (point, n, fault.pick)
            self.log(f"armed {point}@{n}")
            return True
        if kind == "runner-kill":
            if not self.runner.running() or not workers:
                return False
            pid = self.runner.proc.pid if self.runner.proc is not None else 0
            self.runner.kill()
            self.orphans = (workers, self.now())
            self.inject_done(kind, f"SIGKILL runner pid {pid} (workers {workers})")
            return True
        if kind == "postgres-restart":
            table = self.c.table
            if not isinstance(table, PostgresTable) or table.server is None:
                raise KStreamError("postgres-restart needs the workload's local PostgreSQL server")
            if self.database_busy is not None:
                return False
            self.database_busy = threading.Thread(
                target=self._postgres_restart, args=(table,), name=kind, daemon=True
            )
            self.database_busy.start()
            self.inject_done(
                kind,
                f"stop postgres (fast shutdown) for {self.c.postgres_down_s:g}s, start",
                self.c.postgres_down_s,
            )
            return True
        if not self._broker_free():
            return False
        if kind == "broker-pause":
            broker_pid = self.broker.pid()
            if broker_pid is None:
                return False
            signal_pid(broker_pid, signal.SIGSTOP)
            self.broker_paused = True
            self.resumes.append(
                (self.now() + self.c.broker_pause_s, broker_pid, "broker", self.now())
            )
            self.inject_done(
                kind,
                f"SIGSTOP broker pid {broker_pid} for {self.c.broker_pause_s:g}s",
                self.c.broker_pause_s,
            )
            return True
        act = self._broker_kill if kind == "broker-kill" else self._broker_bounce
        self.broker_busy = threading.Thread(target=act, name=kind, daemon=True)
        self.broker_busy.start()
        self.inject_done(
            kind, "SIGKILL broker, restart" if kind == "broker-kill" else "stop broker, restart"
        )
        return True

    def _broker_kill(self) -> None:
        self.broker.kill()
        self.broker.start()

    def _postgres_restart(self, table: PostgresTable) -> None:
        assert table.server is not None
        table.server.stop()
        # The fault's length, cut short when the faults are over.
        self.database_up_now.wait(self.c.postgres_down_s)
        table.server.start()

    def _broker_bounce(self) -> None:
        self.broker.stop()
        self.broker.start()

    # -- the end ----------------------------------------------------------

    def quiesce(self) -> None:
        """End every fault still under way: SIGCONT what is stopped, wait for the broker."""
        for _due, pid, what, _since in list(self.resumes):
            signal_pid(pid, signal.SIGCONT)
            self.log(f"SIGCONT {what} (faults over)")
        self.resumes.clear()
        self.stopped_workers.clear()
        self.broker_paused = False
        if self.broker_busy is not None:
            self.broker_busy.join()
        self.database_up_now.set()
        if self.database_busy is not None:
            self.database_busy.join()

    def drain(self) -> tuple[bool, list[bytes]]:
        """Feed the rest, then wait until every key's last output is its final value."""
        deadline = self.now() + self.c.drain_timeout
        while not self.feeder.done:
            if self.now() > deadline:
                self.incidents.append(
                    f"input not all written after {self.c.drain_timeout:.0f}s: "
                    f"{self.feeder.pending:,} deliveries pending"
                )
                self.log(self.incidents[-1])
                return False, read_input(self.bootstrap, self.input)
            self.round(faults=False)
        lines = read_input(self.bootstrap, self.input)
        finals = self.c.workload.final_values(lines)
        self.log(f"input complete: {len(lines):,} lines; waiting for {len(finals):,} final values")
        deadline = self.now() + self.c.drain_timeout
        last_status = self.now()
        while self.now() < deadline:
            self.round(faults=False)
            if not self.c.workload.behind(finals, self.reader.latest):
                return True, lines
            if self.now() - last_status >= STATUS_EVERY_S:
                last_status = self.now()
                behind = self.c.workload.behind(finals, self.reader.latest)
                self.status(f"; {behind} keys behind their final value")
        behind = self.c.workload.behind(finals, self.reader.latest)
        self.incidents.append(
            f"{behind} keys without their final value after {self.c.drain_timeout:.0f}s"
        )
        self.log(self.incidents[-1])
        return False, lines

    def close(self) -> None:
        """Leave nothing running: faults ended, runner and workers, readers, broker."""
        self.quiesce()
        runner: RunnerProcess | None = getattr(self, "runner", None)
        if runner is not None:
            runner.stop(30.0)
        for reader in (getattr(self, "reader", None), self.control):
            if reader is not None:
                reader.close()
        self.broker.stop()

    def status(self, extra: str = "") -> None:
        self.log(
            f"fed {self.feeder.sent:,}, outputs {len(self.reader.records):,}, "
            f"checkpoint {self.latest_triggered}, {self.completed} completed, "
            f"{len(self.injected)} faults{extra}"
            + (f"; checker reconnected {self.reader.reconnects}x" if self.reader.reconnects else "")
            + (
                f"; input producer replaced {self.feeder.replacements}x"
                if self.feeder.replacements
                else ""
            )
        )


def _sequence(checkpoint: int) -> int:
    """A checkpoint id's Lamport time: how many checkpoints of the coordinator it is past."""
    return SnapshotId.decode(checkpoint).sequence


def run_campaign(config: CampaignConfig, say: Callable[[str], None] = print) -> CampaignResult:
    """Run one campaign (see the module docstring); the broker is stopped at the end.

    The broker is one the campaign creates on `config.port` (`own_broker.claim`):
    a port a setting names, a port that answers, or a broker directory a campaign
    did not create is refused (`KStreamError`) before anything is created.
    """
    c = _Campaign(config, say, claim(config.port))
    try:
        c.start()
        last_status = 0.0
        while c.now() < config.duration:
            c.round(faults=True)
            if c.now() - last_status >= STATUS_EVERY_S:
                last_status = c.now()
                c.status()
        c.quiesce()
        c.log(f"faults over: {len(c.injected)} injected; draining")
        drained, lines = c.drain()
        c.status()
        code = c.runner.stop(60.0)
        c.log(f"runner stopped (exit code {code})")
        c.reader.poll(1.0)
        if isinstance(c.reader, TableReader):
            outputs, missed = c.reader.final(c.now())
        else:
            outputs, missed = final_outputs(c.bootstrap, c.reader, c.now())
        if missed:
            c.log(f"the live reader had not seen {missed:,} committed outputs; judged all")
        starts = [f.at for f in c.injected]
        verdict = config.workload.judge(lines, outputs, starts)
        messages = c.messages
        try:
            if c.control is not None:
                messages = messages + [m for _, m in c.control.read_to_end()]
        except KStreamError as exc:
            # The live reader failed at the end (a client left stale by the faults):
            # the control topic is read afresh instead, as a whole.
            c.log(f"the campaign's control reader failed ({exc}); reading the topic afresh")
            messages = []
        messages = messages or read_messages(c.bootstrap, c.job)
        history = tuple(checkpoint_history(messages))
        recoveries = sum(
            1 for m in messages if isinstance(m, Recovered) and m.generation > 1 and not m.restated
        )
        return CampaignResult(
            config=config,
            faults=tuple(c.injected),
            verdict=verdict,
            checkpoints=history,
            recoveries=recoveries,
            runner_starts=c.runner.starts,
            runner_exits=tuple(c.runner_exits),
            incidents=tuple(c.incidents),
            drained=drained,
            started_wall=c.started_wall,
            duration_s=c.now(),
            job_name=c.job,
            scheduled=c.scheduled,
            checker_reconnects=c.reader.reconnects,
            checker_missed=missed,
            checker_failed_reads=getattr(c.reader, "failed_reads", 0),
            feeder_replacements=c.feeder.replacements,
            seen=tuple(o.seen_at for o in outputs),
            resources=tuple(c.resources),
        )
    finally:
        c.close()
