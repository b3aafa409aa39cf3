"""`kstream state read`: an operator's state in a savepoint or checkpoint, read with Spark.

The work is `kstream.tools.state.read_state`; this module parses the command
line, checks the location and the operator before Spark starts (so bad input
costs no JVM), and writes the DataFrame (Parquet or JSON Lines, by Spark's
writers, one file per task) or prints it as JSON Lines.
"""

from __future__ import annotations

import enum
import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kstream.tools.cli.console import say
from kstream.tools.cli.options import AT_LEAST_ONE, SparkMasterOption

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["state_app"]

#: The S3 endpoint of the s3:// locations read or written (not `S3EndpointOption`,
#: which is about checkpoint storage and takes its default from the run's config).
_S3UrlEndpointOption = Annotated[
    str, typer.Option("--s3-endpoint-url", envvar="AWS_ENDPOINT_URL", help="For s3:// URLs.")
]

state_app = typer.Typer(
    help="Read, bootstrap and transform the keyed state of savepoints with Spark."
)


class OutputFormat(enum.Enum):
    PARQUET = "parquet"
    JSON = "json"


class Kind(enum.Enum):
    VALUE = "value"
    MAP = "map"
    LIST = "list"
    TIMER = "timer"
    WINDOW = "window"


#: Which kind of state a bootstrap or transform writes.
_WrittenKindOption = Annotated[
    Kind, typer.Option("--kind", help="Which kind of state: value, map or list.")
]
#: A named state of the operator (``ctx.map("seen")``: ``--state seen``).
_StateNameOption = Annotated[
    str | None,
    typer.Option("--state", help="A named state of the operator (default: its value state)."),
]


@state_app.command("read")
def state_read(
    location: Annotated[
        str,
        typer.Argument(
            help="A savepoint (directory, file:// or s3:// URL) or a checkpoint (.../chk-<n>)."
        ),
    ],
    operator: Annotated[
        str,
        typer.Option("--operator", help="The operator's uid (s<stage>.<uid> for a checkpoint)."),
    ],
    kind: Annotated[Kind, typer.Option("--kind", help="Which kind of state to read.")] = Kind.VALUE,
    name: _StateNameOption = None,
    value_type: Annotated[
        str,
        typer.Option(
            "--value-type",
            help="Spark type of the value column (DDL, e.g. bigint); json: JSON text.",
        ),
    ] = "json",
    output: Annotated[
        Path | None,
        typer.Option("--output", help="Write here (a directory of Spark's) instead of stdout."),
    ] = None,
    fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.PARQUET,
    master: SparkMasterOption = "local[*]",
    s3_endpoint_url: _S3UrlEndpointOption = "",
) -> None:
    """One row per key and state entry of an operator, read in parallel by Spark."""
    from kstream.audit.spark import spark_session
    from kstream.errors import ConfigurationError
    from kstream.infra.spark_cluster import check_master
    from kstream.tools.state import read_state
    from kstream.tools.state.snapshot import locate

    if output is not None and output.exists():
        raise ConfigurationError(f"--output {output} exists: name a new directory")
    located = locate(location, operator, s3_endpoint_url=s3_endpoint_url)
    check_master(master)
    log = Path(tempfile.gettempdir()) / "kstream-state-spark.log"
    with spark_session(master, [], log, app_name="kstream-state") as spark:
        df = read_state(
            spark, location, operator, kind=kind.value, name=name, value_type=value_type,
            s3_endpoint_url=s3_endpoint_url,
        )  # fmt: skip
        if output is None:
            for row in df.toLocalIterator():
                print(json.dumps(row.asDict(), default=str))
            return
        writer = df.write.mode("errorifexists")
        if fmt is OutputFormat.PARQUET:
            writer.parquet(str(output))
        else:
            writer.json(str(output))
    say(f"{located.op} of {located.url}: {len(located.tasks)} snapshots read into {output}")


@state_app.command("bootstrap")
def state_bootstrap(
    source: Annotated[
        str,
        typer.Option(
            "--from", help="A table name, or a path or URL Spark reads with --input-format."
        ),
    ],
    spec: Annotated[
        str, typer.Option("--job", help="The job it is for: module:attr or file.py:attr.")
    ],
    operator: Annotated[str, typer.Option("--operator", help="The keyed operator's uid.")],
    out: Annotated[str, typer.Option("--out", help="The savepoint to write (a new location).")],
    key: Annotated[str, typer.Option("--key", help="The column of keys.")] = "key",
    value: Annotated[str, typer.Option("--value", help="The column of values.")] = "value",
    kind: _WrittenKindOption = Kind.VALUE,
    name: _StateNameOption = None,
    entry: Annotated[
        str, typer.Option("--entry", help="The column of map entries (--kind map).")
    ] = "entry",
    index: Annotated[
        str, typer.Option("--index", help="The column of list indexes (--kind list).")
    ] = "index",
    json_values: Annotated[
        bool,
        typer.Option("--json-values", help="The value column is JSON text (state read's)."),
    ] = False,
    param: Annotated[
        list[str] | None, typer.Option("--param", "-p", help="Job parameter KEY=VALUE.")
    ] = None,
    workers: Annotated[
        int,
        typer.Option(
            "--workers",
            help="The parallelism the savepoint is laid out for.",
            callback=AT_LEAST_ONE,
        ),
    ] = 1,
    input_format: Annotated[
        str, typer.Option("--input-format", help="Spark's reader for a path: parquet, json, csv…")
    ] = "parquet",
    master: SparkMasterOption = "local[*]",
    s3_endpoint_url: _S3UrlEndpointOption = "",
) -> None:
    """Write a savepoint whose operator state holds a table's rows: (key, value) for
    value state, (key, entry, value) for a map, (key, index, value) for a list."""
    from kstream.audit.spark import spark_session
    from kstream.infra.spark_cluster import check_master
    from kstream.tools.spec import load_job, parse_params
    from kstream.tools.state.bootstrap import bootstrap_state

    params = parse_params(param or [])
    load_job(spec, params)  # a bad spec: one line before Spark starts
    check_master(master)
    log = Path(tempfile.gettempdir()) / "kstream-state-spark.log"
    with spark_session(master, [], log, app_name="kstream-state") as spark:
        is_path = "://" in source or "/" in source or Path(source).exists()
        df = spark.read.format(input_format).load(source) if is_path else spark.table(source)
        result = bootstrap_state(
            df, spec, operator, key=key, value=value, out=out, kind=kind.value, state=name,
            entry=entry, index=index, json_values=json_values, params=params, workers=workers,
            s3_endpoint_url=s3_endpoint_url,
        )  # fmt: skip
    say(f"{result.op}: {sum(result.keys.values())} keys in {len(result.keys)} subtasks")
    print(result.url)


@state_app.command("transform")
def state_transform(
    location: Annotated[str, typer.Argument(help="The savepoint to transform (not changed).")],
    operator: Annotated[str, typer.Option("--operator", help="The keyed operator's uid.")],
    sql: Annotated[
        str,
        typer.Option(
            "--sql",
            help="A Spark SQL query over the view `state` (state read's columns) giving "
            "columns key and value (and entry for a map, index for a list).",
        ),
    ],
    out: Annotated[str, typer.Option("--out", help="The savepoint to write (a new location).")],
    kind: _WrittenKindOption = Kind.VALUE,
    name: _StateNameOption = None,
    value_type: Annotated[
        str,
        typer.Option(
            "--value-type",
            help="Spark type of the value column (DDL, e.g. bigint); json: JSON text.",
        ),
    ] = "json",
    master: SparkMasterOption = "local[*]",
    s3_endpoint_url: _S3UrlEndpointOption = "",
) -> None:
    """Write a new savepoint: one state of an operator transformed by a SQL query,
    its other states kept; the job resumes from it where the original stopped."""
    from kstream.audit.spark import spark_session
    from kstream.infra.spark_cluster import check_master
    from kstream.tools.state.bootstrap import check_kind
    from kstream.tools.state.snapshot import locate
    from kstream.tools.state.transform import transform_state

    check_kind(kind.value, name, "transform")  # one line before Spark
    locate(location, operator, s3_endpoint_url=s3_endpoint_url)
    check_master(master)
    log = Path(tempfile.gettempdir()) / "kstream-state-spark.log"
    with spark_session(master, [], log, app_name="kstream-state") as spark:

        def query(state: DataFrame) -> DataFrame:
            state.createOrReplaceTempView("state")
            return spark.sql(sql)

        result = transform_state(
            spark, location, operator, query, out, kind=kind.value, name=name,
            value_type=value_type, s3_endpoint_url=s3_endpoint_url,
        )  # fmt: skip
    say(f"{result.op}: {sum(result.keys.values())} keys in {len(result.keys)} subtasks")
    print(result.url)
