"""The running word count writing (word, count) rows into a Delta table.

    kstream run tests/delta/wordcount_job.py:job -p input=words -p table=/tmp/word_counts

Every update is a row: a duplicate or a loss shows in the table. ``-p allow_http=true``
lets delta-rs reach an object store over plain HTTP (S3Proxy in the tests; the
credentials and endpoint come from the environment, ``AWS_*``).
"""

from __future__ import annotations

from collections.abc import Iterator

from kstream import Job, KafkaSource, ValueState
from kstream.connectors.delta import DeltaSink


def count(word: str, _: str, state: ValueState) -> Iterator[tuple[str, int]]:
    n: int = state.get(0) + 1
    state.set(n)
    yield word, n


def job(params: dict[str, str]) -> Job:
    j = Job(params.get("name", "wordcount-delta"))
    (
        j.source(KafkaSource(params["input"]))
        .flat_map(str.split)
        .key_by(lambda word: word)
        .process(count, name="count")
        .sink(
            DeltaSink(
                params["table"],
                {"word": "string", "count": "long"},
                storage_options={"AWS_ALLOW_HTTP": params["allow_http"]}
                if "allow_http" in params
                else None,
            )
        )
    )
    return j
