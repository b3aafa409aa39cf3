"""The running word count appending (word, count) rows to an Iceberg table.

    kstream run tests/iceberg/wordcount_job.py:job -p input=words \\
        -p catalog=sqlite:////tmp/ice/catalog.db -p warehouse=file:///tmp/ice/warehouse \\
        -p table=db.word_counts

Every update is a row: a duplicate or a loss shows in the table. With ``-p
text=W1,W2`` those words' counts are written as text, which the table's long
column refuses (each such update is a record the error policy gets).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from kstream import Job, KafkaSource, ValueState
from kstream.connectors.iceberg import IcebergSink, sql_catalog


def counter(text: frozenset[str]) -> Callable[[str, str, ValueState], Iterator[tuple[str, Any]]]:
    """The counting function; the counts of the words in `text` come out as text."""

    def count(word: str, _: str, state: ValueState) -> Iterator[tuple[str, Any]]:
        n: int = state.get(0) + 1
        state.set(n)
        yield word, str(n) if word in text else n

    return count


def job(params: dict[str, str]) -> Job:
    j = Job(params.get("name", f"wordcount-iceberg-{params['table']}"))
    text = frozenset(w for w in params.get("text", "").split(",") if w)
    (
        j.source(KafkaSource(params["input"]))
        .flat_map(str.split)
        .key_by(lambda word: word)
        .process(counter(text), name="count")
        .sink(
            IcebergSink(
                sql_catalog(params["catalog"], params["warehouse"]),
                params["table"],
                ("word", "count"),
            )
        )
    )
    return j
