"""The word count whose source stage asks for a snapshot when it reads the line ``snapshot``.

With ``-p misplaced=1`` the request is made after the ``key_by`` instead,
where no source runs the function: the job must fail with one line.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kstream import Job, KafkaSink, KafkaSource, ValueState, request_snapshot
from kstream.examples.wordcount import count

#: The line that asks for a snapshot.
ASK = "snapshot"


def words(line: str) -> Iterator[str]:
    if line == ASK:
        request_snapshot()
    yield from line.split()


def count_and_ask(word: str, value: str, state: ValueState) -> Iterator[Any]:
    """The count, asking for a snapshot in a keyed (channel) stage: refused."""
    if word == ASK:
        request_snapshot()
    yield from count(word, value, state)


def job(params: dict[str, str]) -> Job:
    j = Job(params["name"])
    keyed = j.source(KafkaSource(params["input"])).flat_map(words).key_by(lambda w: w)
    fn = count_and_ask if params.get("misplaced") else count
    keyed.process(fn, name="count").sink(KafkaSink(params["output"]))
    return j
