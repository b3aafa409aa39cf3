"""The running word count writing into a table, for the sink workloads of a campaign.

    kstream run kstream.tools.chaos.sink_jobs:job -p input=words -p sink=postgres \\
        -p url=postgresql://postgres@127.0.0.1:25432/postgres -p table=word_counts

Parameters: ``input``; ``sink`` (``postgres``, ``delta`` or ``iceberg``); for
PostgreSQL ``url`` and ``table`` (which must exist: word text, count bigint); for
Delta ``table`` (its directory, created by the sink); for Iceberg ``catalog`` (a
SQL catalog's URI), ``warehouse`` and ``table`` (``namespace.name``, which must
exist). Every update is a row (word, count), appended (insert mode): a duplicate or
a loss shows in the table. The sink's connector is imported only for its sink.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kstream import Job, KafkaSource, ValueState
from kstream.dataflow.outputs import Sink
from kstream.errors import ConfigurationError


def count(word: str, _: str, state: ValueState) -> Iterator[tuple[str, int]]:
    """Add one to the word's count and emit (word, new count)."""
    n: int = state.get(0) + 1
    state.set(n)
    yield word, n


def _sink(params: dict[str, str]) -> Sink[Any]:
    kind = params.get("sink", "")
    if kind == "postgres":
        from kstream.connectors.postgres import PostgresSink

        return PostgresSink(params["url"], params["table"], ("word", "count"))
    if kind == "delta":
        from kstream.connectors.delta import DeltaSink

        return DeltaSink(params["table"], {"word": "string", "count": "long"})
    if kind == "iceberg":
        from kstream.connectors.iceberg import IcebergSink, sql_catalog

        return IcebergSink(
            sql_catalog(params["catalog"], params["warehouse"]), params["table"], ("word", "count")
        )
    raise ConfigurationError(f"-p sink must be postgres, delta or iceberg; got {kind!r}")


def job(params: dict[str, str]) -> Job:
    """The word count into the table of `params` (see the module docstring)."""
    j = Job(params.get("name", f"wordcount-{params.get('sink', 'sink')}-{params['input']}"))
    (
        j.source(KafkaSource(params["input"]))
        .flat_map(str.split)
        .key_by(lambda word: word)
        .process(count, name="count")
        .sink(_sink(params))
    )
    return j
