"""What the event-time examples share: their records on Kafka, sources and sinks.

An input record ``(partition, timestamp, key, value)`` of `inputs` is written
to its partition with the key as Kafka key (a table topic is compacted by
it) and the JSON value ``{"key": k, "ts": t, "value": v}`` (`encode`); the
jobs read it with the JSON serde, take event time from ``"ts"`` and key by
``"key"``. Outputs are JSON; too-late records go to a second topic (``-p
late=TOPIC``, default ``<output>-late``) with the reason.

Results carry event time as their Kafka timestamp, so results of the
generators' inputs (event time from November 2023) are older than a topic's
default retention: shift the input's timestamps to recent ones (the e2e tests
move them by whole days, which keeps windows aligned) or give the output
topics ``retention.ms=-1`` (``kstream run --create-topics`` creates them so;
``kstream run`` warns when an existing one would delete them).

Every example's job takes ``-p ooo=MS`` (out-of-orderness, default the
input generator's) and ``-p idle=MS`` (idle timeout, default 10 s).
"""

from __future__ import annotations

import json
from typing import Any

from kstream import KafkaSink, KafkaSource
from kstream.examples.references import Record

__all__ = [
    "encode",
    "event_time",
    "key_of",
    "late_sink",
    "output_sink",
    "source",
    "value_of",
    "with_key",
]


def encode(record: Record) -> tuple[bytes, bytes]:
    """The Kafka key and value of an input record (its partition is the caller's)."""
    _, ts, key, value = record
    return key.encode(), json.dumps({"key": key, "ts": ts, "value": value}).encode()


def event_time(value: Any) -> Any:
    """The record's timestamp (anything else is an unusable timestamp: a dead letter)."""
    return value.get("ts") if isinstance(value, dict) else None


def key_of(value: dict[str, Any]) -> str:
    key: str = value["key"]
    return key


def with_key(result: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A window's result as a (key, result) pair for the sink. Written with its key,
    every result of a key goes to one partition in the order it was emitted, so a
    reader meets an update after the result it supersedes, also after a rescale has
    moved the key to another subtask (without a key, results are spread over the
    partitions and their order across them is lost)."""
    return str(result["key"]), result


def value_of(value: dict[str, Any]) -> Any:
    return value["value"]


def source(topic: str, params: dict[str, str], out_of_orderness_ms: int) -> KafkaSource:
    """A JSON source stamped with ``"ts"``; ``-p ooo`` and ``-p idle`` override the bounds."""
    return KafkaSource(
        topic,
        value_serde="json",
        timestamps=event_time,
        out_of_orderness_ms=int(params.get("ooo", out_of_orderness_ms)),
        idle_timeout_ms=int(params.get("idle", 10_000)),
    )


def output_sink(params: dict[str, str], default: str) -> KafkaSink:
    return KafkaSink(params.get("output", default), value_serde="json")


def late_sink(params: dict[str, str], default: str) -> KafkaSink:
    output = params.get("output", default)
    return KafkaSink(params.get("late", f"{output}-late"), value_serde="json")
