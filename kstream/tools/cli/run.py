"""`kstream run` and `kstream worker`: a job's runner and one of its workers.

`kstream run` supervises worker processes it spawns as ``python -m kstream
worker ...`` (or coordinates workers started elsewhere with ``--no-spawn``);
both commands load the job the same way and stop cleanly on SIGTERM or Ctrl-C.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kstream.errors import ConfigurationError, JobFailedError
from kstream.protocol.flow import DEFAULT_MAX_LAG
from kstream.tools.cli.console import err, say
from kstream.tools.cli.options import (
    AT_LEAST_ONE,
    NON_NEGATIVE,
    POSITIVE,
    AlignmentOption,
    AlignmentTimeoutOption,
    BootstrapOption,
    GuaranteeOption,
    JobNameOption,
    KafkaConfigOption,
    ParamsOption,
    SourceSnapshotIntervalOption,
    SpecArgument,
    StateDirOption,
    parse_alignment,
    parse_guarantee,
)

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

__all__ = ["run_command", "worker_command"]


def run_command(
    spec: SpecArgument,
    param: ParamsOption = None,
    bootstrap_servers: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
    workers: Annotated[
        int, typer.Option("--workers", help="Worker processes.", callback=AT_LEAST_ONE)
    ] = 2,
    checkpoint_interval: Annotated[
        float,
        typer.Option(
            "--checkpoint-interval", help="Seconds between checkpoints.", callback=POSITIVE
        ),
    ] = 1.0,
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
    source_snapshot_interval: SourceSnapshotIntervalOption = None,
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
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
) -> None:
    """Run a job on worker processes until SIGTERM or Ctrl-C; recover from worker deaths."""
    from kstream.infra.cluster import bootstrap_servers as resolve
    from kstream.protocol.coordinator import CoordinatorConfig
    from kstream.runtime.runner import Runner

    _logging(verbose)
    if fresh and accept_changes:
        raise ConfigurationError("--fresh and --accept-changes exclude each other")
    mode = parse_alignment(alignment, alignment_timeout)
    job, values = _load(spec, param, job_name)
    runner = Runner(
        job,
        spec=spec,
        params=values,
        bootstrap=resolve(bootstrap_servers, say),
        workers=workers,
        state_dir=state_dir,
        config=CoordinatorConfig(
            interval=checkpoint_interval,
            timeout=checkpoint_timeout,
            max_in_flight=max_in_flight,
            retained=retained,
            liveness_timeout=liveness_timeout,
            tolerable_timeouts=tolerable_checkpoint_timeouts,
            concurrent=concurrent,
        ),
        spawn=spawn,
        say=say,
        guarantee=parse_guarantee(guarantee),
        transaction_timeout_s=transaction_timeout,
        max_channel_lag=max_channel_lag,
        alignment=mode,
        alignment_timeout_s=alignment_timeout,
        source_snapshot_interval_s=source_snapshot_interval,
        fresh=fresh,
        accept_changes=accept_changes,
        create_topics=create_topics,
    )
    stop = _stop_flag()
    runner.prepare()
    runner.start()
    say(
        f"job {job.name}: {len(runner.plan.tasks)} subtasks on {workers} workers; "
        f"worker logs in {runner.log_path(0).parent}"
    )
    last = None
    try:
        while not stop():
            runner.step()
            if runner.stats.latest != last and runner.stats.latest is not None:
                last = runner.stats.latest
                # Every tenth by count: ids are Lamport clocks, not 1, 2, 3, ...
                if verbose or runner.stats.completed % 10 == 0:
                    say(
                        f"checkpoint {last} complete in {runner.stats.last_duration_s:.2f}s "
                        f"(alignment {runner.stats.last_alignment_ms:.1f} ms)"
                    )
    finally:
        runner.stop()
        for line in runner.report.summary(time.monotonic()):
            say(line)


def worker_command(
    spec: SpecArgument,
    workers: Annotated[
        int,
        typer.Option("--workers", help="Number of workers in the job.", callback=AT_LEAST_ONE),
    ],
    worker: Annotated[
        int | None,
        typer.Option(
            "--worker",
            help="This worker's index (required without --standby).",
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
    source_snapshot_interval: SourceSnapshotIntervalOption = None,
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
            help="Load the job, then wait for a line on stdin naming the worker index and "
            "the log file (how `kstream run` starts its workers and keeps a spare).",
        ),
    ] = False,
) -> None:
    """Run one worker of a job (started by `kstream run`, or by hand on another machine)."""
    from kstream.runtime.parent import die_with_runner, runner_pid

    # First of all: a runner killed while this worker loads the job or waits for
    # Kafka must not leave it behind.
    die_with_runner(runner_pid())
    from kstream.infra.cluster import bootstrap_servers as resolve
    from kstream.protocol.flow import FlowConfig
    from kstream.runtime.worker import EXIT_JOB_FAILED, Worker

    _logging(verbose)
    mode = parse_alignment(alignment, alignment_timeout)
    job, _ = _load(spec, param, job_name)
    if standby:
        worker = _await_index()
    if worker is None:
        raise ConfigurationError("--worker is required (unless --standby)")
    if not 0 <= worker < workers:
        raise ConfigurationError(f"--worker must be in 0..{workers - 1}, got {worker}")
    stop = _stop_flag()
    w = Worker(
        job,
        index=worker,
        workers=workers,
        bootstrap=resolve(bootstrap_servers, say),
        state_dir=state_dir.resolve(),
        guarantee=parse_guarantee(guarantee),
        transaction_timeout_ms=int(transaction_timeout * 1000),
        flow=FlowConfig(max_lag=max_channel_lag),
        alignment=mode,
        alignment_timeout_s=alignment_timeout,
        source_snapshot_interval_s=source_snapshot_interval,
        concurrent=concurrent_snapshots,
    )
    try:
        w.run(stop)
    except JobFailedError as exc:
        err.print(f"kstream: job failed: {exc}", highlight=False, markup=False)
        sys.exit(EXIT_JOB_FAILED)


def _await_index() -> int:
    """A standby's wait: the worker index its runner names, output sent to the log named.

    The end of stdin without a line (the runner stopped, or died) ends the
    process quietly: it never touched Kafka or the state directory.
    """
    line = sys.stdin.buffer.readline().decode().strip()
    index, _, log = line.partition(" ")
    if not index.isdecimal():
        raise SystemExit(0)
    if log:
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(fd, sys.stdout.fileno())
        os.dup2(fd, sys.stderr.fileno())
        os.close(fd)
    return int(index)


def _logging(verbose: bool) -> None:
    from rich.logging import RichHandler

    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(message)s",
        handlers=[RichHandler(console=err, show_path=False, rich_tracebacks=False)],
    )


def _load(spec: str, params: list[str] | None, job_name: str | None) -> tuple[Job, dict[str, str]]:
    from kstream.tools.spec import load_job, parse_params

    values = parse_params(params or [])
    job = load_job(spec, values)
    if job_name:
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
