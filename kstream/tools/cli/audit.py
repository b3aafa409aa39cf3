"""`kstream audit`: the command line of `kstream.audit.run_audit`.

Exit codes: 0 when the output is clean, 1 when any violation was found (the
verdict is printed, not an error), 2 for usage errors and for every
`KStreamError` (a missing topic, an unreachable cluster, pyspark not
installed), which `kstream.tools.cli.main` prints as one line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from kstream.audit.checks import Check
from kstream.errors import ConfigurationError
from kstream.tools.cli.options import KafkaConfigOption, SparkMasterOption

if TYPE_CHECKING:
    from kstream.audit.tables import TableAudit

__all__ = ["audit_command"]

_err = Console(stderr=True, soft_wrap=True)


def _say(message: str) -> None:
    _err.print(f"[dim]kstream:[/dim] {message}", highlight=False)


def audit_command(
    input_topic: Annotated[
        str, typer.Option("--input", help="Topic the job read (text lines for running-count).")
    ],
    output_topic: Annotated[
        str | None, typer.Option("--output", help="Topic the job wrote (or audit --table).")
    ] = None,
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
    master: SparkMasterOption = "local[*]",
    table: Annotated[
        str | None,
        typer.Option(
            "--table",
            help="Audit this table instead of an output topic: with --postgres, "
            "schema.table or table; with --delta, the Delta table's path or file:// URI; "
            "with --iceberg, namespace.table in the catalog of --catalog-uri.",
        ),
    ] = None,
    postgres: Annotated[
        str | None,
        typer.Option(
            "--postgres",
            help="The PostgreSQL database of --table: postgresql://user:password@host:port/db.",
        ),
    ] = None,
    delta: Annotated[
        bool,
        typer.Option("--delta", help="--table is a Delta table (a path or file:// URI)."),
    ] = False,
    iceberg: Annotated[
        bool,
        typer.Option(
            "--iceberg",
            help="--table is an Iceberg table (namespace.table) of the SQL catalog of "
            "--catalog-uri.",
        ),
    ] = False,
    catalog_uri: Annotated[
        str | None,
        typer.Option(
            "--catalog-uri",
            help="The Iceberg SQL catalog of --iceberg: its SQLAlchemy URL "
            "(sqlite:////path/catalog.db, postgresql+psycopg://…).",
        ),
    ] = None,
    warehouse: Annotated[
        str | None,
        typer.Option(
            "--warehouse",
            help="The Iceberg catalog's warehouse, as the sink was given it "
            "(optional: the catalog records each table's location).",
        ),
    ] = None,
    key: Annotated[
        str | None,
        typer.Option("--key", help="The table's key columns, comma-separated (e.g. word)."),
    ] = None,
    value: Annotated[
        str | None,
        typer.Option(
            "--value",
            help="The table's value columns, comma-separated (default: every other column).",
        ),
    ] = None,
    report_dir: Annotated[
        Path | None,
        typer.Option(
            "--report-dir",
            help="Where report.json, report.html and spark.log go "
            "(default: audit-reports/<output topic>).",
        ),
    ] = None,
) -> None:
    """Audit an output topic or a table for duplicates, losses and disorder with Spark."""
    from kstream.audit.run import run_audit
    from kstream.infra.cluster import bootstrap_servers as resolve_bootstrap

    kind = _TableKind(postgres, delta, iceberg, catalog_uri, warehouse)
    audited = _table(table, kind, key, value)
    if (output_topic is None) == (audited is None):
        raise ConfigurationError("audit either --output TOPIC or --table TABLE, exactly one")
    # The default report folder: the topic, the PostgreSQL or Iceberg table, or the
    # Delta table's directory name.
    name = output_topic or (Path(table or "").name if delta else table) or ""
    name = name.replace("/", "_")
    bootstrap = resolve_bootstrap(bootstrap_servers, _say)
    result = run_audit(
        input_topic=input_topic,
        output_topic=output_topic,
        table=audited,
        bootstrap=bootstrap,
        check=check.value,
        master=master,
        report_dir=report_dir or Path("audit-reports") / name,
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


def _columns(option: str, text: str | None) -> tuple[str, ...]:
    names = tuple(c.strip() for c in (text or "").split(","))
    if text is not None and not all(names):
        raise ConfigurationError(f"{option}: column names, comma-separated, none empty")
    return names if text is not None else ()


@dataclass(frozen=True, slots=True)
class _TableKind:
    """The options that say which kind of table `--table` is, and where it lives."""

    postgres: str | None
    delta: bool
    iceberg: bool
    catalog_uri: str | None
    warehouse: str | None

    def given(self) -> bool:
        return self.postgres is not None or self.delta or self.iceberg or self.catalog_given()

    def catalog_given(self) -> bool:
        return self.catalog_uri is not None or self.warehouse is not None


def _table(
    table: str | None, kind: _TableKind, key: str | None, value: str | None
) -> TableAudit | None:
    """The table `--table`, its kind's options, `--key` and `--value` name; None without
    --table.

    `--table` names the table in every kind; `--postgres URL`, the flag `--delta` or
    the flag `--iceberg` says which kind it is, so a Delta table needs no second
    location option; an Iceberg table's catalog is `--catalog-uri` (and `--warehouse`).
    """
    from kstream.audit.tables import (
        DeltaLakeTable,
        IcebergTable,
        PostgresTable,
        TableAudit,
        TableReader,
    )

    if table is None:
        if kind.given() or key is not None or value is not None:
            raise ConfigurationError(
                "--postgres, --delta, --iceberg, --catalog-uri, --warehouse, --key and "
                "--value go with --table"
            )
        return None
    if [kind.postgres is not None, kind.delta, kind.iceberg].count(True) != 1:
        raise ConfigurationError(
            "--table needs its kind, exactly one: --postgres postgresql://…, --delta or --iceberg"
        )
    if kind.iceberg and kind.catalog_uri is None:
        raise ConfigurationError("--iceberg needs the table's catalog: --catalog-uri URL")
    if not kind.iceberg and kind.catalog_given():
        raise ConfigurationError("--catalog-uri and --warehouse go with --iceberg")
    if key is None:
        raise ConfigurationError("--table needs its key columns: --key COL[,COL...]")
    reader: TableReader
    if kind.iceberg:
        assert kind.catalog_uri is not None
        catalog = {"type": "sql", "uri": kind.catalog_uri}
        if kind.warehouse is not None:
            catalog["warehouse"] = kind.warehouse
        reader = IcebergTable(catalog, table)
    elif kind.delta:
        reader = DeltaLakeTable(table)
    else:
        assert kind.postgres is not None
        reader = PostgresTable(kind.postgres, table)
    return TableAudit(reader, _columns("--key", key), _columns("--value", value))
