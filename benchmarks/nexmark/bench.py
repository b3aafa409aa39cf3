"""Nexmark in the suite: events/s per query and contender, every output verified.

    python -m benchmarks --workloads nexmark --queries q1,q2 --contenders kstream-eos \
        --events 200000 [--rate 10000] [--partitions 3] --bootstrap-servers B

The generated events are written once to one topic (`generator`); each
(query, contender) runs as its own OS process on a fresh output topic. A
read_committed reader in the suite's process reads that topic from process
start; the contender's time is from process start until the reader holds as
many results as the reference (`reference`). The process is then stopped
(SIGTERM, then its process group), the rest of the topic read, and the whole
output compared with the reference as a multiset (`check`). events/s is input
events (end markers not counted) over that time, start-up included.

Contenders: ``kstream-eos`` (3 workers, exactly-once, 1 s checkpoints, as in
the word-count suite) and ``flink-eos`` (Apache Flink 2.2 from PyPI, a local
mini-cluster of parallelism 3, exactly-once checkpoints every 1 s, a
transactional Kafka sink: `flink`, `flink_sql`; installed on first use and
skipped with the reason where it cannot install) and ``kafka-streams-eos``
(Kafka Streams 4.1, exactly-once v2, 3 stream threads in one JVM, a commit
every 1 s; q0-q3 only: `kafka_streams`). Others have no Nexmark job yet and
are skipped with the reason.

An updating result (Flink's q4, written by ``upsert-kafka``) is read as the
table its records leave (`check.latest`): the time is until that table is the
reference's, and the check is of the table after the drain
(`check.verify_table`); its results are the table's keys (categories).

CPU: the contender's process tree is sampled while it runs (`benchmarks.cpu`);
the broker's CPU (when it is a local process) and the whole machine's busy
CPU over the same span are reported beside it, per million input events.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError
from rich.table import Table

from benchmarks.contenders import ContenderUnavailableError
from benchmarks.cpu import TreeCpu, broker_process, machine_busy_s, process_cpu_s
from benchmarks.nexmark import check, flink, flink_sql, generator, kafka_streams, reference
from benchmarks.nexmark.model import QUERIES
from benchmarks.suite import Status, committed_reader, log_tail, stop_contender
from kstream.infra.admin import Admin
from kstream.testing import unique_name

REPO = Path(__file__).resolve().parents[2]
#: kstream's workers in the suite (as for the word count).
KSTREAM_WORKERS = 3
#: kstream's checkpoint interval here, s; Flink checkpoints as often.
CHECKPOINT_INTERVAL_S = 1.0
#: How often the contender's process tree is sampled for its CPU time, s.
CPU_SAMPLE_S = 0.5
#: After every expected result was read and the contender stopped (`stop_contender`,
#: the suite's grace): how long to read on for extra (duplicated) results.
DRAIN_S = 15.0


@dataclass(frozen=True)
class NexmarkResult:
    """One contender on one query."""

    query: str
    contender: str
    status: Status
    reason: str
    events: int
    results_expected: int
    results_read: int
    verified: bool
    #: Process start until the reader held as many results as expected.
    seconds: float | None
    load_at_start: float
    #: 1-minute load average when the contender was stopped.
    load_at_end: float = 0.0
    #: An updating result's records (upserts and tombstones) read; None: rows appended.
    upserts_read: int | None = None
    #: CPU-seconds over the timed span: the contender's processes (how many), the
    #: broker (None: not a local process), the whole machine (everyone's, others' too).
    cpu_s: float | None = None
    processes: int = 0
    broker_cpu_s: float | None = None
    machine_cpu_s: float | None = None

    @property
    def events_per_s(self) -> float | None:
        return self.events / self.seconds if self.seconds else None

    def per_million(self, cpu_s: float | None) -> float | None:
        """CPU-seconds per million input events."""
        return cpu_s * 1e6 / self.events if cpu_s is not None and self.events else None

    def as_json(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "events_per_s": self.events_per_s,
            "cpu_s_per_m_events": self.per_million(self.cpu_s),
            "broker_cpu_s_per_m_events": self.per_million(self.broker_cpu_s),
            "machine_cpu_s_per_m_events": self.per_million(self.machine_cpu_s),
        }


#: A contender's command line: (bootstrap, query, input topic, output topic, scratch dir).
Command = Callable[[str, str, str, str, Path], list[str]]


def kstream_command(guarantee: str) -> Command:
    def command(bootstrap: str, query: str, source: str, output: str, scratch: Path) -> list[str]:
        return [
            sys.executable, "-m", "kstream", "run", "benchmarks.nexmark.queries:job",
            "-p", f"query={query}", "-p", f"input={source}", "-p", f"output={output}",
            "-p", f"name=nexmark-{query}-{unique_name('bench')}",
            "--workers", str(KSTREAM_WORKERS), "--guarantee", guarantee,
            "--checkpoint-interval", f"{CHECKPOINT_INTERVAL_S:g}",
            "--state-dir", str(scratch / "state"),
            "--bootstrap-servers", bootstrap,
        ]  # fmt: skip

    return command


def _json(value: bytes | None) -> Any:
    return json.loads(value or b"null")


def _prepared(_: Callable[[str], None]) -> None:
    """Nothing to install."""


@dataclass(frozen=True)
class NexmarkContender:
    """A contender with Nexmark jobs: its command, its one-time install, the queries it
    has, how its output values (and keys) read as the reference's (`check`), and the
    queries whose output is upserts keyed by the result's key (`check.Upsert`)."""

    command: Command
    queries: tuple[str, ...] = QUERIES
    prepare: Callable[[Callable[[str], None]], None] = _prepared
    decode: Callable[[bytes | None], Any] = _json
    upserts: frozenset[str] = frozenset()


#: The contenders with a Nexmark job, by their `--contenders` key.
CONTENDERS: dict[str, NexmarkContender] = {
    "kstream-eos": NexmarkContender(kstream_command("exactly-once")),
    "flink-eos": NexmarkContender(
        flink.command(parallelism=KSTREAM_WORKERS, interval_s=CHECKPOINT_INTERVAL_S),
        flink_sql.FLINK_QUERIES,
        flink.prepare,
        flink_sql.decode,
        flink_sql.UPSERT_QUERIES,
    ),
    "kafka-streams-eos": NexmarkContender(
        kafka_streams.command(threads=KSTREAM_WORKERS, interval_s=CHECKPOINT_INTERVAL_S),
        kafka_streams.STREAMS_QUERIES,
        kafka_streams.prepare,
    ),
}


def _read(
    consumer: Consumer,
    into: list[Any],
    at_end: set[int],
    decode: Callable[[bytes | None], Any],
    keyed: bool,
) -> None:
    """Append what `consumer` has to `into`: values, or `check.Upsert` when `keyed`."""
    for m in consumer.consume(10_000, 0.2):
        err = m.error()
        if err is None:
            value = decode(m.value())
            into.append(check.Upsert(decode(m.key()), value) if keyed else value)
            at_end.discard(m.partition() or 0)
        elif err.code() == KafkaError._PARTITION_EOF:
            at_end.add(m.partition() or 0)


class _Output:
    """A query's output as read so far: its values, or (upserts) its records and the
    table they leave, kept up to date so that checking it costs a few keys."""

    def __init__(self, query: str, expected: Any, *, upserts: bool) -> None:
        self.query, self.expected, self.upserts = query, expected, upserts
        self.records: list[Any] = []
        self.table: dict[str, Any] = {}
        self._applied = 0

    def _apply(self) -> None:
        check.latest(self.records[self._applied :], self.table)
        self._applied = len(self.records)

    def complete(self) -> bool:
        """Appended rows: as many as the reference's. Upserts: the table is the reference's."""
        if not self.upserts:
            return len(self.records) >= check.expected_rows(self.query, self.expected)
        self._apply()
        return self.verdict().ok

    def verdict(self) -> check.Verdict:
        if not self.upserts:
            return check.verify(self.query, self.records, self.expected)
        self._apply()
        return check.verify_table(self.query, self.table, self.expected)

    @property
    def results(self) -> int:
        """Rows read, or the upsert table's keys."""
        if not self.upserts:
            return len(self.records)
        self._apply()
        return len(self.table)


def run_one(
    key: str,
    query: str,
    *,
    bootstrap: str,
    admin: Admin,
    source: str,
    events: int,
    expected: Any,
    partitions: int,
    timeout: float,
    unavailable: str = "",
) -> NexmarkResult:
    """Start, time, stop and verify one contender on one query (skipped with
    `unavailable` as the reason when its install failed)."""
    load = os.getloadavg()[0]
    contender = CONTENDERS.get(key)
    upserts = contender is not None and query in contender.upserts

    def result(status: Status, reason: str, **figures: Any) -> NexmarkResult:
        base: dict[str, Any] = {"results_read": 0, "verified": False, "seconds": None}
        wanted = len(expected) if upserts else check.expected_rows(query, expected)
        return NexmarkResult(
            query, key, status, reason, events, wanted,
            **(base | figures),
            load_at_start=load,
            load_at_end=os.getloadavg()[0],
        )  # fmt: skip

    if contender is None:
        return result("skipped", "no Nexmark job for this contender yet")
    if unavailable:
        return result("skipped", unavailable)
    if query not in contender.queries:
        return result("skipped", f"no {query} job for this contender yet")
    output = unique_name(f"nexmark-{key}-{query}")
    # The windowed queries' too-late records go to <output>-late (`queries`).
    late = f"{output}-late"
    admin.create_topics({output: partitions, late: partitions})
    got = _Output(query, expected, upserts=upserts)
    at_end: set[int] = set()
    consumer = committed_reader(bootstrap, output, partitions)
    failure = ""
    broker = broker_process(bootstrap)
    with tempfile.TemporaryDirectory(prefix="kstream-nexmark-") as scratch:
        log = Path(scratch) / "contender.log"
        argv = contender.command(bootstrap, query, source, output, Path(scratch))
        with log.open("wb") as out:
            broker_from = process_cpu_s(broker) if broker else 0.0
            machine_from = machine_busy_s()
            started = time.monotonic()
            proc = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True
            )
        tree = TreeCpu(proc.pid)
        sampled = started
        try:
            while not got.complete():
                _read(consumer, got.records, at_end, contender.decode, upserts)
                if time.monotonic() - sampled >= CPU_SAMPLE_S:
                    tree.sample()
                    sampled = time.monotonic()
                if proc.poll() is not None:
                    failure = f"exited with code {proc.returncode} before writing every result"
                    break
                if time.monotonic() - started > timeout:
                    failure = f"did not write every result within {timeout:.0f} s"
                    break
            tree.sample()
            done = time.monotonic()
            machine_cpu = machine_busy_s() - machine_from
            broker_cpu = process_cpu_s(broker) - broker_from if broker else None
        finally:
            stop_contender(proc)
        deadline = time.monotonic() + DRAIN_S
        while len(at_end) < partitions and time.monotonic() < deadline:
            _read(consumer, got.records, at_end, contender.decode, upserts)
        consumer.close()
        tail = log_tail(log)
    late_records = len(check.read_output(bootstrap, late)) if not failure else 0
    admin.delete_topics([output, late])
    read: dict[str, Any] = {
        "results_read": got.results,
        "upserts_read": len(got.records) if upserts else None,
    }
    if failure:
        return result("failed", f"{failure}; {len(got.records):,} read; log: {tail}", **read)
    verdict = got.verdict()
    if not verdict.ok:
        return result("failed", "wrong output: " + verdict.describe(), **read)
    if late_records:
        return result("failed", f"{late_records} records late", **read)
    return result(
        "ok", "", **read, verified=True, seconds=done - started,
        cpu_s=tree.cpu_s, processes=tree.processes, broker_cpu_s=broker_cpu,
        machine_cpu_s=machine_cpu,
    )  # fmt: skip


def prepare(contenders: list[str], say: Callable[[str], None]) -> dict[str, str]:
    """Install what the chosen contenders need, before any timing: the reason each one
    that cannot run here is unavailable, by key."""
    unavailable = {}
    for key in contenders:
        contender = CONTENDERS.get(key)
        if contender is None:
            continue
        try:
            contender.prepare(say)
        except ContenderUnavailableError as exc:
            unavailable[key] = str(exc)
            say(f"nexmark: {key} skipped: {exc}")
    return unavailable


def run(
    bootstrap: str,
    *,
    queries: list[str],
    contenders: list[str],
    events: int,
    rate: int,
    seed: int,
    partitions: int,
    timeout: float,
    say: Callable[[str], None],
) -> list[NexmarkResult]:
    """Write the input once, then every (query, contender); the input topic is deleted."""
    # An hour back: results carry event time, and a topic's retention deletes old ones.
    config = generator.Config(
        events, rate=rate, seed=seed, base_ms=int(time.time() * 1000) - 3_600_000
    )
    unavailable = prepare(contenders, say)
    admin = Admin(bootstrap)
    source = unique_name("nexmark-input")
    admin.create_topics({source: partitions})
    results = []
    try:
        say(f"nexmark: writing {events:,} events to {source}")
        generated = generator.generate(config)
        generator.write(bootstrap, source, config, partitions, generated=generated)
        for query in queries:
            expected = reference.REFERENCES[query](generated)
            for key in contenders:
                r = run_one(
                    key, query, bootstrap=bootstrap, admin=admin, source=source,
                    events=events, expected=expected, partitions=partitions, timeout=timeout,
                    unavailable=unavailable.get(key, ""),
                )  # fmt: skip
                rate_text = f"{r.events_per_s:,.0f} events/s" if r.events_per_s else r.reason
                say(f"nexmark {query}: {key}: {r.status} {rate_text}")
                results.append(r)
    finally:
        admin.delete_topics([source])
    return results


def _cpu(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def table(results: list[NexmarkResult]) -> Table:
    """The results as a table: events/s per query and contender, verified or why not, and
    CPU-seconds per million events of the contender, the broker and the whole machine."""
    t = Table(title="Nexmark through Kafka (events/s, start-up included; CPU-s per million events)")
    columns = (
        "query", "contender", "status", "events", "results", "seconds", "events/s",
        "CPU-s/M", "procs", "broker CPU-s/M", "machine CPU-s/M", "load 1m",
    )  # fmt: skip
    for column in columns:
        t.add_column(
            column, justify="left" if column in ("query", "contender", "status") else "right"
        )
    for r in results:
        t.add_row(
            r.query,
            r.contender,
            r.status if r.status != "ok" else "ok, verified",
            f"{r.events:,}",
            f"{r.results_read:,}/{r.results_expected:,}"
            + ("" if r.upserts_read is None else f" keys ({r.upserts_read:,} upserts)"),
            f"{r.seconds:.1f}" if r.seconds else "-",
            f"{r.events_per_s:,.0f}" if r.events_per_s else r.reason[:60],
            _cpu(r.per_million(r.cpu_s)),
            str(r.processes or "-"),
            _cpu(r.per_million(r.broker_cpu_s)),
            _cpu(r.per_million(r.machine_cpu_s)),
            f"{r.load_at_start:.1f}→{r.load_at_end:.1f}",
        )
    return t
