"""The `kstream` command line.

Built with Typer (typed options, generated help) and Rich (progress, tables).
Every `KStreamError` becomes one line on stderr and exit code 2; a failed job
or a failed verification exits 1.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from kstream.errors import ConfigurationError, JobFailedError, KStreamError
from kstream.infra.broker import DEFAULT_PORT, LocalBroker
from kstream.tools.options import AT_LEAST_ONE, NON_NEGATIVE, PORT, POSITIVE

if TYPE_CHECKING:
    from kstream.dataflow.job import Job
    from kstream.runtime.sink import Guarantee

__all__ = ["app", "main"]

app = typer.Typer(
    name="kstream",
    help="Exactly-once stream processing for Python on Apache Kafka.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
broker_app = typer.Typer(help="Run a local single-node Kafka broker (KRaft) from Maven Central.")
demo_app = typer.Typer(help="Self-contained demonstrations on the local broker.")
app.add_typer(broker_app, name="broker")
app.add_typer(demo_app, name="demo")

err = Console(stderr=True, soft_wrap=True)
out = Console()

PortOption = Annotated[
    int,
    typer.Option(
        "--port",
        envvar="KSTREAM_BROKER_PORT",
        help="Listener port (the controller uses port+1).",
        callback=PORT,
    ),
]


def _say(message: str) -> None:
    # Messages quote topics ("t[0]@5") and user errors: print them as they are, not as markup.
    err.print(f"[dim]kstream:[/dim] {escape(message)}", highlight=False)


@broker_app.command("start")
def broker_start(port: PortOption = DEFAULT_PORT) -> None:
    """Start the broker unless it runs; the last line printed is its bootstrap address."""
    info = LocalBroker(port).start(_say)
    print(info.bootstrap)


@broker_app.command("stop")
def broker_stop(port: PortOption = DEFAULT_PORT) -> None:
    """Stop the broker and wait until its JVM is gone."""
    if not LocalBroker(port).stop(_say):
        _say(f"no broker running on port {port}")


@broker_app.command("status")
def broker_status(port: PortOption = DEFAULT_PORT) -> None:
    """Say whether the broker runs; exit 0 if it does, 1 if not."""
    info = LocalBroker(port).status()
    if info.running:
        print(f"running pid={info.pid} bootstrap={info.bootstrap} dir={info.directory}")
    else:
        print(f"stopped bootstrap={info.bootstrap} dir={info.directory}")
        raise typer.Exit(1)


@demo_app.command("smoke")
def demo_smoke(
    records: Annotated[
        int, typer.Option(help="Records per transaction.", callback=AT_LEAST_ONE)
    ] = 1000,
    bootstrap_servers: Annotated[
        str | None, typer.Option(help="Kafka to use instead of the local broker.")
    ] = None,
) -> None:
    """Round-trip records through Kafka transactions: one committed, one aborted."""
    from kstream.tools.demo import smoke

    if not smoke(records, bootstrap_servers, _say):
        raise JobFailedError("the transactional round trip did not read back what it committed")


ParamsOption = Annotated[
    list[str] | None,
    typer.Option("-p", "--param", help="Job parameter KEY=VALUE (repeatable)."),
]
BootstrapOption = Annotated[
    str | None,
    typer.Option(
        "--bootstrap-servers", help="Kafka cluster; default: KSTREAM_BOOTSTRAP or the local broker."
    ),
]
StateDirOption = Annotated[
    Path, typer.Option("--state-dir", help="Local state and checkpoint storage.")
]
JobNameOption = Annotated[
    str | None, typer.Option("--job-name", help="Name of the job (scopes topics and state).")
]


GuaranteeOption = Annotated[
    str,
    typer.Option(
        "--guarantee", help="Output guarantee: exactly-once, at-least-once or at-most-once."
    ),
]


def _guarantee(value: str) -> Guarantee:
    from kstream.runtime.sink import GUARANTEES

    for g in GUARANTEES:
        if value == g:
            return g
    raise ConfigurationError(f"--guarantee must be one of {', '.join(GUARANTEES)}, got {value!r}")


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


@app.command("run")
def run_command(
    spec: Annotated[str, typer.Argument(help="Job: module:attribute or path.py:attribute.")],
    param: ParamsOption = None,
    bootstrap_servers: BootstrapOption = None,
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
    max_in_flight: Annotated[
        int,
        typer.Option("--max-in-flight", help="Checkpoints pending at once.", callback=AT_LEAST_ONE),
    ] = 1,
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
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
) -> None:
    """Run a job on worker processes until SIGTERM or Ctrl-C; recover from worker deaths."""
    from kstream.infra.cluster import bootstrap_servers as resolve
    from kstream.protocol.coordinator import CoordinatorConfig
    from kstream.runtime.runner import Runner

    _logging(verbose)
    if fresh and accept_changes:
        raise ConfigurationError("--fresh and --accept-changes exclude each other")
    job, values = _load(spec, param, job_name)
    runner = Runner(
        job,
        spec=spec,
        params=values,
        bootstrap=resolve(bootstrap_servers, _say),
        workers=workers,
        state_dir=state_dir,
        config=CoordinatorConfig(
            interval=checkpoint_interval,
            timeout=checkpoint_timeout,
            max_in_flight=max_in_flight,
            retained=retained,
        ),
        spawn=spawn,
        say=_say,
        guarantee=_guarantee(guarantee),
        transaction_timeout_s=transaction_timeout,
        fresh=fresh,
        accept_changes=accept_changes,
    )
    stop = _stop_flag()
    runner.prepare()
    runner.start()
    _say(
        f"job {job.name}: {len(runner.plan.tasks)} subtasks on {workers} workers; "
        f"worker logs in {runner.log_path(0).parent}"
    )
    last = None
    try:
        while not stop():
            runner.step()
            if runner.stats.latest != last and runner.stats.latest is not None:
                last = runner.stats.latest
                if verbose or last % 10 == 0:
                    _say(
                        f"checkpoint {last} complete in {runner.stats.last_duration_s:.2f}s "
                        f"(alignment {runner.stats.last_alignment_ms:.1f} ms)"
                    )
    finally:
        runner.stop()
        for line in runner.report.summary(time.monotonic()):
            _say(line)


@app.command("worker")
def worker_command(
    spec: Annotated[str, typer.Argument(help="Job: module:attribute or path.py:attribute.")],
    worker: Annotated[
        int, typer.Option("--worker", help="This worker's index.", callback=NON_NEGATIVE)
    ],
    workers: Annotated[
        int,
        typer.Option("--workers", help="Number of workers in the job.", callback=AT_LEAST_ONE),
    ],
    param: ParamsOption = None,
    bootstrap_servers: BootstrapOption = None,
    state_dir: StateDirOption = Path("state"),
    job_name: JobNameOption = None,
    guarantee: GuaranteeOption = "exactly-once",
    transaction_timeout: Annotated[
        float, typer.Option("--transaction-timeout", callback=POSITIVE)
    ] = 600.0,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
) -> None:
    """Run one worker of a job (started by `kstream run`, or by hand on another machine)."""
    from kstream.infra.cluster import bootstrap_servers as resolve
    from kstream.runtime.worker import EXIT_JOB_FAILED, Worker

    _logging(verbose)
    job, _ = _load(spec, param, job_name)
    if not 0 <= worker < workers:
        raise ConfigurationError(f"--worker must be in 0..{workers - 1}, got {worker}")
    stop = _stop_flag()
    w = Worker(
        job,
        index=worker,
        workers=workers,
        bootstrap=resolve(bootstrap_servers, _say),
        state_dir=state_dir.resolve(),
        guarantee=_guarantee(guarantee),
        transaction_timeout_ms=int(transaction_timeout * 1000),
    )
    try:
        w.run(stop)
    except JobFailedError as exc:
        err.print(f"kstream: job failed: {exc}", highlight=False, markup=False)
        sys.exit(EXIT_JOB_FAILED)


@app.command("checkpoints")
def checkpoints_command(
    job_name: Annotated[str, typer.Option("--job-name", help="The job to list.")],
    bootstrap_servers: BootstrapOption = None,
) -> None:
    """List a job's checkpoints: id, status, trigger time, duration, alignment, size."""
    from rich.table import Table

    from kstream.infra.admin import Admin
    from kstream.infra.cluster import bootstrap_servers as resolve
    from kstream.protocol.checkpoint_history import checkpoint_history
    from kstream.runtime.control import read_messages

    bootstrap = resolve(bootstrap_servers, _say)
    Admin(bootstrap).check_reachable()
    history = read_messages(bootstrap, job_name)
    if not history:
        raise ConfigurationError(f"job {job_name!r} has no control topic: it never ran here")
    table = Table(title=f"checkpoints of {job_name}")
    for col in ("id", "gen", "status", "triggered", "duration s", "alignment ms", "size"):
        table.add_column(col)
    for r in checkpoint_history(history):
        t = r.triggered_at
        table.add_row(
            str(r.checkpoint),
            "" if r.generation is None else str(r.generation),
            escape(r.label),
            "" if t is None else time.strftime("%H:%M:%S", time.localtime(t)),
            "" if r.duration_s is None else f"{r.duration_s:.3f}",
            "" if r.alignment_ms is None else f"{r.alignment_ms:.1f}",
            _size(r.size),
        )
    out.print(table)


def _size(value: object) -> str:
    if not isinstance(value, int):
        return ""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value} {unit}"
        value //= 1024
    return f"{value} TiB"


def _stop_flag() -> Callable[[], bool]:
    """A flag set by SIGTERM or SIGINT, for a clean stop at the next loop round."""
    stopping = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return stopping.is_set


# Commands defined in their own modules register here, one line each.
from kstream.audit.cli import audit_command  # noqa: E402

app.command("audit")(audit_command)


@demo_app.command("wordcount")
def demo_wordcount(
    lines: Annotated[
        int, typer.Option("--lines", help="Input lines to generate.", callback=AT_LEAST_ONE)
    ] = 50_000,
    workers: Annotated[
        int, typer.Option("--workers", help="Worker processes.", callback=AT_LEAST_ONE)
    ] = 3,
    kill: Annotated[
        int, typer.Option("--kill", help="Random worker SIGKILLs.", callback=NON_NEGATIVE)
    ] = 2,
    checkpoint_interval: Annotated[
        float, typer.Option("--checkpoint-interval", callback=POSITIVE)
    ] = 1.0,
    guarantee: GuaranteeOption = "exactly-once",
    audit: Annotated[
        bool,
        typer.Option(
            "--audit/--no-audit",
            help="Finish with the Spark audit of the output (needs the audit extra of kstream).",
        ),
    ] = True,
    bootstrap_servers: BootstrapOption = None,
) -> None:
    """Run the word count on the local broker while killing workers; verify the counts."""
    from kstream.tools.demo import wordcount_demo

    logging.basicConfig(level=logging.WARNING)
    chosen = _guarantee(guarantee)
    outcome = wordcount_demo(
        lines=lines,
        workers=workers,
        kills=kill,
        bootstrap=bootstrap_servers,
        checkpoint_interval=checkpoint_interval,
        say=_say,
        console=out,
        guarantee=chosen,
    )
    audited_clean = _demo_audit(outcome.input_topic, outcome.output_topic, outcome.bootstrap, audit)
    if not outcome.check.state_exact:
        raise JobFailedError("word counts do not match the input")
    if chosen == "exactly-once" and not (outcome.check.output_exact and audited_clean):
        raise JobFailedError("exactly-once output has duplicates, gaps or disorder")


def _demo_audit(input_topic: str, output_topic: str, bootstrap: str, wanted: bool) -> bool:
    """Audit the demo's output with Spark; True when clean or not run."""
    if not wanted:
        return True
    from kstream.audit.jars import require_pyspark
    from kstream.audit.run import run_audit
    from kstream.errors import EnvironmentSetupError

    try:
        require_pyspark()
    except EnvironmentSetupError as exc:
        _say(f"Spark audit skipped: {exc}")
        return True
    _say("auditing the output with Spark (read_committed, running-count check)")
    result = run_audit(
        input_topic=input_topic,
        output_topic=output_topic,
        bootstrap=bootstrap,
        report_dir=Path("audit-reports") / output_topic,
        progress=err.is_terminal,
    )
    verdict = "clean" if result.clean else "VIOLATIONS"
    out.print(
        f"audit {verdict}: {result.output_records:,} outputs, {result.expected_outputs:,} "
        f"expected; duplicates={result.duplicates} lost={result.lost} "
        f"unexpected={result.unexpected} out_of_order={result.out_of_order} "
        f"({result.seconds:.0f} s)",
        highlight=False,
    )
    out.print(f"audit report: {result.report_html}", highlight=False)
    return result.clean


def main() -> None:
    """Entry point of the `kstream` console script."""
    try:
        app()
    except JobFailedError as exc:
        err.print(f"kstream: failed: {exc}", highlight=False, markup=False)
        sys.exit(1)
    except KStreamError as exc:
        err.print(f"kstream: error: {exc}", highlight=False, markup=False)
        sys.exit(2)
    except KeyboardInterrupt:
        err.print("kstream: interrupted", highlight=False)
        sys.exit(130)
