"""The job this deployment runs: a running word count (kstream.examples.wordcount).

Mounted at /opt/kstream/jobs from the ConfigMap kstream-job; the spec is
``wordcount_job:job`` (JOB_SPEC in settings.env). Replace this file with your
job's module, or bake the module into an image ``FROM kstream/kstream``.
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
    """Parameters `input` and `output`: the topics read and written."""
    source, sink = params["input"], params["output"]
    j = Job(f"wordcount-{source}-{sink}")
    (
        j.source(KafkaSource(source))
        .flat_map(str.split)
        .key_by(lambda word: word)
        .process(count, name="count")
        .sink(KafkaSink(sink))
    )
    return j
