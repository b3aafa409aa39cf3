"""Shared by the end-to-end tests that stop, move and rescale jobs: the in-process
runner, `kstream run` and `kstream savepoint` as a user runs them, a whole job
SIGKILLed (what a lost host takes with it), and input fed in slices while a job runs."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

from test_cli_run import job_processes, kstream, wait_for

from kstream.dataflow.job import Job
from kstream.examples.event_time import encode
from kstream.examples.references import Record
from kstream.protocol.coordination import CoordinatorConfig
from kstream.runtime.config import JobRef, RunConfig
from kstream.runtime.runner.runner import Runner
from kstream.testing import produce

#: Every checkpoint's interval in these tests: several complete per step.
INTERVAL_S = 0.5


def runner(
    bootstrap: str,
    state: Path,
    spec: str,
    job: Job,
    params: dict[str, str],
    workers: int,
    say: Callable[[str], None] = lambda _: None,
) -> Runner:
    """An in-process runner of `job` (loaded from `spec` by its workers) with
    `workers` workers and a checkpoint every `INTERVAL_S`."""
    return Runner(
        RunConfig(
            JobRef(spec, params),
            bootstrap,
            workers,
            state,
            checkpoints=CoordinatorConfig(interval=INTERVAL_S, timeout=60.0),
        ),
        job,
        say=say,
    )


def run_cli(
    bootstrap: str,
    spec: str,
    params: dict[str, str],
    *,
    name: str,
    workers: int,
    state: Path,
    extra: Sequence[str] = (),
) -> subprocess.Popen[str]:
    """`kstream run SPEC -p k=v ... --job-name NAME --workers N`, stdout and stderr piped."""
    args = [a for k, v in params.items() for a in ("-p", f"{k}={v}")]
    return kstream(
        "run", spec, *args, "--bootstrap-servers", bootstrap, "--workers", str(workers),
        "--job-name", name, "--state-dir", str(state),
        "--checkpoint-interval", str(INTERVAL_S), *extra,
    )  # fmt: skip


def savepoint(bootstrap: str, name: str, *extra: str) -> subprocess.CompletedProcess[str]:
    """`kstream savepoint --job-name NAME ...`, run to its end."""
    return subprocess.run(
        [sys.executable, "-m", "kstream", "savepoint", "--job-name", name,
         "--bootstrap-servers", bootstrap, *extra],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def stop_with_savepoint(bootstrap: str, name: str, run: subprocess.Popen[str]) -> str:
    """`kstream savepoint --stop` of a running job; its URL once the runner exited 0."""
    try:
        done = savepoint(bootstrap, name, "--stop", "--timeout-s", "60")
        assert done.returncode == 0, done.stderr
        _, stderr = run.communicate(timeout=60)
        assert run.returncode == 0, stderr
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    return done.stdout.strip()


def wait_running(run: subprocess.Popen[str], predicate: Callable[[], bool], what: str) -> None:
    """Wait up to 120 s for `predicate` while `run` keeps running; on failure the
    runner is killed and its stderr is the assertion's message."""
    try:

        def alive_and_done() -> bool:
            if run.poll() is not None:
                raise AssertionError(f"exited {run.returncode} waiting for {what}")
            return predicate()

        wait_for(alive_and_done, 120, what)
    except BaseException as exc:
        if run.poll() is None:
            run.kill()
        _, stderr = run.communicate()
        raise AssertionError(f"{exc}\n{stderr}") from None


def sigkill_whole(run: subprocess.Popen[str], name: str) -> None:
    """SIGKILL a `kstream run` and every process of its job, as a lost host does;
    return once none of them holds anything (its locks, its files) any more."""
    # Named before the runner dies: its workers die with it (`die_with_runner`),
    # and a dying process no longer shows its command line.
    killed = set(job_processes(name))
    run.send_signal(signal.SIGKILL)
    run.communicate(timeout=60)

    def all_gone() -> bool:
        for pid in job_processes(name):
            killed.add(pid)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return all(exited(pid) for pid in killed)

    wait_for(all_gone, 60, "the workers to be gone")


def exited(pid: int) -> bool:
    """Whether process `pid` is gone or a zombie every thread of which has ended.

    A process being killed loses its command line (its memory) before it
    closes its files, and its other threads end after it: until then its
    state-directory lock is still held, though `job_processes` no longer
    names it.
    """
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        threads = len(list(Path(f"/proc/{pid}/task").iterdir()))
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X") and threads <= 1


class Drip:
    """Writes `rows` (partition, key, value) to `topic` in `slices` slices, each
    partition's rows in their order; `feed_to(k)` writes slices up to the k-th.

    A slice takes the same share of every partition, so partitions advance
    together (in event time, for timed input) however long a job runs between
    two slices.
    """

    def __init__(
        self, bootstrap: str, topic: str, rows: list[tuple[int, bytes | None, bytes]], slices: int
    ) -> None:
        self._bootstrap = bootstrap
        self._topic = topic
        by_partition: dict[int, list[tuple[bytes | None, bytes]]] = defaultdict(list)
        for p, key, value in rows:
            by_partition[p].append((key, value))
        self._slices = [
            {p: rs[len(rs) * k // slices : len(rs) * (k + 1) // slices]
             for p, rs in by_partition.items()}
            for k in range(slices)
        ]  # fmt: skip
        self.fed = 0

    @classmethod
    def events(cls, bootstrap: str, topic: str, records: list[Record], slices: int) -> Drip:
        """Keyed event-time records (`kstream.examples.references.Record`), encoded as
        the event-time examples read them."""
        return cls(bootstrap, topic, [(r[0], *encode(r)) for r in records], slices)

    @property
    def slices(self) -> int:
        return len(self._slices)

    @property
    def done(self) -> bool:
        return self.fed == len(self._slices)

    def feed_to(self, k: int) -> None:
        """Write the slices before the `k`-th that are not written yet."""
        while self.fed < min(k, len(self._slices)):
            for p, rows in self._slices[self.fed].items():
                if rows:
                    produce(self._bootstrap, self._topic, rows, partition=p)
            self.fed += 1
