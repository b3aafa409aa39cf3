"""What the options of the command line accept, decided in one place.

The option types several commands share (``--port``, ``--bootstrap-servers``,
``--kafka-config``, ``--param``, ``--state-dir``, ``--job-name``, ``--guarantee``) are declared
here once, so every command spells, documents and checks them alike.

Typer parses ``nan``, ``inf`` and ``-1`` as valid floats, and a job started
with ``--checkpoint-interval nan`` only fails later, in every worker. Each
numeric option therefore names one of these checks as its callback, which
runs when the command line is parsed and raises `ConfigurationError` (one
line on stderr, exit 2) for a value outside its range::

    interval: Annotated[float, typer.Option("--checkpoint-interval", callback=POSITIVE)]
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from kstream.errors import ConfigurationError
from kstream.protocol.input import HOLD_BYTES

if TYPE_CHECKING:
    from kstream.dataflow.outputs import Guarantee
    from kstream.protocol.barrier import Alignment
    from kstream.runtime.config import RunConfig

__all__ = [
    "AT_LEAST_ONE",
    "NON_NEGATIVE",
    "PORT",
    "POSITIVE",
    "AlignmentHoldOption",
    "AlignmentOption",
    "AlignmentTimeoutOption",
    "BootstrapOption",
    "CheckpointStorageOption",
    "GuaranteeOption",
    "JobNameOption",
    "KafkaConfigOption",
    "LogFormatOption",
    "ParamsOption",
    "PortOption",
    "RequiredJobNameOption",
    "S3EndpointOption",
    "SourceSnapshotIntervalOption",
    "SparkMasterOption",
    "SpecArgument",
    "StateDirOption",
    "number",
    "parse_alignment",
    "parse_guarantee",
    "run_config",
]

N = TypeVar("N", int, float)


def number(
    *, minimum: float, exclusive: bool = False, maximum: float | None = None
) -> Callable[[typer.CallbackParam, N | None], N | None]:
    """A callback accepting finite numbers >= `minimum` (> if `exclusive`) and <= `maximum`."""
    bound = f"> {minimum:g}" if exclusive else f">= {minimum:g}"
    if maximum is not None:
        bound += f" and <= {maximum:g}"

    def check(param: typer.CallbackParam, value: N | None) -> N | None:
        if value is None:
            return None
        low = value <= minimum if exclusive else value < minimum
        if not math.isfinite(value) or low or (maximum is not None and value > maximum):
            name = max(param.opts, key=len) if param.opts else str(param.name)
            kind = "an integer" if isinstance(value, int) else "a finite number"
            raise ConfigurationError(f"{name} must be {kind} {bound}, got {value}")
        return value

    return check


#: Durations and timeouts: zero would mean "always" or "never".
POSITIVE = number(minimum=0, exclusive=True)
#: Counts of things that may be absent (kills, an index).
NON_NEGATIVE = number(minimum=0)
#: Counts of things a job needs at least one of (workers, records, retained checkpoints).
AT_LEAST_ONE = number(minimum=1)
#: TCP ports; the local broker's controller listens on port + 1.
PORT = number(minimum=1, maximum=65534)


PortOption = Annotated[
    int,
    typer.Option(
        "--port",
        envvar="KSTREAM_BROKER_PORT",
        help="Listener port (the controller uses port+1).",
        callback=PORT,
    ),
]
SpecArgument = Annotated[str, typer.Argument(help="Job: module:attribute or path.py:attribute.")]
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


def _check_job_name(value: str | None) -> str | None:
    """Refuse a job name no job can have while the command line is parsed: before a
    command creates a topic or a directory (`kstream.protocol.names.check_job_name`)."""
    from kstream.protocol.names import check_job_name

    return None if value is None else check_job_name(value)


JobNameOption = Annotated[
    str | None,
    typer.Option(
        "--job-name",
        help="Name of the job (scopes topics and state): up to 200 ASCII letters, digits, "
        "'.', '_' and '-'.",
        callback=_check_job_name,
    ),
]
#: ``--job-name`` of a command that needs it (`kstream checkpoints`).
RequiredJobNameOption = Annotated[
    str, typer.Option("--job-name", help="The job to list.", callback=_check_job_name)
]


def _use_kafka_config(value: Path | None) -> Path | None:
    """Check the settings file and make it every client's (workers inherit it)."""
    if value is not None:
        # Imported here: `--help` needs nothing of it.
        from kstream.infra.client_settings import use_settings

        use_settings(value)
    return value


KafkaConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--kafka-config",
        envvar="KSTREAM_KAFKA_CONFIG",
        help="File of librdkafka key=value security settings (security.protocol, sasl.*, "
        "ssl.*) for every Kafka client of the job, its workers and the audit.",
        callback=_use_kafka_config,
    ),
]
GuaranteeOption = Annotated[
    str,
    typer.Option(
        "--guarantee", help="Output guarantee: exactly-once, at-least-once or at-most-once."
    ),
]


AlignmentOption = Annotated[
    str,
    typer.Option(
        "--alignment",
        help="How a subtask with several inputs snapshots: aligned (wait for the barrier "
        "on every input) or unaligned (snapshot at the first barrier, record the other "
        "inputs' in-flight records as offset ranges).",
    ),
]
AlignmentTimeoutOption = Annotated[
    float | None,
    typer.Option(
        "--alignment-timeout",
        help="Seconds an aligned snapshot may wait for barriers before it switches to "
        "unaligned (default: never).",
        callback=POSITIVE,
    ),
]

AlignmentHoldOption = Annotated[
    int,
    typer.Option(
        "--alignment-hold-bytes",
        help="What an aligning subtask keeps in memory of the inputs it waits on "
        "(their records go on being fetched); beyond it those inputs are paused and "
        "read again after the barrier. 0: pause at once.",
        callback=NON_NEGATIVE,
    ),
]


CheckpointStorageOption = Annotated[
    str,
    typer.Option(
        "--checkpoint-storage",
        help="Where checkpoints are stored: file:///abs/path or s3://bucket/prefix "
        "(credentials from the AWS environment); default: <state-dir>/<job>/checkpoints.",
    ),
]
SparkMasterOption = Annotated[
    str, typer.Option("--master", help="Spark master URL, e.g. local[2] or spark://host:7077.")
]
S3EndpointOption = Annotated[
    str,
    typer.Option(
        "--s3-endpoint-url",
        help="The S3 endpoint for s3:// checkpoint storage (an S3-compatible store); "
        "default: AWS_ENDPOINT_URL, else AWS's.",
    ),
]
SourceSnapshotIntervalOption = Annotated[
    float | None,
    typer.Option(
        "--source-snapshot-interval",
        help="Seconds between the snapshots each source (its first subtask) starts itself, besides "
        "the coordinator's checkpoints (default: the sources' own snapshot_every_ms).",
        callback=POSITIVE,
    ),
]


def parse_alignment(value: str, timeout: float | None) -> Alignment:
    """The `Alignment` a ``--alignment`` value names, checked with ``--alignment-timeout``."""
    from kstream.protocol.barrier import Alignment

    modes = [a.value for a in Alignment]
    if value not in modes:
        raise ConfigurationError(f"--alignment must be one of {', '.join(modes)}, got {value!r}")
    if timeout is not None and value == Alignment.UNALIGNED:
        raise ConfigurationError(
            "--alignment-timeout applies to aligned checkpoints; unaligned ones never wait"
        )
    return Alignment(value)


def parse_guarantee(value: str) -> Guarantee:
    """The `Guarantee` a ``--guarantee`` value names; `ConfigurationError` for any other."""
    # Imported here: the sink module loads confluent_kafka, which `--help` does not need.
    from kstream.dataflow.outputs import GUARANTEES

    for g in GUARANTEES:
        if value == g:
            return g
    raise ConfigurationError(f"--guarantee must be one of {', '.join(GUARANTEES)}, got {value!r}")


def run_config(
    *,
    spec: str,
    params: dict[str, str],
    name: str,
    bootstrap_servers: str | None,
    kafka_config: Path | None,
    workers: int,
    state_dir: Path,
    say: Callable[[str], None],
    checkpoint_interval: float = 1.0,
    idle_checkpoint_interval: float = 10.0,
    checkpoint_timeout: float = 60.0,
    max_in_flight: int = 1,
    retained: int = 3,
    liveness_timeout: float = 15.0,
    tolerable_checkpoint_timeouts: int = 3,
    concurrent: bool = False,
    guarantee: str = "exactly-once",
    transaction_timeout: float | None = None,
    max_channel_lag: int | None = None,
    alignment: str = "aligned",
    alignment_timeout: float | None = None,
    alignment_hold_bytes: int = HOLD_BYTES,
    source_snapshot_interval: float | None = None,
    checkpoint_storage: str = "",
    s3_endpoint_url: str = "",
    fresh: bool = False,
    accept_changes: bool = False,
    create_topics: bool = False,
    allow_feedback: bool = False,
    spawn: bool = True,
    from_savepoint: str = "",
    allow_non_restored_state: bool = False,
) -> RunConfig:
    """The run configuration the options of `kstream run` and `kstream worker` give,
    for job `name` loaded from `spec` with `params`. Each option keeps its
    default when not given; the bootstrap servers are resolved here, once
    (`kstream.infra.cluster`: possibly starting the local broker, so call this
    once the job loaded).
    """
    from kstream.infra.cluster import bootstrap_servers as resolve
    from kstream.protocol.coordination import IDLE_AFTER, CoordinatorConfig
    from kstream.protocol.flow import FlowConfig
    from kstream.runtime.config import JobRef, RunConfig, StartOptions

    mode = parse_alignment(alignment, alignment_timeout)
    return RunConfig(
        job=JobRef(spec, params, name),
        bootstrap=resolve(bootstrap_servers, say),
        workers=workers,
        state_dir=state_dir.resolve(),
        kafka_config=kafka_config.expanduser().resolve() if kafka_config is not None else None,
        checkpoints=CoordinatorConfig(
            interval=checkpoint_interval,
            timeout=checkpoint_timeout,
            max_in_flight=max_in_flight,
            retained=retained,
            liveness_timeout=liveness_timeout,
            tolerable_timeouts=tolerable_checkpoint_timeouts,
            concurrent=concurrent,
            idle_after=IDLE_AFTER if idle_checkpoint_interval > 0 else 0,
            idle_interval=idle_checkpoint_interval or checkpoint_interval,
        ),
        guarantee=parse_guarantee(guarantee),
        transaction_timeout_s=transaction_timeout,
        flow=FlowConfig() if max_channel_lag is None else FlowConfig(max_lag=max_channel_lag),
        alignment=mode,
        alignment_timeout_s=alignment_timeout,
        alignment_hold_bytes=alignment_hold_bytes,
        source_snapshot_interval_s=source_snapshot_interval,
        checkpoint_storage=checkpoint_storage,
        s3_endpoint_url=s3_endpoint_url,
        start=StartOptions(
            fresh=fresh,
            accept_changes=accept_changes,
            create_topics=create_topics,
            allow_feedback=allow_feedback,
            spawn=spawn,
            from_savepoint=from_savepoint,
            allow_non_restored_state=allow_non_restored_state,
        ),
    )


def _check_log_format(value: str) -> str:
    from kstream.infra.logs import FORMATS

    if value not in FORMATS:
        raise ConfigurationError(f"--log-format must be one of {', '.join(FORMATS)}, got {value!r}")
    return value


#: How a process logs (`kstream.infra.logs`).
LogFormatOption = Annotated[
    str,
    typer.Option(
        "--log-format",
        envvar="KSTREAM_LOG_FORMAT",
        help="text (for people) or json (one object per line: time, level, logger, "
        "message, job, worker, subtask, generation, checkpoint).",
        callback=_check_log_format,
    ),
]
