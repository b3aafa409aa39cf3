"""The demonstrations behind `kstream demo`."""

from __future__ import annotations

import random
import shutil
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from kstream.audit.checks import Record, ViolationKind, running_count_violations
from kstream.dataflow.outputs import Guarantee
from kstream.examples import wordcount
from kstream.infra.admin import Admin
from kstream.infra.cluster import bootstrap_servers
from kstream.infra.paths import cache_dir
from kstream.protocol.barrier import Alignment
from kstream.protocol.coordination import CoordinatorConfig
from kstream.protocol.input import HOLD_BYTES
from kstream.runtime.config import JobRef, RunConfig
from kstream.runtime.runner.runner import Runner, RunningJob
from kstream.testing import (
    Feeder,
    ReadRecord,
    produce,
    read_all,
    run_until_consumed,
    unique_name,
    wait_settled,
)

__all__ = ["WordcountOutcome", "check_running_counts", "smoke", "wordcount_demo"]

Say = Callable[[str], None]
#: The demo gives up if the job has not processed its input within this time.
DEMO_TIMEOUT_S = 600.0


def progress_bar(console: Console, unit: str) -> Progress:
    """A demo's transient progress bar: description, bar, "done/total `unit`", time."""
    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        TextColumn(f"{{task.completed:,}}/{{task.total:,}} {unit}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )


def smoke(records: int, bootstrap: str | None, say: Say) -> bool:
    """Commit one transaction and abort another; read back with read_committed.

    Returns True when exactly the committed records, in order, are read back.
    """
    servers = bootstrap_servers(bootstrap, say)
    admin = Admin(servers)
    admin.check_reachable()
    topic = unique_name("kstream-smoke")
    admin.create_topics({topic: 1})
    committed = [(f"k{i}".encode(), f"committed-{i}".encode()) for i in range(records)]
    aborted = [(f"k{i}".encode(), f"aborted-{i}".encode()) for i in range(records)]
    tid = unique_name("kstream-smoke-tx")
    produce(servers, topic, committed, transactional_id=tid)
    produce(servers, topic, aborted, transactional_id=tid, abort=True)
    say(f"wrote {records} records in a committed transaction and {records} in an aborted one")
    seen = read_all(servers, topic)
    uncommitted = read_all(servers, topic, isolation="read_uncommitted")
    ok = [(r.key, r.value) for r in seen] == committed
    say(
        f"read_committed read {len(seen)} records, read_uncommitted {len(uncommitted)}; "
        f"committed records {'all' if ok else 'NOT'} read back exactly once, aborted ones hidden"
    )
    admin.delete_topics([topic])
    return ok


@dataclass(frozen=True)
class CountCheck:
    """How a running word count's output compares with the truth from its input.

    The figures of the audit's definition (`kstream.audit.checks.running_count`).
    """

    words: int = 0
    outputs: int = 0
    #: Words whose largest emitted count differs from their number of occurrences
    #: (the count itself is missing, or larger counts were emitted), then output
    #: keys that are no input word.
    wrong_final: list[str] = field(default_factory=list)
    #: Outputs beyond the first for a (word, count) pair.
    duplicates: int = 0
    #: Counts in 1..N never emitted.
    missing: int = 0
    #: Outputs lower than an earlier output for the same word in the same partition
    #: (duplicates aside).
    out_of_order: int = 0

    @property
    def state_exact(self) -> bool:
        return not self.wrong_final

    @property
    def output_exact(self) -> bool:
        return (
            self.state_exact
            and self.duplicates == 0
            and self.missing == 0
            and self.out_of_order == 0
        )


def check_running_counts(lines: list[str], output: list[ReadRecord]) -> CountCheck:
    """Compare a running word count's output with the counts in `lines`."""
    truth = Counter(w for line in lines for w in line.split())
    records = [Record(r.partition, r.offset, r.key, r.value) for r in output]
    violations = running_count_violations(truth, records, output[0].topic if output else "")
    kinds = Counter(v.kind for v in violations)
    # A lost violation names its word and the missing count.
    final_lost = {
        v.key
        for v in violations
        if v.kind is ViolationKind.LOST and v.key is not None and v.value == str(truth[v.key])
    }
    too_high = {v.key for v in violations if v.kind is ViolationKind.UNEXPECTED}
    return CountCheck(
        words=len(truth),
        outputs=len(output),
        wrong_final=[w for w in truth if w in final_lost or w in too_high]
        + sorted(k for k in too_high if k is not None and k not in truth),
        duplicates=kinds[ViolationKind.DUPLICATE],
        missing=kinds[ViolationKind.LOST],
        out_of_order=kinds[ViolationKind.OUT_OF_ORDER],
    )


@dataclass
class WordcountOutcome:
    lines: int
    words: int
    seconds: float
    kills: int
    recoveries: int
    checkpoints: int
    check: CountCheck
    input_topic: str
    output_topic: str
    bootstrap: str
    #: Channel records processed as recorded channel state after restores.
    replayed: int = 0


def _generate(n: int, seed: int) -> list[str]:
    rnd = random.Random(seed)
    # A Zipf-like vocabulary: a few hot words and a long tail, as in real text.
    vocab = [f"w{i:04d}" for i in range(2000)] + ["the", "a", "kafka", "stream", "snapshot"]
    weights = [1.0 / (i + 1) for i in range(len(vocab))]
    return [" ".join(rnd.choices(vocab, weights, k=rnd.randint(4, 12))) for _ in range(n)]


#: Partitions of the demo's input and output topics.
INPUT_PARTITIONS = 3


def wordcount_demo(
    *,
    lines: int,
    workers: int,
    kills: int,
    bootstrap: str | None,
    checkpoint_interval: float,
    say: Say,
    console: Console,
    seed: int = 7,
    guarantee: Guarantee = "exactly-once",
    kill_after: int = 0,
    worker_env: dict[str, str] | None = None,
    chaos: Callable[[RunningJob], None] | None = None,
    rate: float | None = None,
    alignment: Alignment = Alignment.ALIGNED,
    alignment_timeout_s: float | None = None,
    alignment_hold_bytes: int = HOLD_BYTES,
    source_snapshot_interval_s: float | None = None,
    hold_input_while_recovering: bool = False,
    checkpoint_storage: str = "",
    metrics_port: int = 0,
    on_runner: Callable[[Runner], None] | None = None,
) -> WordcountOutcome:
    """Run the word count with `workers` workers, SIGKILL a random worker `kills` times,
    wait until every input line is processed, and check the counts against the input.

    With `rate`, the lines are written at that many lines per second while the
    job runs (a live stream), else all before it starts. Random kills start once
    checkpoint `kill_after` has completed. `worker_env`
    is added to the workers' environment (e.g. `KSTREAM_FAULT`); `chaos`, if
    given, is called with the runner on every round of the supervision loop
    (fault-injection tests use it to kill and restart the broker). With
    `hold_input_while_recovering`, a live stream is written only while every
    worker runs the current generation: the input's end is then reached after
    as much running time, however long starts and recoveries take (a test
    whose kills are due after some checkpoints needs the input still flowing
    then). `checkpoint_storage`: a ``--checkpoint-storage`` URL ("": the state directory).
    `metrics_port`: the run's ``--metrics-port`` (0: none; served on 127.0.0.1).
    `on_runner` is called with the runner before it starts (the CLI serves the
    coordinator's metrics and the dashboard there).
    """
    servers = bootstrap_servers(bootstrap, say)
    admin = Admin(servers)
    admin.check_reachable()
    run_id = unique_name("demo")
    input_topic, output_topic = f"{run_id}-words", f"{run_id}-word-counts"
    admin.create_topics({input_topic: INPUT_PARTITIONS, output_topic: INPUT_PARTITIONS})
    text = _generate(lines, seed)
    total_words = sum(len(line.split()) for line in text)
    feeder = Feeder(servers, input_topic, [line.encode() for line in text], INPUT_PARTITIONS, rate)
    if rate is None:
        feeder.feed()
        say(f"wrote {lines} lines ({total_words} words) to {input_topic}")
    else:
        say(f"writing {lines} lines ({total_words} words) to {input_topic} at {rate:g} lines/s")

    params = {"input": input_topic, "output": output_topic, "name": f"wordcount-{run_id}"}
    job = wordcount.job(params)
    state_dir = cache_dir() / "demo" / run_id
    runner = Runner(
        RunConfig(
            JobRef("kstream.examples.wordcount:job", params),
            servers,
            workers,
            state_dir,
            checkpoints=CoordinatorConfig(interval=checkpoint_interval, timeout=60.0),
            guarantee=guarantee,
            alignment=alignment,
            alignment_timeout_s=alignment_timeout_s,
            alignment_hold_bytes=alignment_hold_bytes,
            source_snapshot_interval_s=source_snapshot_interval_s,
            checkpoint_storage=checkpoint_storage,
            metrics_port=metrics_port,
            metrics_address="127.0.0.1",
        ),
        job,
        say=say,
        worker_env=worker_env,
    )
    if on_runner is not None:
        on_runner(runner)
    runner.prepare()

    def each_round(r: RunningJob) -> None:
        if hold_input_while_recovering and not r.running:
            feeder.hold()
        else:
            feeder.feed()
        if chaos is not None:
            chaos(r)

    started = time.monotonic()
    with progress_bar(console, "lines") as progress:
        bar = progress.add_task("word count", total=lines)
        done_kills = run_until_consumed(
            runner,
            input_topic,
            feeder.ends,
            kills=kills,
            kill_after=kill_after,
            seed=seed,
            say=say,
            chaos=each_round,
            on_progress=lambda done: progress.update(bar, completed=min(done, lines)),
            timeout=DEMO_TIMEOUT_S,
        )
    seconds = time.monotonic() - started
    # The workers committed before they stopped; their commit markers may still be
    # on their way into the partitions.
    wait_settled(servers, output_topic)
    output = read_all(servers, output_topic)
    check = check_running_counts(text, output)
    outcome = WordcountOutcome(
        lines=lines,
        words=total_words,
        seconds=seconds,
        kills=done_kills,
        recoveries=runner.stats.recoveries,
        checkpoints=runner.stats.completed,
        check=check,
        input_topic=input_topic,
        output_topic=output_topic,
        bootstrap=servers,
        replayed=runner.report.counters.total.replayed,
    )
    table = Table(title="kstream word count demo", show_header=False)
    table.add_row("input", f"{lines:,} lines, {total_words:,} words in {input_topic}")
    table.add_row("workers", f"{workers} processes, {len(runner.plan.tasks)} subtasks")
    table.add_row(
        "time", f"{seconds:.1f} s ({total_words / seconds:,.0f} words/s incl. recoveries)"
    )
    table.add_row(
        "checkpoints", f"{runner.stats.completed} completed, {runner.report.aborted} aborted"
    )
    table.add_row("faults", f"{done_kills} workers SIGKILLed, {runner.stats.recoveries} recoveries")
    table.add_row("output", f"{check.outputs:,} records in {output_topic}")
    table.add_row(
        "state",
        f"every word's final count correct ({check.words} words)"
        if check.state_exact
        else f"WRONG final count for {len(check.wrong_final)} words, e.g. {check.wrong_final[:3]}",
    )
    table.add_row(
        f"output ({guarantee})",
        f"{check.duplicates:,} duplicate outputs, {check.missing:,} counts missing, "
        f"{check.out_of_order:,} out of order (read_committed)",
    )
    console.print(table)
    if check.state_exact:
        shutil.rmtree(state_dir, ignore_errors=True)
    else:
        say(f"state kept for inspection in {state_dir}")
    return outcome
