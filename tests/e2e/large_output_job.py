"""A 1:1 job for the size-limit tests: each input line is output as it is, except
lines starting with "big", which are output with `BIG_BYTES` of incompressible
text appended (compression must not make them fit)."""

from __future__ import annotations

import hashlib

from kstream.connectors.kafka import KafkaSink, KafkaSource
from kstream.dataflow.job import Job

BIG_BYTES = 60_000


def grow(line: str) -> str:
    if not line.startswith("big"):
        return line
    digest, parts = line.encode(), []
    for _ in range(BIG_BYTES // 64):
        digest = hashlib.sha256(digest).hexdigest().encode()
        parts.append(digest.decode())
    return line + " " + "".join(parts)


def job(params: dict[str, str]) -> Job:
    j = Job(params["name"])
    j.source(KafkaSource(params["input"])).map(grow).sink(KafkaSink(params["output"], lineage=True))
    return j
