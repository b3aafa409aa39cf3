"""A 1:1 job for the size-limit tests: each input line is output as it is, except
lines starting with "big", which are output repeated `BIG_FACTOR` times."""

from __future__ import annotations

from kstream.connectors.kafka import KafkaSink, KafkaSource
from kstream.job import Job

BIG_FACTOR = 10_000


def grow(line: str) -> str:
    return line * BIG_FACTOR if line.startswith("big") else line


def job(params: dict[str, str]) -> Job:
    j = Job(params["name"])
    j.source(KafkaSource(params["input"])).map(grow).sink(KafkaSink(params["output"], lineage=True))
    return j
