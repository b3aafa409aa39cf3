"""`KafkaSource`: the description of a user topic a job reads.

The runtime assigns the topic's partitions statically to source subtasks
(partition p goes to subtask p % parallelism) and keeps the offsets in
checkpoints, never in consumer-group commits. This module only describes the
source and checks its settings; the reading is the runtime's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, overload

from kstream.dataflow.deprecated import seconds_to_ms
from kstream.dataflow.inputs import Source, StartPosition, check_snapshot_every_ms
from kstream.dataflow.serde import Serde, serde
from kstream.dataflow.types import T, Timestamps
from kstream.errors import ConfigurationError
from kstream.infra.admin import Admin
from kstream.protocol.watermarks import (
    DEFAULT_IDLE_TIMEOUT_MS,
    DEFAULT_MAX_FUTURE_MS,
    DEFAULT_OUT_OF_ORDERNESS_MS,
    WatermarkConfig,
)

__all__ = ["KafkaSource"]


@dataclass(frozen=True)
class KafkaSource(Source[T]):
    """Read `topic`, decoding values with `value_serde` (`str`, `bytes`, `json` or a Serde).

    Its type parameter is what the values decode to: ``KafkaSource("t")`` (the
    `str` serde) is a ``KafkaSource[str]``, ``value_serde="bytes"`` a
    ``KafkaSource[bytes]``, a ``Serde[X]`` a ``KafkaSource[X]``, and any other
    serde by name (``"json"``) a ``KafkaSource[Any]``.

    `start` applies when there is no checkpoint to restore: from the earliest
    retained record or from the end. Either is resolved to an offset when the
    job starts, and checkpoints keep that offset: a job killed and resumed
    reads what arrived meanwhile, including on partitions it had read nothing
    of. An offset the topic no longer holds (deleted by retention while the
    job was stopped) reads on from the earliest record retained.

    `timestamps` gives the records event time: ``"kafka"`` (each record's
    Kafka timestamp), a function of the decoded value returning an int of
    milliseconds (a float is refused), or None (no event time). Watermarks
    then trail each partition's largest timestamp by `out_of_orderness_ms`; a
    partition silent for `idle_timeout_ms` of processing time stops holding
    them back; a record without a usable timestamp, or more than
    `max_future_ms` ahead of its partition's watermark (a partition's first
    record: ahead of the wall clock), is a record error (`TimestampError`).

    `snapshot_every_ms`: each subtask of the source starts a snapshot of the
    whole job itself at that interval, besides the coordinator's checkpoints
    (:ref:`barriers-snapshot-ids`). `snapshot_every` (seconds) is its
    deprecated spelling: it warns, and the source keeps it as
    `snapshot_every_ms`.
    """

    topic: str
    value_serde: str | Serde[T] = "str"
    start: StartPosition = "earliest"
    timestamps: Timestamps = None
    out_of_orderness_ms: int = DEFAULT_OUT_OF_ORDERNESS_MS
    idle_timeout_ms: int = DEFAULT_IDLE_TIMEOUT_MS
    max_future_ms: int = DEFAULT_MAX_FUTURE_MS
    snapshot_every: float | None = None
    snapshot_every_ms: int | None = field(default=None, kw_only=True)

    if TYPE_CHECKING:
        # What the values decode to, by serde; the dataclass makes the `__init__`.
        @overload
        def __init__(
            self: KafkaSource[str],
            topic: str,
            value_serde: Literal["str"] = "str",
            start: StartPosition = "earliest",
            timestamps: Timestamps = None,
            out_of_orderness_ms: int = DEFAULT_OUT_OF_ORDERNESS_MS,
            idle_timeout_ms: int = DEFAULT_IDLE_TIMEOUT_MS,
            max_future_ms: int = DEFAULT_MAX_FUTURE_MS,
            snapshot_every: float | None = None,
            *,
            snapshot_every_ms: int | None = None,
        ) -> None: ...

        @overload
        def __init__(
            self: KafkaSource[bytes],
            topic: str,
            value_serde: Literal["bytes"],
            start: StartPosition = "earliest",
            timestamps: Timestamps = None,
            out_of_orderness_ms: int = DEFAULT_OUT_OF_ORDERNESS_MS,
            idle_timeout_ms: int = DEFAULT_IDLE_TIMEOUT_MS,
            max_future_ms: int = DEFAULT_MAX_FUTURE_MS,
            snapshot_every: float | None = None,
            *,
            snapshot_every_ms: int | None = None,
        ) -> None: ...

        @overload
        def __init__(
            self: KafkaSource[T],
            topic: str,
            value_serde: Serde[T],
            start: StartPosition = "earliest",
            timestamps: Timestamps = None,
            out_of_orderness_ms: int = DEFAULT_OUT_OF_ORDERNESS_MS,
            idle_timeout_ms: int = DEFAULT_IDLE_TIMEOUT_MS,
            max_future_ms: int = DEFAULT_MAX_FUTURE_MS,
            snapshot_every: float | None = None,
            *,
            snapshot_every_ms: int | None = None,
        ) -> None: ...

        @overload
        def __init__(
            self: KafkaSource[Any],
            topic: str,
            value_serde: str,
            start: StartPosition = "earliest",
            timestamps: Timestamps = None,
            out_of_orderness_ms: int = DEFAULT_OUT_OF_ORDERNESS_MS,
            idle_timeout_ms: int = DEFAULT_IDLE_TIMEOUT_MS,
            max_future_ms: int = DEFAULT_MAX_FUTURE_MS,
            snapshot_every: float | None = None,
            *,
            snapshot_every_ms: int | None = None,
        ) -> None: ...

        def __init__(self, *args: Any, **kwargs: Any) -> None: ...

    def __post_init__(self) -> None:
        if self.snapshot_every is not None:
            if self.snapshot_every_ms is not None:
                raise ConfigurationError(
                    "give snapshot_every_ms (ms) or the deprecated snapshot_every (seconds), "
                    "not both"
                )
            # The warning points at the caller of the dataclass's `__init__`.
            ms = seconds_to_ms(self.snapshot_every, stacklevel=3)
            object.__setattr__(self, "snapshot_every", None)
            object.__setattr__(self, "snapshot_every_ms", ms)
        check_snapshot_every_ms(self.snapshot_every_ms)
        ts = self.timestamps
        if ts is not None and ts != "kafka" and not callable(ts):
            raise ConfigurationError(
                f"timestamps must be 'kafka', a function of the value or None, "
                f"got {self.timestamps!r}"
            )
        self.watermark_config()  # validates the durations

    def watermark_config(self) -> WatermarkConfig:
        return WatermarkConfig(self.out_of_orderness_ms, self.idle_timeout_ms, self.max_future_ms)

    @property
    def name(self) -> str:
        return f"kafka:{self.topic}"

    @property
    def serde(self) -> Serde[T]:
        return serde(self.value_serde)

    def partitions(self, bootstrap: str) -> int:
        n = Admin(bootstrap).partitions(self.topic)
        if n is None:
            raise ConfigurationError(
                f"input topic {self.topic!r} does not exist on {bootstrap}; create it first"
            )
        return n
