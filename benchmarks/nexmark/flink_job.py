"""The Flink contender of Nexmark: one query in a local Flink mini-cluster, Kafka to Kafka.

    <flink venv>/bin/python -m benchmarks.nexmark.flink_job QUERY BOOTSTRAP INPUT OUTPUT \
        SCRATCH CONNECTOR_JAR PARALLELISM CHECKPOINT_INTERVAL_S

Runs in Flink's own virtualenv (PyPI's apache-flink, which carries Flink's
jars and starts a JVM), from the repository root, so it imports nothing from
kstream: only `benchmarks.nexmark.flink_sql` (the statements) and PyFlink.
PyFlink's `TableEnvironment` in streaming mode runs the job in a mini-cluster
inside that JVM (no cluster to start); exactly-once checkpoints every
CHECKPOINT_INTERVAL_S to SCRATCH/checkpoints commit the Kafka sink's
transactions. Runs until terminated (the input is unbounded).
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

from pyflink.table import EnvironmentSettings, TableEnvironment

from benchmarks.nexmark.flink_sql import statements

USAGE = (
    "usage: flink_job QUERY BOOTSTRAP INPUT OUTPUT SCRATCH CONNECTOR_JAR PARALLELISM "
    "CHECKPOINT_INTERVAL_S"
)


def main(argv: list[str]) -> int:
    if len(argv) != 8:
        print(USAGE, file=sys.stderr)
        return 2
    query, bootstrap, source, output, scratch, jar, parallelism, interval = argv
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    conf = env.get_config()
    for key, value in {
        "pipeline.jars": Path(jar).resolve().as_uri(),
        "parallelism.default": parallelism,
        "execution.checkpointing.interval": f"{float(interval) * 1000:.0f} ms",
        "execution.checkpointing.mode": "EXACTLY_ONCE",
        "execution.checkpointing.dir": (Path(scratch) / "checkpoints").resolve().as_uri(),
        # Window starts and ends are written as UTC wall-clock times (flink_sql.normalise).
        "table.local-time-zone": "UTC",
        "pipeline.name": f"nexmark-{query}",
    }.items():
        conf.set(key, value)
    run = uuid.uuid4().hex[:10]
    *ddl, insert = statements(
        query,
        bootstrap=bootstrap,
        source=source,
        output=output,
        group=f"flink-nexmark-{query}-{run}",
        transactional_id_prefix=f"flink-nexmark-{query}-{run}",
    )
    for statement in ddl:
        env.execute_sql(statement)
    env.execute_sql(insert).wait()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
