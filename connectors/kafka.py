"""Kafka source and sink.

`KafkaSource` reads a user topic; the runtime assigns its partitions statically
to source subtasks (partition p goes to subtask p % parallelism) and keeps the
offsets in checkpoints, never in consumer-group commits.

`KafkaSink` writes results to a user topic. Values may be ``(key, value)``
pairs or plain values (key None). This writer is **at-least-once**: each epoch
is flushed (every delivery confirmed) before the subtask acks a checkpoint, and
after a recovery the records written since the restored checkpoint are written
again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from confluent_kafka import KafkaError, Producer

from kstream.admin import Admin
from kstream.errors import ConfigurationError, KafkaUnavailableError
from kstream.serde import Serde, serde
from kstream.sink import SinkContext, SinkWriter

__all__ = ["LINEAGE_HEADERS", "KafkaSink", "KafkaSource"]

#: Headers naming the source record behind an output (when `lineage=True`).
LINEAGE_HEADERS = ("kstream.src.topic", "kstream.src.partition", "kstream.src.offset")
#: How long a flush at a checkpoint may take before the checkpoint is declined.
FLUSH_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class KafkaSource:
    """Read `topic`, decoding values with `value_serde` (`str`, `bytes`, `json` or a Serde).

    `start` applies when there is no checkpoint to restore: from the earliest
    retained record or from the end.
    """

    topic: str
    value_serde: str | Serde = "str"
    start: Literal["earliest", "latest"] = "earliest"

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


@dataclass(frozen=True)
class KafkaSink:
    """Write results to `topic` with key/value serdes (`str` by default)."""

    topic: str
    key_serde: str | Serde = "str"
    value_serde: str | Serde = "str"

    @property
    def name(self) -> str:
        return f"kafka:{self.topic}"

    def check(self, bootstrap: str) -> None:
        if Admin(bootstrap).partitions(self.topic) is None:
            raise ConfigurationError(
                f"output topic {self.topic!r} does not exist on {bootstrap}; create it first"
            )

    def open(self, ctx: SinkContext) -> SinkWriter:
        return _AtLeastOnceWriter(self, ctx.producer)


class _AtLeastOnceWriter(SinkWriter):
    def __init__(self, sink: KafkaSink, producer: Producer) -> None:
        self._topic = sink.topic
        self._key = serde(sink.key_serde)
        self._value = serde(sink.value_serde)
        self._producer = producer
        self._errors: list[KafkaError] = []

    def _on_delivery(self, err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            self._errors.append(err)

    def write(self, value: Any) -> None:
        if isinstance(value, tuple) and len(value) == 2:
            key, val = value
        else:
            key, val = None, value
        data = self._value.dumps(val)
        kdata = None if key is None else self._key.dumps(key)
        while True:
            try:
                self._producer.produce(self._topic, data, kdata, on_delivery=self._on_delivery)
                return
            except BufferError:
                self._producer.poll(0.05)  # local queue full: serve deliveries

    def pre_commit(self, epoch: int) -> dict[str, Any]:
        if self._producer.flush(FLUSH_TIMEOUT_S):
            raise KafkaUnavailableError(f"sink {self._topic}: deliveries pending after flush")
        if self._errors:
            err = self._errors[0]
            self._errors.clear()
            raise KafkaUnavailableError(f"sink {self._topic}: delivery failed: {err.str()}")
        return {}
