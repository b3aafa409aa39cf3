"""The running word count appending (word, count) rows to an Iceberg table.

    kstream run tests/iceberg/wordcount_job.py:job -p input=words \\
        -p catalog=sqlite:////tmp/ice/catalog.db -p warehouse=file:///tmp/ice/warehouse \\
        -p table=db.word_counts

Every update is a row: a duplicate or a loss shows in the table.
"""

from __future__ import annotations

from collections.abc import Iterator

from kstream import Job, KafkaSource, ValueState
from kstream.connectors.iceberg import IcebergSink, sql_catalog


def count(word: str, _: str, state: ValueState) -> Iterator[tuple[str, int]]:
    n: int = state.get(0) + 1
    state.set(n)
    yield word, n


def job(params: dict[str, str]) -> Job:
    j = Job(params.get("name", f"wordcount-iceberg-{params['table']}"))
    (
        j.source(KafkaSource(params["input"]))
        .flat_map(str.split)
        .key_by(lambda word: word)
        .process(count, name="count")
        .sink(
            IcebergSink(
                sql_catalog(params["catalog"], params["warehouse"]),
                params["table"],
                ("word", "count"),
            )
        )
    )
    return j
