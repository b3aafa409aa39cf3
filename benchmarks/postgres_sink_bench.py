"""The PostgreSQL sink's writer against a plain batched loop, rows per second, side by side.

Drives `PostgresWriter` as a worker does (write every row; every `--interval`
seconds a checkpoint: `pre_commit` = PREPARE TRANSACTION, then `commit` = COMMIT
PREPARED), and a plain loop without guarantees (the same batches by the same
statements, each batch committed), on (word, running count) rows of the word
count, and prints rows/s and the ratio sink / plain::

    kstream postgres start                       # or any server with prepared transactions
    python benchmarks/postgres_sink_bench.py [--url URL] [--rows 1000000] [--interval 1]

It measures the sink in one process (no Kafka, no job around it): what the two-phase
commit and the fencing cost next to the database's own write speed.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator, Sequence
from typing import Any

import psycopg

from benchmarks.table_sinks import sink_rate, word_counts
from kstream.connectors.postgres import PostgresSink
from kstream.connectors.postgres.schema import Table
from kstream.connectors.postgres.writer import BATCH_ROWS
from kstream.infra.postgres import LocalPostgres


def fresh_table(url: str, name: str, upsert: bool) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {name}")
        key = "PRIMARY KEY" if upsert else ""
        conn.execute(f"CREATE TABLE {name} (word text {key}, count bigint NOT NULL)")


def plain_rate(url: str, rows: list[tuple[str, int]], upsert: bool) -> float:
    table = PostgresSink(
        url, "bench_plain", ("word", "count"), key=("word",) if upsert else ()
    ).describe()
    start = time.perf_counter()
    with psycopg.connect(url) as conn:
        for batch in chunks(rows, BATCH_ROWS):
            send(table, conn, batch)
            conn.commit()
    return len(rows) / (time.perf_counter() - start)


def send(table: Table, conn: psycopg.Connection[Any], batch: list[Sequence[Any]]) -> None:
    table.send(conn, batch)


def chunks(rows: list[tuple[str, int]], n: int) -> Iterator[list[Sequence[Any]]]:
    for i in range(0, len(rows), n):
        yield list(rows[i : i + n])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default=LocalPostgres().url)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--interval", type=float, default=1.0, help="checkpoint interval (s)")
    args = parser.parse_args()
    rows = list(word_counts(args.rows))
    print(f"{args.rows:,} (word, count) rows; checkpoint every {args.interval:g} s")
    print(f"{'mode':<8} {'sink rows/s':>12} {'plain rows/s':>13} {'sink/plain':>11}")
    for upsert in (False, True):
        fresh_table(args.url, "bench_sink", upsert)
        fresh_table(args.url, "bench_plain", upsert)
        plain = plain_rate(args.url, rows, upsert)
        sink = sink_rate(
            PostgresSink(
                args.url, "bench_sink", ("word", "count"), key=("word",) if upsert else ()
            ),
            rows,
            args.interval,
        )
        mode = "upsert" if upsert else "insert"
        print(f"{mode:<8} {sink:>12,.0f} {plain:>13,.0f} {sink / plain:>11.2f}")


if __name__ == "__main__":
    main()
