"""`kstream run` and `kstream worker`: a job's runner and one of its workers.

`kstream run` supervises worker processes it spawns as ``python -P -m kstream
worker ...`` (or coordinates workers started elsewhere with ``--no-spawn``);
both commands load the job the same way and stop cleanly on SIGTERM or Ctrl-C.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from kstream.errors import ConfigurationError
from kstream.infra.logs import DEFAULT_BACKUPS, DEFAULT_MAX_BYTES, LOG_FORMAT_ENV, RotatingLog
from kstream.infra.logs import context as log_context
from kstream.protocol.flow import DEFAULT_MAX_LAG
from kstream.protocol.input import HOLD_BYTES
from kstream.tools.cli.console import err, error_line, log_lines, say
from kstream.tools.cli.metrics import (
    MetricsAddressOption,
    MetricsPortOption,
    check_worker_port,
    serve_runner,
    serve_worker,
    worker_port,
)
from kstream.tools.cli.options import (
    AT_LEAST_ONE,
    NON_NEGATIVE,
    POSITIVE,
    AlignmentHoldOption,
    AlignmentOption,
    AlignmentTimeoutOption,
    BootstrapOption,
    CheckpointStorageOption,
    GuaranteeOption,
    JobNameOption,
    KafkaConfigOption,
    LogFormatOption,
    ParamsOption,
    S3EndpointOption,
    SourceSnapshotIntervalOption,
    SpecArgument,
    StateDirOption,
    parse_alignment,
    run_config,
)
from kstream.tools.cli.ui import UiAddressOption, UiPortOption, serve_run_ui

#: Flow control's bound (see `kstream.protocol.flow`).
MaxChannelLagOption = Annotated[
    int,
    typer.Option(
        "--max-channel-lag",
        help="Channel records a channel between stages may hold before its writer pauses "
        "reading its inputs (each holds up to 500 stream records); 0 turns flow control off.",
        callback=NON_NEGATIVE,
    ),
]

if TYPE_CHECKING:
    from kstream.dataflow.job import Job
    from kstream.runtime.config import RunConfig
    from kstream.runtime.failure import Failure

__all__ = ["WORKERS_ENV", "WORKER_ENV", "run_command", "worker_command"]

#: Where `kstream run` and `kstream worker` read ``--workers`` when it is not given,
#: and `kstream worker` ``--worker``: one setting for a coordinator and its workers
#: (a ConfigMap), and a worker index from a StatefulSet's pod index (the downward API).
WORKERS_ENV = "KSTREAM_WORKERS"
WORKER_ENV = "KSTREAM_WORKER"


def run_command(
    spec: SpecArgument,
    param: ParamsOption = None,
    bootstrap_servers: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
    workers: Annotated[
        int,
        typer.Option(
            "--workers", help="Worker processes.", envvar=WORKERS_ENV, callback=AT_LEAST_ONE
        ),
    ] = 2,
    checkpoint_interval: Annotated[
        float,
        typer.Option(
            "--checkpoint-interval", help="Seconds between checkpoints.", callback=POSITIVE
        ),
    ] = 1.0,
    idle_checkpoint_interval: Annotated[
        float,
        typer.Option(
            "--idle-checkpoint-interval",
            help="Seconds between checkpoints while the job has had nothing to do for three "
            "checkpoints in a row (the first record after that still waits only "
            "--checkpoint-interval); 0: checkpoint an idle job at --checkpoint-interval.",
            callback=NON_NEGATIVE,
        ),
    ] = 10.0,
    checkpoint_timeout: Annotated[
        float,
        typer.Option(
            "--checkpoint-timeout", help="Seconds before a checkpoint fails.", callback=POSITIVE
        ),
    ] = 60.0,
    tolerable_checkpoint_timeouts: Annotated[
        int,
        typer.Option(
            "--tolerable-checkpoint-timeouts",
            help="Checkpoints that may time out in a row before the job rolls back and "
            "replaces the workers whose subtasks never acked; 0: at the first.",
            callback=NON_NEGATIVE,
        ),
    ] = 3,
    max_in_flight: Annotated[
        int,
        typer.Option("--max-in-flight", help="Checkpoints pending at once.", callback=AT_LEAST_ONE),
    ] = 1,
    liveness_timeout: Annotated[
        float,
        typer.Option(
            "--liveness-timeout",
            help="Seconds without a heartbeat before a worker is declared dead.",
            callback=POSITIVE,
        ),
    ] = 15.0,
    retained: Annotated[
        int,
        typer.Option(
            "--retained", help="Completed checkpoints kept on disk.", callback=AT_LEAST_ONE
        ),
    ] = 3,
    spawn: Annotated[
        bool,
        typer.Option(
            "--spawn/--no-spawn",
            help="Start the workers here, or only coordinate workers started elsewhere "
            "with `kstream worker`.",
        ),
    ] = True,
    guarantee: GuaranteeOption = "exactly-once",
    transaction_timeout: Annotated[
        float | None,
        typer.Option(
            "--transaction-timeout",
            help="Seconds a sink transaction may stay open (exactly-once); "
            "default: enough for two checkpoint intervals plus timeouts.",
            callback=POSITIVE,
        ),
    ] = None,
    max_channel_lag: MaxChannelLagOption = DEFAULT_MAX_LAG,
    alignment: AlignmentOption = "aligned",
    alignment_timeout: AlignmentTimeoutOption = None,
    alignment_hold_bytes: AlignmentHoldOption = HOLD_BYTES,
    source_snapshot_interval: SourceSnapshotIntervalOption = None,
    checkpoint_storage: CheckpointStorageOption = "",
    s3_endpoint_url: S3EndpointOption = "",
    concurrent: Annotated[
        bool,
        typer.Option(
            "--concurrent",
            help="Snapshots of distinct ids run at once (up to --max-in-flight), in any "
            "order, and each completes (needs --alignment unaligned).",
        ),
    ] = False,
    state_dir: StateDirOption = Path("state"),
    job_name: JobNameOption = None,
    fresh: Annotated[
        bool,
        typer.Option(
            "--fresh",
            help="Start from scratch: forget the job's checkpoints, empty state, sources "
            "from their start position.",
        ),
    ] = False,
    accept_changes: Annotated[
        bool,
        typer.Option(
            "--accept-changes",
            help="Resume a checkpoint although the job's sources, sinks or operators "
            "changed (never across a parallelism change).",
        ),
    ] = False,
    create_topics: Annotated[
        bool,
        typer.Option(
            "--create-topics",
            help="Create missing output topics with the partitions and replication of the "
            "widest input topic.",
        ),
    ] = False,
    allow_feedback: Annotated[
        bool,
        typer.Option(
            "--allow-feedback",
            help="Let a sink write a topic the job reads (it reads its own outputs again); "
            "refused otherwise.",
        ),
    ] = False,
    from_savepoint: Annotated[
        str,
        typer.Option(
            "--from-savepoint",
            help="Start from this savepoint (kstream savepoint), under any --job-name that "
            "has no checkpoint yet, at any --workers.",
        ),
    ] = "",
    allow_non_restored_state: Annotated[
        bool,
        typer.Option(
            "--allow-non-restored-state",
            help="With --from-savepoint: drop the savepoint's state that no operator "
            "of the job takes (refused otherwise).",
        ),
    ] = False,
    liveness_file: Annotated[
        Path | None,
        typer.Option(
            "--liveness-file",
            help="Touch this file at most once a second while the runner's loop turns "
            "(for a supervisor's probe: `kstream alive FILE`).",
        ),
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
    metrics_port: MetricsPortOption = 0,
    metrics_address: MetricsAddressOption = "0.0.0.0",
    log_format: LogFormatOption = "text",
    log_max_bytes: Annotated[
        int,
        typer.Option(
            "--log-max-bytes",
            help="A spawned worker's log file is rotated at this size (bytes).",
            callback=AT_LEAST_ONE,
        ),
    ] = DEFAULT_MAX_BYTES,
    log_backups: Annotated[
        int,
        typer.Option(
            "--log-backups",
            help="Rotated worker log files kept (worker-0.log.1, ...): with --log-max-bytes, "
            "a worker's logs take at most (backups + 1) x max bytes.",
            callback=NON_NEGATIVE,
        ),
    ] = DEFAULT_BACKUPS,
    ui_port: UiPortOption = 0,
    ui_address: UiAddressOption = "127.0.0.1",
) -> None:
    """Run a job on worker processes until SIGTERM or Ctrl-C; recover from worker deaths."""
    from kstream.runtime.checkpoint.url import parse_storage_url
    from kstream.runtime.runner.alive import AliveFile
    from kstream.runtime.runner.runner import Runner

    _logging(verbose, log_format=log_format)
    # The standbys this runner starts log the same way before they are told the
    # run configuration (which carries it too).
    os.environ[LOG_FORMAT_ENV] = log_format
    if fresh and accept_changes:
        raise ConfigurationError("--fresh and --accept-changes exclude each other")
    # Refused before the job loads.
    parse_alignment(alignment, alignment_timeout)
    alive = AliveFile(liveness_file) if liveness_file is not None else None
    if checkpoint_storage:
        parse_storage_url(checkpoint_storage)
    if from_savepoint:
        from kstream.runtime.checkpoint.savepoint import parse_savepoint_url

        parse_savepoint_url(from_savepoint)
    job, values = _load(spec, param, job_name)
    config = run_config(
        spec=spec,
        params=values,
        name=job.name,
        bootstrap_servers=bootstrap_servers,
        kafka_config=kafka_config,
        workers=workers,
        state_dir=state_dir,
        say=say,
        checkpoint_interval=checkpoint_interval,
        idle_checkpoint_interval=idle_checkpoint_interval,
        checkpoint_timeout=checkpoint_timeout,
        max_in_flight=max_in_flight,
        retained=retained,
        liveness_timeout=liveness_timeout,
        tolerable_checkpoint_timeouts=tolerable_checkpoint_timeouts,
        concurrent=concurrent,
        guarantee=guarantee,
        transaction_timeout=transaction_timeout,
        max_channel_lag=max_channel_lag,
        alignment=alignment,
        alignment_timeout=alignment_timeout,
        alignment_hold_bytes=alignment_hold_bytes,
        source_snapshot_interval=source_snapshot_interval,
        checkpoint_storage=checkpoint_storage,
        s3_endpoint_url=s3_endpoint_url,
        fresh=fresh,
        accept_changes=accept_changes,
        create_topics=create_topics,
        allow_feedback=allow_feedback,
        spawn=spawn,
        from_savepoint=from_savepoint,
        allow_non_restored_state=allow_non_restored_state,
    )
    config = dataclasses.replace(config, metrics_port=metrics_port, metrics_address=metrics_address)
    config = dataclasses.replace(
        config, log_format=log_format, log_max_bytes=log_max_bytes, log_backups=log_backups
    )
    log_context.update(job=job.name)
    runner = Runner(config, job, say=say)
    serve_runner(config, runner.metrics.registry, say)
    serve_run_ui(config.bootstrap, job.name, ui_port, ui_address, runner.identity, say)
    stop = _stop_flag()
    runner.prepare()
    running = runner.start()
    say(
        f"job {job.name}: {len(runner.plan.tasks)} subtasks on {workers} workers; "
        f"worker logs in {runner.log_path(0).parent}"
    )
    last = None
    try:
        while not stop() and not running.finished:
            running.step()
            if alive is not None:
                alive.beat()
            if runner.stats.latest != last and runner.stats.latest is not None:
                last = runner.stats.latest
                # Every tenth by count: ids are Lamport clocks, not 1, 2, 3, ...
                if verbose or runner.stats.completed % 10 == 0:
                    say(
                        f"checkpoint {last} complete in {runner.stats.last_duration_s:.2f}s "
                        f"(alignment {runner.stats.last_alignment_ms:.1f} ms)"
                    )
        if running.finished:
            say(f"job {job.name}: stopping after its savepoint")
    finally:
        if alive is not None:
            alive.clear()
        running.stop()
        for line in runner.report.summary(time.monotonic()):
            say(line)


def worker_command(
    spec: Annotated[
        str | None,
        typer.Argument(help="Job: module:attribute or path.py:attribute (not with --standby)."),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            help="Number of workers in the job (required without --standby).",
            envvar=WORKERS_ENV,
            callback=AT_LEAST_ONE,
        ),
    ] = None,
    worker: Annotated[
        int | None,
        typer.Option(
            "--worker",
            help="This worker's index (required without --standby); on Kubernetes, "
            "the pod index of a StatefulSet.",
            envvar=WORKER_ENV,
            callback=NON_NEGATIVE,
        ),
    ] = None,
    param: ParamsOption = None,
    bootstrap_servers: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
    state_dir: StateDirOption = Path("state"),
    job_name: JobNameOption = None,
    guarantee: GuaranteeOption = "exactly-once",
    transaction_timeout: Annotated[
        float, typer.Option("--transaction-timeout", callback=POSITIVE)
    ] = 600.0,
    max_channel_lag: MaxChannelLagOption = DEFAULT_MAX_LAG,
    alignment: AlignmentOption = "aligned",
    alignment_timeout: AlignmentTimeoutOption = None,
    alignment_hold_bytes: AlignmentHoldOption = HOLD_BYTES,
    source_snapshot_interval: SourceSnapshotIntervalOption = None,
    checkpoint_storage: CheckpointStorageOption = "",
    s3_endpoint_url: S3EndpointOption = "",
    concurrent_snapshots: Annotated[
        int,
        typer.Option(
            "--concurrent-snapshots",
            help="Concurrent snapshots, at most this many in flight (0: one after "
            "another; `kstream run --concurrent` passes its --max-in-flight).",
            callback=NON_NEGATIVE,
        ),
    ] = 0,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
    standby: Annotated[
        bool,
        typer.Option(
            "--standby",
            help="Read the job to load from stdin (a line of JSON), load it, then wait for "
            "a second line naming the worker index, the log file and the run configuration "
            "(how `kstream run` starts its workers and keeps a spare; no other option applies).",
        ),
    ] = False,
    metrics_port: MetricsPortOption = 0,
    metrics_address: MetricsAddressOption = "0.0.0.0",
    log_format: LogFormatOption = "text",
) -> None:
    """Run one worker of a job (started by `kstream run`, or by hand on another machine)."""
    from kstream.runtime.failure import CAUSE_DIR_ENV, guard_os_exit
    from kstream.runtime.parent import die_with_runner, runner_pid

    # First of all: a runner killed while this worker loads the job or waits for
    # Kafka must not leave it behind.
    die_with_runner(runner_pid())
    # Ctrl-C in a terminal reaches the workers too: from now on it asks for a clean
    # stop, so a KeyboardInterrupt in this process is always raised by code.
    stop = _stop_flag()
    cause_dir = os.environ.get(CAUSE_DIR_ENV)
    end = _WorkerEnd(Path(cause_dir) if cause_dir else None)
    # Before the job module loads: user code may call os._exit anywhere.
    guard_os_exit(end.report)
    try:
        _worker(
            end,
            stop,
            spec=spec,
            workers=workers,
            worker=worker,
            param=param,
            bootstrap_servers=bootstrap_servers,
            kafka_config=kafka_config,
            state_dir=state_dir,
            job_name=job_name,
            guarantee=guarantee,
            transaction_timeout=transaction_timeout,
            max_channel_lag=max_channel_lag,
            alignment=alignment,
            alignment_timeout=alignment_timeout,
            alignment_hold_bytes=alignment_hold_bytes,
            source_snapshot_interval=source_snapshot_interval,
            checkpoint_storage=checkpoint_storage,
            s3_endpoint_url=s3_endpoint_url,
            concurrent_snapshots=concurrent_snapshots,
            verbose=verbose,
            standby=standby,
            metrics_port=metrics_port,
            metrics_address=metrics_address,
            log_format=log_format,
        )
    except BaseException as exc:  # every end of a worker is reported
        end.died(exc)


class _WorkerEnd:
    """How a worker process ends: its cause reported, then an exit code of kstream's own.

    The cause goes to the log as one line and, when a runner spawned the process,
    to the runner (`kstream.runtime.failure`). The exit code is never what user
    code passed to ``sys.exit`` (that is reported as the failure it is): 2 for a
    `KStreamError`, as for every kstream command, else `EXIT_FATAL` for a failure
    a restart would meet again (a failed job, a user exit) and 1 for the rest.
    """

    def __init__(self, cause_dir: Path | None) -> None:
        self.cause_dir = cause_dir
        #: The log this process writes, once its runner named it.
        self.log = ""

    def report(self, failure: Failure) -> None:
        failure = dataclasses.replace(failure, log=self.log)
        error_line(failure.cause)
        sys.stderr.flush()  # before an os._exit
        if self.cause_dir is not None:
            from kstream.runtime.failure import write_cause

            try:
                write_cause(self.cause_dir, failure)
            except OSError as exc:
                # The exit code still tells the runner whether to restart.
                err.print(f"kstream: cannot report the cause to the runner: {exc}", markup=False)

    def died(self, exc: BaseException) -> NoReturn:
        from kstream.errors import JobFailedError, KStreamError
        from kstream.runtime.failure import EXIT_FATAL, classify

        if not isinstance(exc, KStreamError | SystemExit | KeyboardInterrupt):
            traceback.print_exc()  # not foreseen: the log keeps the whole story
        failure = classify(exc)
        self.report(failure)
        if isinstance(exc, KStreamError) and not isinstance(exc, JobFailedError):
            sys.exit(2)  # as every kstream command, for a worker started by hand
        sys.exit(EXIT_FATAL if failure.deterministic else 1)


def _worker(
    end: _WorkerEnd,
    stop: Callable[[], bool],
    *,
    spec: str | None,
    workers: int | None,
    worker: int | None,
    param: list[str] | None,
    bootstrap_servers: str | None,
    kafka_config: Path | None,
    state_dir: Path,
    job_name: str | None,
    guarantee: str,
    transaction_timeout: float,
    max_channel_lag: int,
    alignment: str,
    alignment_timeout: float | None,
    alignment_hold_bytes: int,
    source_snapshot_interval: float | None,
    checkpoint_storage: str,
    s3_endpoint_url: str,
    concurrent_snapshots: int,
    verbose: bool,
    standby: bool,
    metrics_port: int = 0,
    metrics_address: str = "0.0.0.0",
    log_format: str = "text",
) -> None:
    from kstream.runtime.worker.process import Worker

    # A worker's output is its log file, read after the fact: each line has its time.
    _logging(verbose, clock=True, log_format=log_format)
    if standby:
        told = _standby()
        if told is None:
            return  # the runner stopped (or died) before it needed this standby
        job, config, worker, end.log = told
        if end.log:
            # From now on the log file is rotated, with the process's output in it.
            rotating = RotatingLog(
                Path(end.log), config.log_max_bytes, config.log_backups, take_output=True
            )
            _logging(verbose, clock=True, log_format=config.log_format, handler=rotating)
    else:
        if spec is None or workers is None:
            raise ConfigurationError("a job and --workers are required (unless --standby)")
        parse_alignment(alignment, alignment_timeout)
        job, values = _load(spec, param, job_name)
        if worker is None:
            raise ConfigurationError("--worker is required (unless --standby)")
        # The same options give the same configuration as `kstream run`'s.
        config = run_config(
            spec=spec,
            params=values,
            name=job.name,
            bootstrap_servers=bootstrap_servers,
            kafka_config=kafka_config,
            workers=workers,
            state_dir=state_dir,
            say=say,
            max_in_flight=max(1, concurrent_snapshots),
            concurrent=concurrent_snapshots > 0,
            guarantee=guarantee,
            transaction_timeout=transaction_timeout,
            max_channel_lag=max_channel_lag,
            alignment=alignment,
            alignment_timeout=alignment_timeout,
            alignment_hold_bytes=alignment_hold_bytes,
            source_snapshot_interval=source_snapshot_interval,
            checkpoint_storage=checkpoint_storage,
            s3_endpoint_url=s3_endpoint_url,
            spawn=False,
        )
    workers = config.workers
    if not 0 <= worker < workers:
        raise ConfigurationError(f"--worker must be in 0..{workers - 1}, got {worker}")
    log_context.update(job=job.name, worker=f"w{worker}")
    _name_process(worker, workers, job.name, config.job.spec)
    port = worker_port(config, worker, spawned=standby, option=metrics_port)
    address = config.metrics_address if standby else metrics_address
    check_worker_port(port, address)
    process = Worker(config, worker, job)
    serve_worker(process.metrics.registry, port, address, worker)
    process.run(stop)


def _name_process(index: int, workers: int, job: str, spec: str) -> None:
    """Show in `ps` which worker this process is: every one starts as a standby, with
    the same command line (the index comes later, on stdin)."""
    from setproctitle import setproctitle

    setproctitle(f"kstream worker {index} of job {job} ({workers} workers, {spec})")


def _standby() -> tuple[Job, RunConfig, int, str] | None:
    """A standby's life before it is a worker: the job, then its index and settings.

    Line 1 of stdin names the job (`kstream.runtime.config.JobRef`), written as
    the process starts: the job loads while the runner still checks the
    cluster. Line 2, written once the runner needs this process, is
    ``{"index", "log", "config"}``: output goes to the log named from then on.
    The end of stdin before either line (the runner stopped, or died) is None:
    the process then ends quietly, it never touched Kafka or the state directory.
    """
    from kstream.infra.client_settings import use_settings
    from kstream.runtime.config import JobRef, RunConfig

    first = sys.stdin.buffer.readline().decode()
    if not first.strip():
        return None
    ref = JobRef.from_json(first)
    job, _ = _load(ref.spec, [f"{k}={v}" for k, v in ref.params.items()], ref.name or None)
    second = sys.stdin.buffer.readline().decode()
    if not second.strip():
        return None
    told = json.loads(second)
    index, log = told["index"], told["log"]
    if log:
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(fd, sys.stdout.fileno())
        os.dup2(fd, sys.stderr.fileno())
        os.close(fd)
    config = RunConfig.from_form(told["config"])
    if config.job != ref:
        raise ConfigurationError(f"worker {index}: told job {config.job}, loaded {ref}")
    if config.kafka_config is not None:
        use_settings(config.kafka_config)
    return job, config, int(index), str(log)


def _logging(
    verbose: bool,
    *,
    clock: bool = False,
    log_format: str = "text",
    handler: logging.Handler | None = None,
) -> None:
    log_lines(
        logging.DEBUG if verbose else logging.INFO,
        clock=clock,
        log_format=log_format,
        handler=handler,
    )


def _load(spec: str, params: list[str] | None, job_name: str | None) -> tuple[Job, dict[str, str]]:
    from kstream.tools.spec import load_job, parse_params

    values = parse_params(params or [])
    job = load_job(spec, values)
    if job_name is not None:
        job.rename(job_name)
    return job, values


def _stop_flag() -> Callable[[], bool]:
    """A flag set by SIGTERM or SIGINT, for a clean stop at the next loop round."""
    stopping = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return stopping.is_set
