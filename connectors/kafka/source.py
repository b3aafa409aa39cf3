"""`KafkaSource`: the description of a user topic a job reads.

The runtime assigns the topic's partitions statically to source subtasks
(partition p goes to subtask p % parallelism) and keeps the offsets in
checkpoints, never in consumer-group commits. This module only describes the
source and checks its settings; the reading is the runtime's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kstream.dataflow.inputs import Source, StartPosition
from kstream.dataflow.serde import Serde, serde
from kstream.dataflow.types import Timestamps
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
class KafkaSource(Source):
    """Read `topic`, decoding values with `value_serde` (`str`, `bytes`, `json` or a Serde).

    `start` applies when there is no checkpoint to restore: from the earliest
    retained record or from the end.

    `timestamps` gives the records event time: ``"kafka"`` (each record's
    Kafka timestamp), a function of the decoded value returning an int of
    milliseconds (a float is refused), or None (no event time). Watermarks
    then trail each partition's largest timestamp by `out_of_orderness_ms`; a
    partition silent for `idle_timeout_ms` of processing time stops holding
    them back; a record without a usable timestamp, or more than
    `max_future_ms` ahead of its partition's watermark (a partition's first
    record: ahead of the wall clock), is a record error (`TimestampError`).

    `snapshot_every` (seconds): each subtask of the source starts a snapshot
    of the whole job itself at that interval, besides the coordinator's
    checkpoints (:ref:`barriers-snapshot-ids`).
    """

    topic: str
    value_serde: str | Serde = "str"
    start: StartPosition = "earliest"
    timestamps: Timestamps = None
    out_of_orderness_ms: int = DEFAULT_OUT_OF_ORDERNESS_MS
    idle_timeout_ms: int = DEFAULT_IDLE_TIMEOUT_MS
    max_future_ms: int = DEFAULT_MAX_FUTURE_MS
    snapshot_every: float | None = None

    def __post_init__(self) -> None:
        every = self.snapshot_every
        if every is not None and (
            isinstance(every, bool) or not (isinstance(every, int | float) and 0 < every < math.inf)
        ):
            raise ConfigurationError(
                f"snapshot_every must be a positive number of seconds or None, got {every!r}"
            )
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
    def serde(self) -> Serde:
        return serde(self.value_serde)

    def partitions(self, bootstrap: str) -> int:
        n = Admin(bootstrap).partitions(self.topic)
        if n is None:
            raise ConfigurationError(
                f"input topic {self.topic!r} does not exist on {bootstrap}; create it first"
            )
        return n
