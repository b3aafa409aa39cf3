"""A job on several network-namespace hosts (`netns`), as real processes.

The coordinator (``kstream run --no-spawn``) runs on a host of its own and each
worker (``kstream worker ... --worker I --workers N``) on another; they share
only the broker (on the bridge address) and the checkpoint storage: an object
store on the bridge address (``--checkpoint-storage s3://...``), or a directory
every host's state directory links to (`CheckpointStore`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from netns import Host, HostNet
from object_store import Bucket

from kstream.infra.admin import Admin
from kstream.testing import Feeder, ReadRecord, read_all, skewed_lines, unique_name, wait_settled
from kstream.tools.demo import CountCheck, check_running_counts

SPEC = "kstream.examples.wordcount:job"
PARTITIONS = 3
#: A test gives up waiting for the output after this long.
DEADLINE_S = 90.0


@dataclass(frozen=True)
class CheckpointStore:
    """Where every host's checkpoints go: an object store's URL (`url` and its
    `endpoint`: ``--checkpoint-storage``, ``--s3-endpoint-url``), or, without one, a
    shared directory linked as each state directory's ``<job>/checkpoints`` (what a
    directory every machine mounts would be)."""

    directory: Path
    url: str | None = None
    endpoint: str | None = None

    def attach(self, state_dir: Path, job: str) -> None:
        (state_dir / job).mkdir(parents=True, exist_ok=True)
        link = state_dir / job / "checkpoints"
        if self.url is None and not link.exists():
            link.symlink_to(self.directory, target_is_directory=True)

    def options(self) -> list[str]:
        if self.url is None:
            return []
        endpoint = ["--s3-endpoint-url", self.endpoint] if self.endpoint else []
        return ["--checkpoint-storage", self.url, *endpoint]


def words(n: int, seed: int = 11) -> list[str]:
    return skewed_lines(n, seed, vocabulary=300)


def traceable() -> dict[str, str]:
    """The environment of the job's processes: this one's as it is now (fixtures set
    the store's credentials in it), and on SIGABRT each prints its threads' stacks
    to its log (`HostedJob.exit_code`)."""
    return {**os.environ, "PYTHONFAULTHANDLER": "1"}


@dataclass
class HostedJob:
    """The word count on ``1 + workers`` hosts: host 0 coordinates, host 1+i runs worker i."""

    net: HostNet
    bootstrap: str
    root: Path
    workers: int = 3
    lines: int = 3000
    #: Lines per second while the job runs (None: all written before it starts).
    rate: float | None = 300.0
    liveness_timeout: float = 6.0
    checkpoint_interval: float = 0.5
    #: Checkpoints in this bucket (None: a directory every host links to).
    bucket: Bucket | None = None
    run_id: str = field(default_factory=lambda: unique_name("hosts"))
    hosts: list[Host] = field(default_factory=list)
    coordinators: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)
    worker_procs: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        b = self.bucket
        self.store = CheckpointStore(
            self.root / "checkpoints",
            url=None if b is None else b.url(self.run_id),
            endpoint=None if b is None else b.store.endpoint,
        )
        self.store.directory.mkdir(parents=True)
        self.input, self.output = f"{self.run_id}-words", f"{self.run_id}-counts"
        self.name = f"wc-{self.run_id}"
        self.text = words(self.lines)
        self.total = sum(len(line.split()) for line in self.text)
        Admin(self.bootstrap).create_topics({self.input: PARTITIONS, self.output: PARTITIONS})
        self.feeder = Feeder(
            self.bootstrap,
            self.input,
            [line.encode() for line in self.text],
            PARTITIONS,
            self.rate,
        )
        if self.rate is None:
            self.feeder.feed()
        while len(self.net.hosts) < 1 + self.workers:
            self.net.add_host()
        self.hosts = self.net.hosts[: 1 + self.workers]

    # -- processes ------------------------------------------------------------

    def state_dir(self, host: Host) -> Path:
        d = self.root / host.namespace / "state"
        self.store.attach(d, self.name)
        return d

    def _job_options(self, host: Host) -> list[str]:
        return [
            SPEC,
            "-p",
            f"input={self.input}",
            "-p",
            f"output={self.output}",
            "-p",
            f"name={self.name}",
            "--workers",
            str(self.workers),
            "--bootstrap-servers",
            self.bootstrap,
            "--state-dir",
            str(self.state_dir(host)),
            *self.store.options(),
        ]

    def _log(self, host: Host, what: str) -> int:
        path = self.root / f"{host.namespace}-{what}.log"
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def start_coordinator(self, host_index: int = 0) -> subprocess.Popen[bytes]:
        host = self.net.hosts[host_index]
        fd = self._log(host, "coordinator")
        proc = host.popen(
            [
                sys.executable,
                "-m",
                "kstream",
                "run",
                *self._job_options(host),
                "--no-spawn",
                "--checkpoint-interval",
                str(self.checkpoint_interval),
                "--liveness-timeout",
                str(self.liveness_timeout),
            ],
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=subprocess.STDOUT,
            env=traceable(),
        )
        os.close(fd)
        self.coordinators[host_index] = proc
        return proc

    def start_worker(self, index: int, host: Host | None = None) -> subprocess.Popen[bytes]:
        """Start worker `index` on its host (or on `host`), as the job's process for it."""
        host = host or self.hosts[1 + index]
        fd = self._log(host, f"worker{index}")
        proc = host.popen(
            [
                sys.executable,
                "-m",
                "kstream",
                "worker",
                *self._job_options(host),
                "--worker",
                str(index),
            ],
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=subprocess.STDOUT,
            env=traceable(),
        )
        os.close(fd)
        self.worker_procs[index] = proc
        return proc

    def exit_code(self, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> int:
        """`proc`'s exit code once it ends; fail with the logs if it has not within
        `timeout`, after making it print where each of its threads stands (its
        faulthandler, armed by `PYTHONFAULTHANDLER`, dumps them on SIGABRT)."""
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            raise AssertionError(
                f"pid {proc.pid} still running after {timeout:.0f}s\n{self.logs(lines=80)}"
            ) from None

    def start(self) -> None:
        self.start_coordinator()
        for i in range(self.workers):
            self.start_worker(i)

    def log_of(self, host: Host, what: str) -> str:
        return (self.root / f"{host.namespace}-{what}.log").read_text(errors="replace")

    def logs(self, lines: int = 25) -> str:
        """The last `lines` of every log of the run, for a failing assertion's message."""
        parts = []
        for path in sorted(self.root.glob("*.log")):
            tail = path.read_text(errors="replace").splitlines()[-lines:]
            parts.append(f"--- {path.name}\n" + "\n".join(tail))
        return "\n".join(parts)

    # -- progress -------------------------------------------------------------

    def committed_outputs(self) -> int:
        """Output records visible to a read_committed reader now."""
        return len(read_all(self.bootstrap, self.output, timeout=2.0))

    def run_until(self, done: Callable[[], bool], what: str, timeout: float = DEADLINE_S) -> None:
        """Feed the input and watch the processes until `done()`; fail with the logs."""
        deadline = time.monotonic() + timeout
        while not done():
            self.feeder.feed()
            for proc in self.coordinators.values():
                if proc.poll() not in (None, 0, -signal.SIGKILL):
                    raise AssertionError(f"coordinator exited {proc.returncode}\n{self.logs()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"not {what} within {timeout:.0f}s\n{self.logs()}")
            time.sleep(0.5)  # poll interval of a watcher, not a synchronisation

    def finish(self) -> CountCheck:
        """Wait until every word is counted, stop every process, check the output."""
        self.run_until(
            lambda: self.feeder.sent == len(self.text) and self.committed_outputs() >= self.total,
            "every word counted",
        )
        self.stop()
        wait_settled(self.bootstrap, self.output)
        output: list[ReadRecord] = read_all(self.bootstrap, self.output)
        return check_running_counts(self.text, output)

    def stop(self) -> None:
        """SIGTERM every process of the job (a clean stop), then wait for them."""
        procs = [*self.coordinators.values(), *self.worker_procs.values()]
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def generations(job: HostedJob) -> int:
    """The newest generation the coordinator opened (a `recover` on the control topic)."""
    from kstream.protocol.messages import Recovered
    from kstream.runtime.control import read_messages

    return max(
        (m.generation for m in read_messages(job.bootstrap, job.name) if isinstance(m, Recovered)),
        default=0,
    )
