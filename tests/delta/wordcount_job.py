"""The running word count writing (word, count) rows into a Delta table.

    kstream run tests/delta/wordcount_job.py:job -p input=words -p table=/tmp/word_counts

Every update is a row: a duplicate or a loss shows in the table. ``-p allow_http=true``
lets delta-rs reach an object store over plain HTTP (S3Proxy in the tests; the
credentials and endpoint come from the environment, ``AWS_*``). With ``-p
text=W1,W2`` those words' counts are written as text, which the table's long column
refuses (each such update is a record the error policy gets).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from kstream import Job, KafkaSource, ValueState
from kstream.connectors.delta import DeltaSink


def counter(text: frozenset[str]) -> Callable[[str, str, ValueState], Iterator[tuple[str, Any]]]:
    """The counting function; the counts of the words in `text` come out as text."""

    def count(word: str, _: str, state: ValueState) -> Iterator[tuple[str, Any]]:
        n: int = state.get(0) + 1
        state.set(n)
        yield word, str(n) if word in text else n

    return count


def job(params: dict[str, str]) -> Job:
    j = Job(params.get("name", "wordcount-delta"))
    text = frozenset(w for w in params.get("text", "").split(",") if w)
    (
        j.source(KafkaSource(params["input"]))
        .flat_map(str.split)
        .key_by(lambda word: word)
        .process(counter(text), name="count")
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
