"""The word count with a third stage: counts are re-keyed and relayed before the sink.

The middle stage (the count) reads channels, aligns barriers and writes
channels, so flow control pauses a subtask that may be aligning at the same
time. Output is the word count's: key = word, value = its running count.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

from kstream import Job, KafkaSink, KafkaSource, ValueState
from kstream.examples.wordcount import count

#: Rounds of hashing per relayed pair: the relay is the slowest stage, so the count
#: before it is paused by flow control much of the time, also while it aligns.
RELAY_WORK = 40


def relay(_: str, pair: tuple[str, int], state: ValueState) -> Iterator[tuple[str, int]]:
    """Pass a (word, count) pair on, keeping how many passed for this key."""
    digest = pair[0].encode()
    for _ in range(RELAY_WORK):
        digest = hashlib.blake2b(digest, digest_size=8).digest()
    state.set(state.get(0) + 1)
    yield pair


def backwards(pair: tuple[str, int]) -> Any:
    """Another key than the count's, so pairs cross to other subtasks."""
    return pair[0][::-1]


def job(params: dict[str, str]) -> Job:
    j = Job(params["name"])
    (
        j.source(KafkaSource(params["input"]))
        .flat_map(str.split)
        .key_by(lambda word: word)
        .process(count, name="count")
        .key_by(backwards)
        .process(relay, name="relay")
        .sink(KafkaSink(params["output"]))
    )
    return j
