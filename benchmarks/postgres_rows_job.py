"""kstream's side of the PostgreSQL sink beside Quix Streams: JSON rows from a topic
into a table, every row inserted (`benchmarks/postgres_sink_bench.py --beside-quix`).

    kstream run benchmarks/postgres_rows_job.py:job -p input=T -p url=URL -p table=NAME
"""

from __future__ import annotations

from kstream import Job, KafkaSource
from kstream.connectors.postgres import PostgresSink


def job(params: dict[str, str]) -> Job:
    """Each input value, a JSON object ``{"word": ..., "count": ...}``, is a row."""
    j = Job(params.get("name", f"pg-rows-{params['table']}"))
    (
        j.source(KafkaSource(params["input"], value_serde="json")).sink(
            PostgresSink(params["url"], params["table"], ("word", "count"))
        )
    )
    return j
