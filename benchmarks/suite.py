"""Runs the contenders side by side on one broker and one input, and checks every output.

For each workload, the suite writes the generated input once, then runs each
contender in turn as its own OS process on a fresh output topic. A
read_committed reader in the suite's process reads that topic from process
start; the contender's time is from process start until the reader holds every
expected output. The process is then terminated, the rest of the topic read,
and the whole output compared with the exact expected output (per word: the
counts 1..N, or N upper-cased words).

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

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from rich.progress import Progress

from benchmarks.contenders import Contender, ContenderUnavailableError, Context
from benchmarks.workloads import Expected, Tally, Workload
from kstream.infra.admin import Admin
from kstream.infra.client_settings import client_config
from kstream.testing import unique_name

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


def write_input(
    bootstrap: str, topic: str, lines: list[str], on_progress: Callable[[int], None]
) -> None:
    """Append `lines` to `topic` (keyless, so spread over its partitions) and wait for acks."""
    producer = Producer(
        client_config(
            bootstrap,
            {
                "linger.ms": 20,
                "batch.size": 1_000_000,
                "compression.type": "lz4",
                "queue.buffering.max.messages": 1_000_000,
            },
        )
    )
    for i, line in enumerate(lines):
        while True:
            try:
                producer.produce(topic, line.encode())
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
            on_progress(i)
    left = producer.flush(120)
    if left:
        raise RuntimeError(f"{left} input records were not acknowledged within 120 s")
    on_progress(len(lines))


def _reader(bootstrap: str, topic: str, partitions: int) -> Consumer:
    consumer = Consumer(
        client_config(
            bootstrap,
            {
                "group.id": unique_name("bench-reader"),
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "fetch.wait.max.ms": 50,
            },
        )
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    return consumer


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the contender (a clean stop, so no transaction is left open), then its group."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(STOP_GRACE_S)
    # Whatever the contender left behind (kstream's workers, a JVM's children).
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _tail(log: Path) -> str:
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
) -> Result:
    """Prepare, start, time, stop and verify one contender on one workload."""

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
    consumer = _reader(bootstrap, output, partitions)
    with tempfile.TemporaryDirectory(prefix="kstream-bench-") as scratch:
        log = Path(scratch) / "contender.log"
        ctx = Context(bootstrap, input_topic, output, workload, Path(scratch))
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
                if proc.poll() is not None:
                    failure = f"exited with code {proc.returncode} before writing every output"
                    break
                if time.monotonic() - started > timeout:
                    failure = f"did not write every output within {timeout:.0f} s"
                    break
            done = time.monotonic()
        finally:
            _stop(proc)
        _drain(consumer, tally, at_end, partitions)
        consumer.close()
        progress.remove_task(task)
        tail = _tail(log)
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
