"""`kstream chaos`: a seeded fault campaign against a job on a broker the campaign creates.

The campaign itself is `kstream.tools.chaos`; this module parses the options,
prints the fault log as it happens and the summary, and writes the report.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kstream.errors import ConfigurationError
from kstream.tools.cli.console import out, say
from kstream.tools.cli.options import (
    AT_LEAST_ONE,
    NON_NEGATIVE,
    PORT,
    POSITIVE,
    GuaranteeOption,
    parse_guarantee,
)

__all__ = ["chaos_command"]


def chaos_command(
    duration: Annotated[
        float,
        typer.Option(
            "--duration", help="Seconds of faults (then the job drains).", callback=POSITIVE
        ),
    ] = 300.0,
    seed: Annotated[
        int,
        typer.Option(
            "--seed", help="Repeats a campaign's schedule and input.", callback=NON_NEGATIVE
        ),
    ] = 0,
    rate: Annotated[
        float, typer.Option("--rate", help="Input lines per second.", callback=POSITIVE)
    ] = 100.0,
    mean_gap: Annotated[
        float,
        typer.Option("--mean-gap", help="Mean seconds between faults.", callback=POSITIVE),
    ] = 15.0,
    kinds: Annotated[
        str,
        typer.Option(
            "--kinds",
            help="Fault kinds: all, or some of worker-kill, fault-point, worker-stop, "
            "runner-kill, broker-kill, broker-pause, broker-bounce, and postgres-restart "
            "with --workload postgres.",
        ),
    ] = "all",
    workload: Annotated[
        str,
        typer.Option(
            "--workload",
            help="The job under test: wordcount, windowed, or the word count into a table: "
            "postgres, delta, iceberg.",
        ),
    ] = "wordcount",
    postgres: Annotated[
        str,
        typer.Option(
            "--postgres",
            help="--workload postgres: the server's URL (postgres-restart needs a "
            "`kstream postgres start` server on 127.0.0.1).",
        ),
    ] = "postgresql://postgres@127.0.0.1:25432/postgres",
    table: Annotated[
        str,
        typer.Option(
            "--table",
            help="Sink workloads: postgres, a new table's name (default chaos_s<seed>_<hex>); "
            "delta, a new table's directory (default OUT/delta-table); iceberg, a new "
            "directory for catalog and warehouse (default OUT/iceberg).",
        ),
    ] = "",
    workers: Annotated[
        int, typer.Option("--workers", help="Worker processes.", callback=AT_LEAST_ONE)
    ] = 3,
    checkpoint_interval: Annotated[
        float,
        typer.Option(
            "--checkpoint-interval", help="Seconds between checkpoints.", callback=POSITIVE
        ),
    ] = 1.0,
    guarantee: GuaranteeOption = "exactly-once",
    port: Annotated[
        int,
        typer.Option(
            "--port",
            # Not KSTREAM_BROKER_PORT: that is the user's broker, which a campaign would wipe.
            envvar="KSTREAM_CHAOS_BROKER_PORT",
            help="Port of the broker the campaign creates, kills and wipes (controller on "
            "port+1); refused if a setting names it, it answers, or its data is not a "
            "campaign's.",
            callback=PORT,
        ),
    ] = 23392,
    out_dir: Annotated[
        Path | None,
        typer.Option("--out", help="Report, logs and state; default chaos-runs/seed-<seed>."),
    ] = None,
) -> None:
    """Run a job while faults are injected at random; judge its output; write a report."""
    from kstream.tools.chaos.campaign import CampaignConfig, run_campaign
    from kstream.tools.chaos.report import summary_lines, write_report
    from kstream.tools.chaos.schedule import KINDS, parse_kinds
    from kstream.tools.chaos.tables import PostgresTable, sink_table
    from kstream.tools.chaos.workload import workload as find_workload

    job = find_workload(workload)
    out_path = (out_dir or Path("chaos-runs") / f"seed-{seed}").resolve()
    if table and not job.sink:
        raise ConfigurationError(f"--table is for the sink workloads; --workload is {workload}")
    target = (
        sink_table(job.sink, out_path, seed, postgres=postgres, table=table) if job.sink else None
    )
    available = (*KINDS, *job.fault_kinds)
    if isinstance(target, PostgresTable) and target.server is None:
        # Only a server kstream runs here can be stopped and started again.
        available = KINDS
        if kinds.strip() != "all" and "postgres-restart" in kinds:
            raise ConfigurationError(
                f"postgres-restart needs a `kstream postgres start` server on 127.0.0.1; "
                f"{postgres} is not one"
            )
        say(f"{postgres} is no `kstream postgres start` server here: no postgres-restart")
    config = CampaignConfig(
        workload=job,
        duration=duration,
        seed=seed,
        rate=rate,
        port=port,
        out=out_path,
        workers=workers,
        mean_gap=mean_gap,
        kinds=parse_kinds(kinds, available),
        checkpoint_interval=checkpoint_interval,
        guarantee=parse_guarantee(guarantee),
        table=target,
    )
    result = run_campaign(config, say)
    json_path, png = write_report(result)
    for line in summary_lines(result):
        out.print(line, highlight=False, markup=False)
    out.print(f"report: {json_path} and {png}", highlight=False, markup=False)
    if not result.passed:
        raise typer.Exit(1)
