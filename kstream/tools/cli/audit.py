"""`kstream audit`: the command line of `kstream.audit.run_audit`.

Exit codes: 0 when the output is clean, 1 when any violation was found (the
verdict is printed, not an error), 2 for usage errors and for every
`KStreamError` (a missing topic, an unreachable cluster, pyspark not
installed), which `kstream.tools.cli.main` prints as one line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from kstream.audit.checks import Check
from kstream.tools.cli.options import KafkaConfigOption

__all__ = ["audit_command"]

_err = Console(stderr=True, soft_wrap=True)


def _say(message: str) -> None:
    _err.print(f"[dim]kstream:[/dim] {message}", highlight=False)


def audit_command(
    input_topic: Annotated[
        str, typer.Option("--input", help="Topic the job read (text lines for running-count).")
    ],
    output_topic: Annotated[str, typer.Option("--output", help="Topic the job wrote.")],
    check: Annotated[
        Check,
        typer.Option(
            "--check",
            help="running-count: each word's outputs are exactly 1..N; "
            "lineage: one output per input record, by the kstream.src.* headers; "
            "expected: the output holds exactly the records of --expected.",
        ),
    ] = Check.RUNNING_COUNT,
    expected: Annotated[
        Path | None,
        typer.Option(
            "--expected",
            help='The reference output for --check expected: JSON Lines, {"key": …, "value": …} '
            "per record (text or null).",
        ),
    ] = None,
    bootstrap_servers: Annotated[
        str | None,
        typer.Option(help="Kafka to audit instead of KSTREAM_BOOTSTRAP or the local broker."),
    ] = None,
    kafka_config: KafkaConfigOption = None,
    master: Annotated[
        str, typer.Option("--master", help="Spark master URL, e.g. local[2] or spark://host:7077.")
    ] = "local[*]",
    report_dir: Annotated[
        Path | None,
        typer.Option(
            "--report-dir",
            help="Where report.json, report.html and spark.log go "
            "(default: audit-reports/<output topic>).",
        ),
    ] = None,
) -> None:
    """Audit an output topic for duplicates, losses and disorder with a Spark batch job."""
    from kstream.audit.run import run_audit
    from kstream.infra.cluster import bootstrap_servers as resolve_bootstrap

    bootstrap = resolve_bootstrap(bootstrap_servers, _say)
    result = run_audit(
        input_topic=input_topic,
        output_topic=output_topic,
        bootstrap=bootstrap,
        check=check.value,
        master=master,
        report_dir=report_dir or Path("audit-reports") / output_topic,
        progress=_err.is_terminal,
        expected=expected,
    )
    figures = (
        f"{result.output_records} output records, {result.expected_outputs} expected: "
        f"duplicates={result.duplicates} lost={result.lost} unexpected={result.unexpected}"
        + ("" if result.out_of_order is None else f" out_of_order={result.out_of_order}")
    )
    verdict = "clean" if result.clean else "VIOLATIONS"
    print(f"{verdict} ({result.check.value}): {figures}")
    print(f"report: {result.report_html}")
    if not result.clean:
        raise typer.Exit(1)
