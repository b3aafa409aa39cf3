"""`kstream demo smoke|wordcount|token-ring|bank`: the demonstrations of `kstream.tools.demo`
and of the seeds' examples (`kstream.tools.seeds`)."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kstream.errors import JobFailedError
from kstream.tools.cli.console import err, log_lines, out, say
from kstream.tools.cli.metrics import MetricsPortOption, serve_runner
from kstream.tools.cli.options import (
    AT_LEAST_ONE,
    NON_NEGATIVE,
    POSITIVE,
    AlignmentOption,
    BootstrapOption,
    GuaranteeOption,
    KafkaConfigOption,
    parse_alignment,
    parse_guarantee,
)
from kstream.tools.cli.ui import UiPortOption, serve_run_ui

if TYPE_CHECKING:
    from kstream.runtime.runner.runner import Runner

__all__ = ["demo_app"]

demo_app = typer.Typer(help="Self-contained demonstrations on the local broker.")


@demo_app.command("smoke")
def demo_smoke(
    records: Annotated[
        int, typer.Option(help="Records per transaction.", callback=AT_LEAST_ONE)
    ] = 1000,
    bootstrap_servers: Annotated[
        str | None, typer.Option(help="Kafka to use instead of the local broker.")
    ] = None,
    kafka_config: KafkaConfigOption = None,
) -> None:
    """Round-trip records through Kafka transactions: one committed, one aborted."""
    from kstream.tools.demo import smoke

    if not smoke(records, bootstrap_servers, say):
        raise JobFailedError("the transactional round trip did not read back what it committed")


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
    kafka_config: KafkaConfigOption = None,
    metrics_port: MetricsPortOption = 0,
    ui_port: UiPortOption = 0,
) -> None:
    """Run the word count on the local broker while killing workers; verify the counts.

    With --ui-port the job's dashboard is served on 127.0.0.1 while it runs and
    after, until Ctrl-C; with --metrics-port so are the Prometheus endpoints (the
    coordinator's until Ctrl-C too).
    """
    from kstream.tools.demo import wordcount_demo

    log_lines(logging.WARNING)
    chosen = parse_guarantee(guarantee)

    def serve(runner: Runner) -> None:
        serve_runner(runner.config, runner.metrics.registry, say)
        serve_run_ui(runner.config.bootstrap, runner.job.name, ui_port, "127.0.0.1",
                     runner.identity, say)  # fmt: skip

    outcome = wordcount_demo(
        lines=lines,
        workers=workers,
        kills=kill,
        bootstrap=bootstrap_servers,
        checkpoint_interval=checkpoint_interval,
        say=say,
        console=out,
        guarantee=chosen,
        metrics_port=metrics_port,
        on_runner=serve,
    )
    audited_clean = _demo_audit(outcome.input_topic, outcome.output_topic, outcome.bootstrap, audit)
    if ui_port or metrics_port:
        _stay_up(ui_port)
    if not outcome.check.state_exact:
        raise JobFailedError("word counts do not match the input")
    if chosen == "exactly-once" and not (outcome.check.output_exact and audited_clean):
        raise JobFailedError("exactly-once output has duplicates, gaps or disorder")


def _stay_up(ui_port: int) -> None:
    """Keep serving the finished demo's dashboard (and coordinator metrics) until Ctrl-C."""
    where = f"the dashboard at http://127.0.0.1:{ui_port}/" if ui_port else "the metrics"
    say(f"the job is done; {where} stays up: Ctrl-C to leave")
    try:
        threading.Event().wait()  # until Ctrl-C (KeyboardInterrupt) or SIGTERM
    except KeyboardInterrupt:
        return


_NO_SNAPSHOTS = (
    "no checkpoint completed during the run: give it more records or a shorter "
    "--checkpoint-interval"
)
#: A seeds' demo's checkpoint interval: short, so a run of seconds takes dozens.
SEED_INTERVAL_S = 0.25

InitiatorOption = Annotated[
    str,
    typer.Option(
        "--initiator",
        help="Who starts the snapshots (one every --checkpoint-interval): p, q, "
        "both (taking turns, each on its own seeded clock) or coordinator.",
    ),
]

#: The seeds' demos' shared options.
SeedKillOption = Annotated[
    int, typer.Option("--kill", help="Worker SIGKILLs mid-run.", callback=NON_NEGATIVE)
]
SeedIntervalOption = Annotated[float, typer.Option("--checkpoint-interval", callback=POSITIVE)]


@demo_app.command("token-ring")
def demo_token_ring(
    ticks: Annotated[
        int,
        typer.Option(
            "--ticks", help="Ticks of each process's clock (its source).", callback=AT_LEAST_ONE
        ),
    ] = 300,
    rate: Annotated[
        float, typer.Option("--rate", help="Ticks per second of each process.", callback=POSITIVE)
    ] = 25.0,
    alignment: AlignmentOption = "unaligned",
    naive: Annotated[
        bool,
        typer.Option(
            "--naive",
            help="No markers, no checkpoints: each process records its state and input "
            "channel on its own clock; the global states so composed may lose or double "
            "the token (--alignment, --initiator and --checkpoint-interval do not apply).",
        ),
    ] = False,
    kill: Annotated[
        int | None,
        typer.Option(
            "--kill",
            help="Worker SIGKILLs mid-run (default 1; 0 with --naive, which has nothing to "
            "recover from).",
            callback=NON_NEGATIVE,
        ),
    ] = None,
    seed: Annotated[
        int,
        typer.Option("--seed", help="Seed of the holding times and kills.", callback=NON_NEGATIVE),
    ] = 0,
    checkpoint_interval: SeedIntervalOption = SEED_INTERVAL_S,
    initiator: InitiatorOption = "both",
    concurrent: Annotated[
        bool,
        typer.Option(
            "--concurrent",
            help="Seed 004: p and q start snapshots independently, not by turns; "
            "overlapping ones both complete (unaligned only).",
        ),
    ] = False,
    bootstrap_servers: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
) -> None:
    """Seed 000: p and q pass one token over Kafka channels; every snapshot holds it once."""
    from kstream.tools.seeds.demos import Initiator
    from kstream.tools.seeds.tables import Verdict
    from kstream.tools.seeds.token_ring import token_ring_demo

    log_lines(logging.WARNING)
    outcome = token_ring_demo(
        ticks=ticks,
        rate=rate,
        alignment=parse_alignment(alignment, None),
        naive=naive,
        kills=kill if kill is not None else 0 if naive else 1,
        seed=seed,
        interval=checkpoint_interval,
        bootstrap=bootstrap_servers,
        say=say,
        console=out,
        initiator=Initiator.parse(initiator),
        concurrent=concurrent,
    )
    if not outcome.snapshots:
        raise JobFailedError(_NO_SNAPSHOTS)
    if not outcome.ok:
        # One rule for both schemes: exit 1 when a global snapshot does not hold the
        # token exactly once (the naive scheme's usual outcome, seed 000's point).
        failed = len(outcome.snapshots) - outcome.verdicts[Verdict.ONCE]
        raise JobFailedError(
            f"the naive scheme lost or doubled the token in {failed} of "
            f"{len(outcome.snapshots)} global states"
            if naive
            else "a snapshot lost or doubled the token"
        )


@demo_app.command("bank")
def demo_bank(
    transfers: Annotated[
        int,
        typer.Option("--transfers", help="Payments from each process.", callback=AT_LEAST_ONE),
    ] = 300,
    rate: Annotated[
        float, typer.Option("--rate", help="Payments per second from each.", callback=POSITIVE)
    ] = 25.0,
    alignment: AlignmentOption = "unaligned",
    kill: SeedKillOption = 1,
    seed: Annotated[
        int, typer.Option("--seed", help="Seed of the payments and kills.", callback=NON_NEGATIVE)
    ] = 0,
    checkpoint_interval: SeedIntervalOption = SEED_INTERVAL_S,
    initiator: InitiatorOption = "both",
    bootstrap_servers: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
) -> None:
    """Seed 001: P1 and P2 transfer money over Kafka channels; every snapshot's total holds."""
    from kstream.tools.seeds.bank import bank_demo
    from kstream.tools.seeds.demos import Initiator

    log_lines(logging.WARNING)
    outcome = bank_demo(
        transfers=transfers,
        rate=rate,
        alignment=parse_alignment(alignment, None),
        kills=kill,
        seed=seed,
        interval=checkpoint_interval,
        bootstrap=bootstrap_servers,
        say=say,
        console=out,
        initiator=Initiator.parse(initiator),
    )
    if not outcome.snapshots:
        raise JobFailedError(_NO_SNAPSHOTS)
    if not outcome.ok:
        raise JobFailedError("a snapshot's total differs from the opening total")


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
        say(f"Spark audit skipped: {exc}")
        return True
    say("auditing the output with Spark (read_committed, running-count check)")
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
