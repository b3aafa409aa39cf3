"""Quix Streams' side of the PostgreSQL sink beside kstream's: JSON rows from a topic
into a table with Quix Streams' own `PostgreSQLSink` (at-least-once: each batch is
written when Quix commits its checkpoint).

    <quix venv>/bin/python benchmarks/quix_postgres_job.py \\
        BOOTSTRAP INPUT GROUP STATE_DIR HOST PORT TABLE COMMIT_INTERVAL_S

Runs in its own virtualenv (``quixstreams[postgresql]``: psycopg2 and its own
confluent-kafka), so it imports nothing from kstream. Runs until SIGTERM. The
table exists already (word text, count bigint): no schema updates, no metadata
columns, so both contenders write the same rows into the same shape of table.
"""

from __future__ import annotations

import sys

from quixstreams import Application
from quixstreams.sinks.community.postgresql import PostgreSQLSink


def main() -> None:
    bootstrap, src, group, state_dir, host, port, table, interval = sys.argv[1:9]
    app = Application(
        broker_address=bootstrap,
        consumer_group=group,
        processing_guarantee="at-least-once",
        auto_offset_reset="earliest",
        commit_interval=float(interval),
        state_dir=state_dir,
        loglevel="WARNING",
    )
    sink = PostgreSQLSink(
        host=host,
        port=int(port),
        dbname="postgres",
        user="postgres",
        password="",
        table_name=table,
        schema_auto_update=False,
        include_metadata=False,
    )
    app.dataframe(app.topic(src, value_deserializer="json")).sink(sink)
    app.run()


if __name__ == "__main__":
    main()
