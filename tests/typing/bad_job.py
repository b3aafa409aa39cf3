"""Deliberate type errors in a job: `tests/unit/test_typing.py` checks that
``mypy --strict`` reports an error on each line whose comment is ``E:``
followed by a part of the message, and on no other line.

Not a test (pytest does not collect this directory): the type checker reads it,
nothing runs it.
"""

from __future__ import annotations

from collections.abc import Iterator

from kstream import (
    Job,
    KafkaSink,
    KafkaSource,
    KeyedContext,
    Sink,
    Stream,
    session,
    tumbling,
)


def count_ints(key: int, value: str, ctx: KeyedContext) -> Iterator[int]:
    yield len(value)


def text_only(stream: Stream[str]) -> None:
    stream.sink(KafkaSink("text"))


def job() -> Job:
    j = Job("bad")
    lines = j.source(KafkaSource("lines"))
    numbers = lines.map(int)
    numbers.map(str.upper)  # E: Argument 1 to "map" of "Stream" has incompatible type
    numbers.filter(lambda n: n.startswith("1"))  # E: "int" has no attribute "startswith"
    keyed = lines.key_by(str.lower)
    keyed.map(str.upper)  # E: "KeyedStream[str, str]" has no attribute "map"
    text_only(keyed)  # E: Argument 1 to "text_only" has incompatible type "KeyedStream[str, str]"
    lines.union(keyed)  # E: Argument 1 to "union" of "Stream" has incompatible type
    keyed.process(count_ints)  # E: Argument 1 to "process" of "KeyedStream" has incompatible type
    lines.connect(numbers)  # E: "Stream[str]" has no attribute "connect"
    lines.feed_back(numbers)  # E: "Stream[str]" has no attribute "feed_back"
    head = lines.iterate("loop")
    head.feed_back(numbers)  # E: Argument 1 to "feed_back" of "IterationHead" has incompatible type
    lines.union(numbers)  # E: Argument 1 to "union" of "Stream" has incompatible type
    ints_only: Sink[int] = KafkaSink[int]("ints")
    lines.sink(ints_only)  # E: Argument 1 to "sink" of "Stream" has incompatible type "Sink[int]"
    keyed.reduce(lambda a, b: len(a) + len(b))  # E: Incompatible return value type
    keyed.window(tumbling(1.5))  # E: No overload variant of "tumbling" matches
    keyed.window(session(60_000), allowed_lateness_ms=0.5)  # E: Argument "allowed_lateness_ms"
    KafkaSource("x", snapshot_every_ms=2.5)  # E: No overload variant of "KafkaSource" matches
    return j
