"""The PostgreSQL sink's writer against a plain batched loop, rows per second, side by side;
with ``--beside-quix``, also kstream's sink beside Quix Streams' PostgreSQL sink, both
reading the same rows from Kafka.

Drives `PostgresWriter` as a worker does (write every row; every `--interval`
seconds a checkpoint: `pre_commit` = PREPARE TRANSACTION, then `commit` = COMMIT
PREPARED), and a plain loop without guarantees (the same batches by the same
statements, each batch committed), on (word, running count) rows of the word
count, and prints rows/s and the ratio sink / plain::

    kstream postgres start                       # or any server with prepared transactions
    python benchmarks/postgres_sink_bench.py [--url URL] [--rows 1000000] [--interval 1]
    python benchmarks/postgres_sink_bench.py --beside-quix --bootstrap HOST:PORT [--rounds 2]

It measures the sink in one process (no Kafka, no job around it): what the two-phase
commit and the fencing cost next to the database's own write speed.

``--beside-quix`` then writes `--kafka-rows` of the same rows as JSON objects to a new
one-partition topic and runs, in turn, `kstream run benchmarks/postgres_rows_job.py`
(one worker; exactly-once, then at-least-once) and Quix Streams' `PostgreSQLSink`
(``benchmarks/quix_postgres_job.py``, at-least-once, in its own virtualenv like the
suite's Quix contender), each into a fresh table of the same shape, committing
every `--interval` seconds. One poller counts each table's rows: the rate "overall"
is from the process's start to the last row visible, "flowing" from the first
row visible to the last (start-up left out). The rounds interleave the contenders
so that a change in the machine's load lands on all of them; the 1-minute load is
printed beside every run.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from confluent_kafka import Producer

from benchmarks.contenders import QUIX_VERSION, ContenderUnavailableError, install_peer
from benchmarks.table_sinks import sink_rate, word_counts
from kstream.connectors.postgres import PostgresSink
from kstream.connectors.postgres.schema import Table
from kstream.connectors.postgres.writer import BATCH_ROWS
from kstream.infra.admin import Admin
from kstream.infra.client_settings import client_config
from kstream.infra.paths import cache_dir
from kstream.infra.postgres import LocalPostgres

ROOT = Path(__file__).resolve().parent
#: How long one contender may take to land every row.
RUN_TIMEOUT_S = 600.0
#: How often the poller counts a table's rows.
POLL_S = 0.5


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


def quix_postgres_python() -> Path:
    """The interpreter of a virtualenv with Quix Streams and its PostgreSQL extra."""
    return cache_dir() / "bench" / f"quixstreams-{QUIX_VERSION}-postgresql" / "bin" / "python"


@dataclass(frozen=True, slots=True)
class Landed:
    """One contender's run: rows/s overall (from its start) and while flowing."""

    overall: float
    flowing: float
    load: float


def feed(bootstrap: str, topic: str, rows: list[tuple[str, int]]) -> None:
    """`rows` as JSON objects keyed by word into new one-partition topic `topic`."""
    Admin(bootstrap).create_topics({topic: 1})
    producer = Producer(client_config(bootstrap, {"linger.ms": 20}))
    for word, count in rows:
        value = json.dumps({"word": word, "count": count}).encode()
        while True:
            try:
                producer.produce(topic, value, word.encode())
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    if producer.flush(120) != 0:
        raise SystemExit(f"the broker did not acknowledge every row of {topic}")


def landed(url: str, table: str, rows: int, command: list[str], scratch: Path) -> Landed:
    """Run `command` (in a session of its own) until `table` holds `rows` rows; then
    stop it (SIGTERM, then SIGKILL after 30 s). Its output goes to ``scratch/log``."""
    log = (scratch / "log").open("wb")
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    first: tuple[float, int] | None = None
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            while True:
                row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
                n, now = (row[0] if row else 0), time.perf_counter()
                if n and first is None:
                    first = (now, n)
                if n >= rows:
                    break
                if proc.poll() is not None:
                    raise SystemExit(f"{command[0]} exited {proc.returncode}; see {scratch}/log")
                if now - start > RUN_TIMEOUT_S:
                    raise SystemExit(f"{table} holds {n} of {rows} rows after {RUN_TIMEOUT_S}s")
                time.sleep(POLL_S)
    finally:
        load = os.getloadavg()[0]
        with_timeout_stop(proc)
        log.close()
    t0, n0 = first if first is not None else (now, 0)
    if n > rows:
        raise SystemExit(f"{table} holds {n} rows, more than the {rows} fed")
    flowing = (rows - n0) / (now - t0) if now > t0 else float("nan")
    return Landed(rows / (now - start), flowing, load)


def with_timeout_stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def beside_quix(args: argparse.Namespace, rows: list[tuple[str, int]]) -> None:
    """The end-to-end comparison (see the module docstring)."""
    try:
        install_peer(quix_postgres_python(), f"quixstreams[postgresql]=={QUIX_VERSION}", print)
    except ContenderUnavailableError as exc:
        print(f"Quix Streams' PostgreSQL sink: not measured: {exc}")
        return
    run = f"pgq-{uuid.uuid4().hex[:8]}"
    topic = f"{run}-in"
    feed(args.bootstrap, topic, rows)
    pg = psycopg.conninfo.conninfo_to_dict(args.url)
    n = len(rows)
    print(
        f"\n{n:,} JSON rows from Kafka topic {topic} (1 partition) into PostgreSQL; "
        f"commit every {args.interval:g} s; {os.cpu_count()} cores"
    )

    def kstream(guarantee: str) -> Callable[[str, Path], list[str]]:
        def command(table: str, scratch: Path) -> list[str]:
            return [
                sys.executable, "-m", "kstream", "run",
                f"{ROOT / 'postgres_rows_job.py'}:job",
                "-p", f"input={topic}", "-p", f"url={args.url}", "-p", f"table={table}",
                "-p", f"name={table.replace('_', '-')}",
                "--workers", "1", "--guarantee", guarantee,
                "--checkpoint-interval", f"{args.interval:g}",
                "--state-dir", str(scratch / "state"),
                "--bootstrap-servers", args.bootstrap,
            ]  # fmt: skip

        return command

    def quix(table: str, scratch: Path) -> list[str]:
        return [
            str(quix_postgres_python()), str(ROOT / "quix_postgres_job.py"),
            args.bootstrap, topic, f"{table}-group", str(scratch / "state"),
            str(pg.get("host", "127.0.0.1")), str(pg.get("port", "5432")), table,
            f"{args.interval:g}",
        ]  # fmt: skip

    contenders: dict[str, Callable[[str, Path], list[str]]] = {
        "kstream exactly-once": kstream("exactly-once"),
        "kstream at-least-once": kstream("at-least-once"),
        "Quix Streams at-least-once": quix,
    }
    results: dict[str, list[Landed]] = {name: [] for name in contenders}
    print(
        f"{'round':<6} {'contender':<28} {'overall rows/s':>15} {'flowing rows/s':>15} {'load':>6}"
    )
    for r in range(1, args.rounds + 1):
        for i, (name, command) in enumerate(contenders.items()):
            table = f"{run.replace('-', '_')}_{r}_{i}"
            fresh_table(args.url, table, upsert=False)
            with tempfile.TemporaryDirectory(prefix="pgq-") as tmp:
                got = landed(args.url, table, n, command(table, Path(tmp)), Path(tmp))
            results[name].append(got)
            print(f"{r:<6} {name:<28} {got.overall:>15,.0f} {got.flowing:>15,.0f} {got.load:>6.1f}")
    quix_flow = statistics.median(x.flowing for x in results["Quix Streams at-least-once"])
    quix_all = statistics.median(x.overall for x in results["Quix Streams at-least-once"])
    print("\nmedians, and each ÷ Quix Streams' (flowing / overall):")
    for name, runs in results.items():
        flow = statistics.median(x.flowing for x in runs)
        overall = statistics.median(x.overall for x in runs)
        print(
            f"{name:<28} {flow:>10,.0f} {overall:>10,.0f}   "
            f"{flow / quix_flow:.2f} / {overall / quix_all:.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default=LocalPostgres().url)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--interval", type=float, default=1.0, help="checkpoint interval (s)")
    parser.add_argument(
        "--beside-quix", action="store_true", help="also beside Quix Streams' sink, via Kafka"
    )
    parser.add_argument("--bootstrap", default=os.environ.get("KSTREAM_BOOTSTRAP", ""))
    parser.add_argument("--kafka-rows", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--skip-in-process", action="store_true")
    args = parser.parse_args()
    if args.beside_quix and not args.bootstrap:
        parser.error("--beside-quix needs --bootstrap (or KSTREAM_BOOTSTRAP)")
    print(f"load {os.getloadavg()[0]:.1f} at the start; {os.cpu_count()} cores")
    if not args.skip_in_process:
        in_process(args)
    if args.beside_quix:
        beside_quix(args, list(word_counts(args.kafka_rows)))


def in_process(args: argparse.Namespace) -> None:
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
