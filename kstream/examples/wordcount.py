"""Running word count: for every word occurrence, emit (word, its count so far).

    kstream run kstream.examples.wordcount:job -p input=words -p output=word-counts

Input values are UTF-8 text lines; words are `line.split()` (whitespace, no
lowercasing, punctuation kept). Output: key = the word, value = its running
count as decimal text. Each word's outputs are 1, 2, ..., N in order.

The job's name defaults to ``wordcount-<input>-<output>``: the name scopes
checkpoints, state and internal topics, so a count of other topics is another
job rather than a continuation of this one's state.
"""

from __future__ import annotations

from collections.abc import Iterator

from kstream import Job, KafkaSink, KafkaSource, ValueState


def count(word: str, _: str, state: ValueState) -> Iterator[tuple[str, int]]:
    """Add one to the word's count and emit the new count."""
    n: int = state.get(0) + 1
    state.set(n)
    yield word, n


def job(params: dict[str, str]) -> Job:
    """The word-count job; parameters `input`, `output` and optionally `name`."""
    source, sink = params.get("input", "words"), params.get("output", "word-counts")
    j = Job(params.get("name", f"wordcount-{source}-{sink}"))
    (
        j.source(KafkaSource(source))
        .flat_map(str.split)
        .key_by(lambda word: word)
        .process(count, name="count")
        .sink(KafkaSink(sink))
    )
    return j
