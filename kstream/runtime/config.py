"""One run configuration: everything a runner and its workers are started with.

`RunConfig` is built once, from the command line (`kstream.tools.cli.options.run_config`)
or by a caller of `kstream.runtime.runner.runner.Runner`, and handed on whole: the
runner keeps it, and its workers read it on stdin as JSON (`to_json`/`from_json`),
so a setting exists in one place and never in a worker's command line.

Units: a wall-clock duration is a ``float`` of seconds named ``_s``, a size is
bytes named ``_bytes``, a count is a bare ``int``. (`CoordinatorConfig` still
names its durations without the unit; they are seconds too.) Event time is
never part of a run configuration.

The JSON form is derived from the fields: nested dataclasses are objects,
enums their value, paths strings, ``None`` null, and the top level carries
``"version": 1``. `from_json` refuses an unknown, missing or mistyped key with
one line naming it (`ConfigurationError`): a worker of another kstream version
stops at once instead of running with settings it misreads.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args, get_origin, get_type_hints

from kstream.dataflow.outputs import Guarantee
from kstream.errors import ConfigurationError
from kstream.protocol.barrier import Alignment
from kstream.protocol.coordination import CoordinatorConfig
from kstream.protocol.flow import FlowConfig
from kstream.protocol.input import HOLD_BYTES

__all__ = ["FORMAT_VERSION", "JobRef", "RunConfig", "StartOptions"]

#: The version of the JSON form; `from_json` refuses any other.
FORMAT_VERSION = 1

#: How long a sink transaction may stay open when the run names no timeout (a
#: worker started by hand, or a guarantee without transactions).
DEFAULT_TRANSACTION_TIMEOUT_S = 600.0


@dataclass(frozen=True, slots=True)
class JobRef:
    """What loads the job: ``module:attribute`` or ``path.py:attribute``, its
    parameters, and the name it runs under (``--job-name``, else the job's own;
    empty until the runner that loaded the job settles it)."""

    spec: str
    params: dict[str, str] = field(default_factory=dict)
    name: str = ""

    def to_json(self) -> str:
        """This reference as one line of JSON (the form `RunConfig.to_json` nests)."""
        return json.dumps(_encode(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> JobRef:
        """The reference `to_json` wrote; `ConfigurationError` naming a bad key."""
        return _decode(cls, _parse(text), "job.")


@dataclass(frozen=True, slots=True)
class StartOptions:
    """How the runner starts the job; the workers ignore them."""

    #: Start from scratch, forgetting the job name's earlier checkpoints.
    fresh: bool = False
    #: Resume a checkpoint of a job whose sources, sinks or operators changed.
    accept_changes: bool = False
    #: Create missing output topics like the input (``--create-topics``).
    create_topics: bool = False
    #: Let a sink write a topic the job reads.
    allow_feedback: bool = False
    #: Start the workers here (False: coordinate workers started elsewhere).
    spawn: bool = True
    #: Start from this savepoint (``--from-savepoint``; ""/none), importing it as the
    #: job's first checkpoint (`kstream.runtime.runner.from_savepoint`).
    from_savepoint: str = ""
    #: Start from a savepoint whose state some operator of the job does not take.
    allow_non_restored_state: bool = False

    def __post_init__(self) -> None:
        if self.fresh and self.accept_changes:
            raise ConfigurationError("--fresh and --accept-changes exclude each other")
        if self.fresh and self.from_savepoint:
            raise ConfigurationError("--fresh and --from-savepoint exclude each other")


@dataclass(frozen=True, slots=True)
class RunConfig:
    """The settings of one run of a job, for its runner and every worker."""

    job: JobRef
    #: The Kafka cluster, resolved once (`kstream.infra.cluster`).
    bootstrap: str
    workers: int
    #: Local state and checkpoint storage.
    state_dir: Path
    #: The client settings file (``--kafka-config``), if any.
    kafka_config: Path | None = None
    checkpoints: CoordinatorConfig = field(default_factory=CoordinatorConfig)
    guarantee: Guarantee = "exactly-once"
    #: How long a sink transaction may stay open; None until the runner's checks
    #: settle it (`dataclasses.replace`), or when nothing settles it.
    transaction_timeout_s: float | None = None
    #: Flow control's bounds (`kstream.protocol.flow`).
    flow: FlowConfig = field(default_factory=FlowConfig)
    #: How the subtasks snapshot (`kstream.protocol.barrier.Alignment`).
    alignment: Alignment = Alignment.ALIGNED
    alignment_timeout_s: float | None = None
    #: What an aligning subtask may hold of its blocked channels' records before
    #: it pauses them instead (`kstream.protocol.input.InputProcessor`; 0: pause
    #: at once).
    alignment_hold_bytes: int = HOLD_BYTES
    #: Every source subtask starts a snapshot itself this often (None: as its source says).
    source_snapshot_interval_s: float | None = None
    #: Where checkpoints are stored: a URL (``file:///path``, ``s3://bucket/prefix``;
    #: `kstream.runtime.checkpoint.url`), or "" for ``<state_dir>/<job>/checkpoints``.
    checkpoint_storage: str = ""
    #: The S3 endpoint (an S3-compatible store), overriding ``AWS_ENDPOINT_URL``; "" if none.
    s3_endpoint_url: str = ""
    start: StartOptions = field(default_factory=StartOptions)
    #: The runner's metrics port (0: no metrics); worker i of a runner that spawns
    #: its workers serves on ``metrics_port + 1 + i`` (`kstream.infra.metrics`).
    metrics_port: int = 0
    #: The interface the metrics endpoints listen on.
    metrics_address: str = "0.0.0.0"
    #: How processes log: "text" (for people) or "json" (one object per line;
    #: `kstream.infra.logs`).
    log_format: str = "text"
    #: A spawned worker's log file is rotated at this size, `log_backups` older kept.
    log_max_bytes: int = 10 * 1024 * 1024
    log_backups: int = 3

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ConfigurationError(f"workers must be >= 1, got {self.workers}")
        if self.alignment_hold_bytes < 0:
            raise ConfigurationError(
                f"the alignment hold must be >= 0 bytes, got {self.alignment_hold_bytes}"
            )

    @property
    def concurrent_snapshots(self) -> int:
        """Concurrent snapshots at most in flight in a worker (0: one after another)."""
        c = self.checkpoints
        return c.max_in_flight if c.concurrent else 0

    def to_json(self) -> str:
        """This configuration as one line of JSON (see the module's docstring)."""
        form = _encode(self)
        assert isinstance(form, dict)
        return json.dumps({"version": FORMAT_VERSION, **form}, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> RunConfig:
        """The configuration `to_json` wrote; `ConfigurationError` naming the first
        key that is unknown, missing or of the wrong type, or a version not 1."""
        return cls.from_form(_parse(text))

    @classmethod
    def from_form(cls, form: object) -> RunConfig:
        """The configuration of `form`, the JSON form already parsed (see `from_json`)."""
        if not isinstance(form, dict):
            raise ConfigurationError("run configuration: not a JSON object")
        form = dict(form)
        version = form.pop("version", None)
        if version != FORMAT_VERSION:
            raise ConfigurationError(
                f"run configuration: version {version!r}, this kstream reads {FORMAT_VERSION}"
            )
        return _decode(cls, form, "")


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ConfigurationError(f"run configuration: not JSON ({exc})") from None


def _encode(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _encode(v) for k, v in value.items()}
    return value


T = TypeVar("T")


def _decode(cls: type[T], form: Any, where: str) -> T:
    """An instance of dataclass `cls` from `form`, every field checked by its type hint;
    `where` prefixes the keys named in refusals."""
    if not isinstance(form, dict):
        what = repr(where.rstrip(".")) if where else "the top level"
        raise ConfigurationError(f"run configuration: {what} is not an object")
    hints = get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    unknown = sorted(set(form) - set(names))
    if unknown:
        raise ConfigurationError(f"run configuration: unknown key {where + unknown[0]!r}")
    values = {}
    for name in names:
        key = where + name
        if name not in form:
            raise ConfigurationError(f"run configuration: missing key {key!r}")
        values[name] = _value(hints[name], form[name], key)
    return cls(**values)


def _value(hint: Any, form: Any, key: str) -> Any:
    """`form` read as type `hint`; `ConfigurationError` naming `key` if it is not one."""
    origin = get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        options = get_args(hint)
        if form is None and type(None) in options:
            return None
        for option in options:
            if option is type(None):
                continue
            try:
                return _value(option, form, key)
            except ConfigurationError:
                continue
        raise _mistyped(key, hint, form)
    if origin is Literal:
        if isinstance(form, str) and form in get_args(hint):
            return form
        raise _mistyped(key, hint, form)
    if origin is dict:
        key_type, value_type = get_args(hint)
        if not isinstance(form, dict):
            raise _mistyped(key, hint, form)
        return {
            _value(key_type, k, f"{key}.{k}"): _value(value_type, v, f"{key}.{k}")
            for k, v in form.items()
        }
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _decode(hint, form, key + ".")
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        try:
            return hint(form)
        except ValueError:
            raise _mistyped(key, hint, form) from None
    if hint is Path:
        if isinstance(form, str):
            return Path(form)
        raise _mistyped(key, hint, form)
    if hint is bool:
        if isinstance(form, bool):
            return form
        raise _mistyped(key, hint, form)
    if hint is int:
        if isinstance(form, int) and not isinstance(form, bool):
            return form
        raise _mistyped(key, hint, form)
    if hint is float:
        # JSON writes 1.0 as 1.0, but a hand-written 1 is as good a number of seconds.
        if isinstance(form, int | float) and not isinstance(form, bool):
            return float(form)
        raise _mistyped(key, hint, form)
    if hint is str:
        if isinstance(form, str):
            return form
        raise _mistyped(key, hint, form)
    raise ConfigurationError(f"run configuration: {key!r} has a type it cannot read: {hint}")


def _mistyped(key: str, hint: Any, form: Any) -> ConfigurationError:
    return ConfigurationError(
        f"run configuration: key {key!r} must be {_describe(hint)}, got {json.dumps(form)}"
    )


def _describe(hint: Any) -> str:
    if get_origin(hint) is Literal:
        return "one of " + ", ".join(map(str, get_args(hint)))
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return "one of " + ", ".join(str(m.value) for m in hint)
    return getattr(hint, "__name__", str(hint))
