"""Runs the contenders side by side on one broker and one input, and checks every output.

For each workload, the suite writes the generated input once, then runs each
contender in turn as its own OS process on a fresh output topic. A
read_committed reader in the suite's process reads that topic from process
start; the contender's time is from process start until the reader holds every
expected output. The process is then terminated, the rest of the topic read,
and the whole output compared with the exact expected output (per word: the
counts 1..N, N upper-cased words, or its count per window).

The windowed workload gives each contender an input topic of its own: the
timed data lines, then one flush line per partition (`benchmarks.workloads`).
For a contender with per-partition watermarks the flush is written with the
data; for one with stream time (`Contender.stream_time`) it is appended once
its consumer group has committed every data line's offset.

When a contender fails (cannot start, exits early, writes wrong output, does
not finish within `--timeout`), the failure and its last log lines are
recorded and the suite goes on with the next one: one broken contender must not
hide the other figures, but its row says it failed and carries no throughput,
and the suite exits 1. A contender that cannot be prepared on this machine
(PyPI or Maven Central unreachable, no JDK) is skipped with the reason; skips do
not change the exit code.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from rich.progress import Progress

from benchmarks.contenders import Contender, ContenderUnavailableError, Context
from benchmarks.workloads import EventTime, Expected, Tally, Workload, flush_line
from kstream.infra.admin import Admin
from kstream.infra.client_settings import client_config
from kstream.testing import BACKLOG_READER, unique_name

REPO = Path(__file__).resolve().parents[1]
#: After the reader holds every expected output: how long to wait for the contender to
#: stop on SIGTERM before it is killed.
STOP_GRACE_S = 30.0
#: After the contender stopped: how long to read on for extra (duplicated) output.
DRAIN_S = 30.0
#: A shorter span from first to last output (e.g. all output in one transaction) says
#: nothing about the rate while output flows: that figure is left out.
MIN_FLOWING_S = 1.0
#: Log lines quoted when a contender fails.
LOG_TAIL = 8
#: How often the suite asks whether a stream-time contender committed all its data.
COMMITTED_POLL_S = 0.2

Status = Literal["ok", "failed", "skipped"]


@dataclass(frozen=True)
class Result:
    """One contender on one workload. Throughputs are input words per second."""

    workload: Workload
    key: str
    contender: str
    processes: int
    processes_note: str
    status: Status
    reason: str
    input_words: int
    outputs_expected: int
    outputs_read: int
    #: True when the whole output equals the expected output exactly.
    verified: bool
    #: Process start until the read_committed reader held every expected output.
    seconds: float | None
    #: First output visible to the reader until every expected output was (None if
    #: under `MIN_FLOWING_S`).
    flowing_seconds: float | None
    #: 1-minute load average when the contender started (the machine is shared).
    load_at_start: float

    @property
    def words_per_s(self) -> float | None:
        """Throughput including start-up."""
        return self.input_words / self.seconds if self.seconds else None

    @property
    def flowing_words_per_s(self) -> float | None:
        """Throughput while output flows (start-up and first commit excluded)."""
        return self.input_words / self.flowing_seconds if self.flowing_seconds else None

    def as_json(self) -> dict[str, Any]:
        """The JSON form, figures included."""
        return {
            **{k: getattr(self, k) for k in self.__dataclass_fields__},
            "words_per_s": self.words_per_s,
            "flowing_words_per_s": self.flowing_words_per_s,
        }


@dataclass(frozen=True)
class WindowedInput:
    """The windowed workload's input: data lines, their timing, the flush that ends them."""

    lines: list[str]
    timing: EventTime
    partitions: int

    @property
    def flush(self) -> str:
        return flush_line(self.lines)

    def data_ends(self) -> dict[int, int]:
        """Per partition, the offset after its last data line (line i is in i % partitions)."""
        n, p = len(self.lines), self.partitions
        return {q: n // p + (1 if q < n % p else 0) for q in range(p)}


def _input_producer(bootstrap: str) -> Producer:
    return Producer(
        client_config(
            bootstrap,
            {
                "linger.ms": 20,
                "batch.size": 1_000_000,
                "compression.type": "lz4",
                "queue.buffering.max.messages": 1_000_000,
                # Retries must not reorder a partition: the windowed input's times rise in it.
                "enable.idempotence": True,
            },
        )
    )


def _append(
    producer: Producer, topic: str, value: bytes, partition: int = -1, timestamp: int = 0
) -> None:
    """Produce one record (partition -1: the partitioner's choice; timestamp 0: now)."""
    while True:
        try:
            producer.produce(topic, value, partition=partition, timestamp=timestamp)
            return
        except BufferError:
            producer.poll(0.05)


def write_input(
    bootstrap: str,
    topic: str,
    lines: list[str],
    on_progress: Callable[[int], None],
    windowed: WindowedInput | None = None,
) -> None:
    """Append `lines` to `topic` and wait for acks: keyless, so spread over its partitions;
    for the windowed input, line i to partition i % partitions with its timestamp."""
    producer = _input_producer(bootstrap)
    for i, line in enumerate(lines):
        if windowed is None:
            _append(producer, topic, line.encode())
        else:
            p, ts = i % windowed.partitions, windowed.timing.timestamp(i)
            _append(producer, topic, line.encode(), p, ts)
        if i % 10_000 == 0:
            producer.poll(0)
            on_progress(i)
    left = producer.flush(120)
    if left:
        raise RuntimeError(f"{left} input records were not acknowledged within 120 s")
    on_progress(len(lines))


def write_flush(bootstrap: str, topic: str, windowed: WindowedInput) -> None:
    """Append the flush line to every partition of the windowed input."""
    producer = _input_producer(bootstrap)
    line = windowed.flush.encode()
    for p in range(windowed.partitions):
        _append(producer, topic, line, p, windowed.timing.flush_ms)
    if producer.flush(60):
        raise RuntimeError("the flush lines were not acknowledged within 60 s")


def _committed_all(bootstrap: str, group: str, topic: str, ends: dict[int, int]) -> bool:
    """True once `group` has committed, on every partition, an offset at its data's end."""
    consumer = Consumer(client_config(bootstrap, {"group.id": group, "enable.auto.commit": False}))
    try:
        done = consumer.committed([TopicPartition(topic, p) for p in ends], timeout=10)
    except KafkaException:
        return False
    finally:
        consumer.close()
    return all(tp.offset >= ends[tp.partition] for tp in done)


def committed_reader(bootstrap: str, topic: str, partitions: int) -> Consumer:
    """A read_committed reader of every partition of `topic` from offset 0, reporting ends."""
    consumer = Consumer(
        client_config(
            bootstrap,
            {
                "group.id": unique_name("bench-reader"),
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "fetch.wait.max.ms": 50,
                **BACKLOG_READER,
            },
        )
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    return consumer


def stop_contender(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the contender (a clean stop, so no transaction is left open), then its group."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(STOP_GRACE_S)
    # Whatever the contender left behind (kstream's workers, a JVM's children).
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def log_tail(log: Path) -> str:
    """The last `LOG_TAIL` non-blank lines of `log`, on one line."""
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    return " | ".join(lines[-LOG_TAIL:])


def _read(consumer: Consumer, tally: Tally, at_end: set[int]) -> None:
    """One batch into `tally`; `at_end` tracks the partitions whose end the reader reached."""
    for m in consumer.consume(10_000, 0.2):
        err = m.error()
        if err is None:
            tally.add(m.key(), m.value())
            at_end.discard(m.partition() or 0)
        elif err.code() == KafkaError._PARTITION_EOF:
            at_end.add(m.partition() or 0)


def _drain(consumer: Consumer, tally: Tally, at_end: set[int], partitions: int) -> None:
    """Read on until every partition reported its end (or `DRAIN_S` passed)."""
    deadline = time.monotonic() + DRAIN_S
    while len(at_end) < partitions and time.monotonic() < deadline:
        _read(consumer, tally, at_end)


def run_contender(
    contender: Contender,
    *,
    bootstrap: str,
    admin: Admin,
    input_topic: str,
    input_words: int,
    partitions: int,
    workload: Workload,
    expect: Expected,
    timeout: float,
    progress: Progress,
    windowed: WindowedInput | None = None,
) -> Result:
    """Prepare, start, time, stop and verify one contender on one workload.

    For the windowed workload `input_topic` holds this contender's copy of the
    data; the flush lines are written here (see the module docstring).
    """

    def result(status: Status, reason: str, **figures: Any) -> Result:
        base: dict[str, Any] = {
            "outputs_read": 0,
            "verified": False,
            "seconds": None,
            "flowing_seconds": None,
            "load_at_start": os.getloadavg()[0],
        }
        return Result(
            workload=workload,
            key=contender.key,
            contender=contender.name,
            processes=contender.processes,
            processes_note=contender.processes_note,
            status=status,
            reason=reason,
            input_words=input_words,
            outputs_expected=expect.total,
            **(base | figures),
        )

    try:
        contender.prepare(progress.console.log)
    except ContenderUnavailableError as exc:
        return result("skipped", str(exc))
    except Exception as exc:
        return result("failed", f"could not be prepared: {exc}")

    output = unique_name(f"bench-{contender.key}-{workload}")
    admin.create_topics({output: partitions})
    task = progress.add_task(f"{workload}: {contender.name}", total=expect.total)
    tally = Tally(expect)
    consumer = committed_reader(bootstrap, output, partitions)
    with tempfile.TemporaryDirectory(prefix="kstream-bench-") as scratch:
        log = Path(scratch) / "contender.log"
        group = unique_name(f"bench-{contender.key}")
        timing = windowed.timing if windowed else None
        ctx = Context(bootstrap, input_topic, output, workload, Path(scratch), group, timing)
        flush_pending = windowed is not None
        if windowed is not None and not contender.stream_time:
            write_flush(bootstrap, input_topic, windowed)
            flush_pending = False
        next_check = 0.0
        load = os.getloadavg()[0]
        with log.open("wb") as out:
            started = time.monotonic()
            proc = subprocess.Popen(
                contender.command(ctx),
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=REPO,
                start_new_session=True,
            )
        first: float | None = None
        at_end: set[int] = set()
        failure = ""
        try:
            while True:
                _read(consumer, tally, at_end)
                if first is None and tally.received:
                    first = time.monotonic()
                progress.update(task, completed=min(tally.received, expect.total))
                if tally.complete:
                    break
                if windowed is not None and flush_pending and time.monotonic() >= next_check:
                    next_check = time.monotonic() + COMMITTED_POLL_S
                    if _committed_all(bootstrap, group, input_topic, windowed.data_ends()):
                        write_flush(bootstrap, input_topic, windowed)
                        flush_pending = False
                if proc.poll() is not None:
                    failure = f"exited with code {proc.returncode} before writing every output"
                    break
                if time.monotonic() - started > timeout:
                    failure = f"did not write every output within {timeout:.0f} s"
                    break
            done = time.monotonic()
        finally:
            stop_contender(proc)
        _drain(consumer, tally, at_end, partitions)
        consumer.close()
        progress.remove_task(task)
        tail = log_tail(log)
    admin.delete_topics([output])
    figures: dict[str, Any] = {"outputs_read": tally.received, "load_at_start": load}
    if failure:
        return result(
            "failed", f"{failure}; {tally.received:,} outputs read; log: {tail}", **figures
        )
    problems = tally.problems()
    if problems:
        return result("failed", "wrong output: " + "; ".join(problems), **figures)
    flowing = done - (first or started)
    return result(
        "ok",
        "",
        verified=True,
        seconds=done - started,
        flowing_seconds=flowing if flowing >= MIN_FLOWING_S else None,
        **figures,
    )
