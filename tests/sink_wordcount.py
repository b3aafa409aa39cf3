"""The word count into a database or table sink, for the sinks' fault tests.

Each sink's suite (tests/postgres, tests/delta, tests/iceberg) has its own job
file and its own independent read of the result; what they share is here: the
input, the run on real worker processes, the 2PC fault points, a worker stopped
past its liveness timeout and woken after the rollback, and the comparison
with the truth (every (word, n) for n in 1..count(word) exactly once).
"""

from __future__ import annotations

import ast
import contextlib
import os
import random
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

from kstream.infra.admin import Admin
from kstream.protocol.coordination import CoordinatorConfig
from kstream.protocol.names import ERROR_HEADER, dead_letter_topic
from kstream.protocol.snapshot_id import COORDINATOR, SnapshotId
from kstream.runtime.config import JobRef, RunConfig
from kstream.runtime.runner.runner import Runner, RunningJob
from kstream.testing import Feeder, read_all, run_until_consumed
from kstream.tools.spec import load_job

#: The named fault fires on this checkpoint id: the coordinator's third.
FAULT_AT = SnapshotId(3, COORDINATOR).encode()
#: The 2PC's fault points: before preCommit (during the snapshot), after it, after
#: the checkpoint completed and before the commit, after the commit.
POINTS = ("snapshotting", "pre-committed", "completed-before-commit", "committed")
WORDS = [f"w{i}" for i in range(300)]


def run_sink_wordcount(
    bootstrap: str,
    tmp_path: Path,
    job: str,
    params: dict[str, str],
    *,
    lines: int,
    seed: int,
    workers: int = 2,
    worker_env: dict[str, str] | None = None,
    liveness_timeout: float = 15.0,
    chaos: Callable[[RunningJob], None] | None = None,
) -> tuple[Counter[str], Runner, list[str]]:
    """Feed `lines` random lines of `WORDS` into the 2-partition topic
    ``params["input"]`` (created here) and run `job` with `params` on `workers`
    worker processes until it consumed them; the truth (word -> count), the
    runner and what it said."""
    src = params["input"]
    Admin(bootstrap).create_topics({src: 2})
    rnd = random.Random(seed)
    text = [" ".join(rnd.choices(WORDS, k=5)) for _ in range(lines)]
    feeder = Feeder(bootstrap, src, [t.encode() for t in text], 2, rate=lines / 8)
    messages: list[str] = []
    runner = Runner(
        RunConfig(
            JobRef(job, params),
            bootstrap,
            workers,
            tmp_path / "state",
            checkpoints=CoordinatorConfig(
                interval=0.3, timeout=60.0, liveness_timeout=liveness_timeout
            ),
        ),
        load_job(job, params),
        say=messages.append,
        worker_env=worker_env,
    )
    runner.prepare()

    def each_round(running: RunningJob) -> None:
        feeder.feed()
        if chaos is not None:
            chaos(running)

    run_until_consumed(runner, src, feeder.ends, say=messages.append, chaos=each_round, timeout=300)
    return Counter(w for t in text for w in t.split()), runner, messages


class Zombie:
    """Chaos that SIGSTOPs worker 1 once 3 checkpoints completed and SIGCONTs it
    after the job rolled back without it (past 1.5 liveness timeouts): the woken
    process is a zombie, whatever it holds must not land."""

    def __init__(self, liveness_timeout: float) -> None:
        self.liveness_timeout = liveness_timeout
        self.stopped: dict[int, float] = {}
        self.resumed: list[int] = []

    def __call__(self, running: RunningJob) -> None:
        if not self.stopped and running.stats.completed >= 3:
            pid = running.worker_pids()[1]
            os.kill(pid, signal.SIGSTOP)
            self.stopped[pid] = time.monotonic()
        for pid, since in self.stopped.items():
            if (
                not self.resumed
                and running.stats.recoveries >= 1
                and time.monotonic() > since + 1.5 * self.liveness_timeout
            ):
                os.kill(pid, signal.SIGCONT)
                self.resumed.append(pid)

    @contextlib.contextmanager
    def released(self) -> Iterator[Zombie]:
        """The zombie, continued on the way out whatever happened (a stopped
        process must not outlive the test)."""
        try:
            yield self
        finally:
            for pid in self.stopped:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)


def assert_every_update_once(got: Counter[tuple[str, int]], truth: Counter[str], log: str) -> None:
    """`got` (rows read back) holds every (word, n) for n in 1..truth[word] once."""
    expected = Counter({(w, n): 1 for w, c in truth.items() for n in range(1, c + 1)})
    duplicates, missing = +(got - expected), +(expected - got)
    assert not duplicates, f"duplicated: {sorted(duplicates)[:10]}\n{log}"
    assert not missing, f"missing: {sorted(missing)[:10]}\n{log}"


def assert_refusals_are_dead_letters(
    bootstrap: str,
    runner: Runner,
    refused: list[str],
    truth: Counter[str],
    log: str,
    *,
    prefix: str,
    column: str,
) -> None:
    """Every update of the `refused` words is one dead letter, in one line, whose
    error starts with `prefix` (the table's refusal of a row of w1x) and names
    `column` with Arrow's message; and no recovery happened (each was handed over
    once)."""
    dead = read_all(bootstrap, dead_letter_topic(runner.plan.job.name))
    got = Counter(ast.literal_eval((r.value or b"").decode()) for r in dead)
    expected = Counter({(w, str(n)): 1 for w in refused for n in range(1, truth[w] + 1)})
    assert runner.stats.recoveries == 0, log  # so each refusal was handed over once
    assert got == expected, log
    for record in dead:
        error = dict(record.headers)[ERROR_HEADER].decode()
        assert error.startswith(f"{prefix} refused row ('w1"), error
        assert f": column {column}: Could not convert '" in error, error
        assert "\n" not in error, error
