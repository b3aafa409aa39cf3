"""Kafka Streams as a Nexmark contender (``kafka-streams-eos``): q0 to q3.

The program is `NexmarkBench` in the word-count suite's Maven project
(benchmarks/kafka-streams/), compiled beside `StreamsBench` by the same
`benchmarks.contenders.prepare_streams` (Kafka Streams with mvn, javac). Each
query runs as one JVM: exactly-once v2, as many stream threads as kstream has
workers, a commit (a transaction) per kstream checkpoint interval, the input
read from its earliest offset, record caches off. Its output values are JSON
in the reference's shape, so the suite reads them as it reads kstream's.

Only the queries that map simply onto the Streams DSL have a job: q0-q2 are
per-record, q3 a foreign-key KTable-KTable join. The windowed ones (q5, q7,
q8) and q4 need the generator's end markers turned into stream time on every
partition and task, which the DSL's windows do not do by themselves.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

from benchmarks.contenders import prepare_streams, streams_classpath

__all__ = ["STREAMS_QUERIES", "command", "prepare"]

#: Queries with a Kafka Streams job.
STREAMS_QUERIES = ("q0", "q1", "q2", "q3")

prepare = prepare_streams


def command(*, threads: int, interval_s: float) -> Callable[[str, str, str, str, Path], list[str]]:
    """The contender's command line for (bootstrap, query, input, output, scratch)."""

    def argv(bootstrap: str, query: str, source: str, output: str, scratch: Path) -> list[str]:
        return [
            "java", "-cp", streams_classpath(), "kstream.bench.NexmarkBench", bootstrap, source,
            output, query, f"nexmark-{query}-{uuid.uuid4().hex[:10]}", str(scratch / "state"),
            str(threads), str(round(interval_s * 1000)),
        ]  # fmt: skip

    return argv
