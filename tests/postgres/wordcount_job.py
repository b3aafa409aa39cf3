"""The running word count writing (word, count) rows into PostgreSQL.

    kstream run tests/postgres/wordcount_job.py:job -p input=words \\
        -p url=postgresql://postgres@127.0.0.1:25432/postgres -p table=word_counts

Every update is a row (``mode=insert``, the default: a duplicate or a loss shows
in the table) or the word's row is upserted (``mode=upsert``).
"""

from __future__ import annotations

from collections.abc import Iterator

from kstream import Job, KafkaSource, ValueState
from kstream.connectors.postgres import PostgresSink


def count(word: str, _: str, state: ValueState) -> Iterator[tuple[str, int]]:
    n: int = state.get(0) + 1
    state.set(n)
    yield word, n


def job(params: dict[str, str]) -> Job:
    upsert = params.get("mode", "insert") == "upsert"
    j = Job(params.get("name", f"wordcount-pg-{params['table']}"))
    (
        j.source(KafkaSource(params["input"]))
        .flat_map(str.split)
        .key_by(lambda word: word)
        .process(count, name="count")
        .sink(
            PostgresSink(
                params["url"],
                params["table"],
                ("word", "count"),
                key=("word",) if upsert else (),
            )
        )
    )
    return j
