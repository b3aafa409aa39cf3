"""The word count as containers: a coordinator and workers of the kstream image.

Each process of the job is a ``kstream/kstream`` container on the host's network
(the broker advertises 127.0.0.1), labelled with the suite's label; checkpoints go
to a named Docker volume every container mounts at `CHECKPOINTS`
(``--checkpoint-storage file://...``). Each container's state directory is its own.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kafka_container import LABEL, LOG_TAIL_LINES

from kstream.infra.admin import Admin
from kstream.testing import Feeder, ReadRecord, read_all, skewed_lines, unique_name, wait_settled
from kstream.tools.demo import CountCheck, check_running_counts

IMAGE = "kstream/kstream:latest"
SPEC = "kstream.examples.wordcount:job"
#: Where the shared checkpoint volume is mounted (the image makes it, owned by kstream).
CHECKPOINTS = "/var/lib/kstream/checkpoints"
PARTITIONS = 3
#: A test gives up waiting for the output after this long.
DEADLINE_S = 120.0


def docker(*args: str, check: bool = True, timeout: float = 120) -> str:
    """Run the docker CLI; its stdout. A failure raises with the command and its stderr."""
    done = subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if check and done.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)} exited {done.returncode}: {done.stderr}")
    return done.stdout


def run_once(
    label: str, *command: str, options: tuple[str, ...] = (), timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``docker run --rm [options] IMAGE command...`` on the host's network, labelled
    `label`: its exit code, stdout and stderr, whatever the code."""
    return subprocess.run(
        ["docker", "run", "--rm", "--label", f"{LABEL}={label}", "--network", "host",
         *options, IMAGE, *command],
        capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


def log_tail(container: str, lines: int = LOG_TAIL_LINES) -> str:
    done = subprocess.run(
        ["docker", "logs", "--tail", str(lines), container],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return (done.stdout + done.stderr).rstrip()


def state(container: str) -> tuple[str, int]:
    """The container's status ('running', 'exited', ...) and exit code."""
    info = json.loads(docker("inspect", "-f", "{{json .State}}", container))
    return str(info["Status"]), int(info["ExitCode"])


def words(n: int, seed: int = 7) -> list[str]:
    return skewed_lines(n, seed, vocabulary=200)


@dataclass
class ContainerJob:
    """The word count with a coordinator container and `workers` worker containers."""

    bootstrap: str
    label: str
    workers: int = 2
    lines: int = 3000
    #: Lines per second while the job runs, so that faults land mid-stream.
    rate: float = 300.0
    liveness_timeout: float = 6.0
    checkpoint_interval: float = 0.5
    run_id: str = field(default_factory=lambda: unique_name("ct"))
    #: Containers that must be running (name -> role), checked while waiting.
    live: dict[str, str] = field(default_factory=dict)
    #: Every container the job started, in order (for the logs and the clean-up).
    started: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.prefix = f"kstream-{self.run_id}"
        self.volume = f"{self.prefix}-checkpoints"
        docker("volume", "create", "--label", f"{LABEL}={self.label}", self.volume)
        self.input, self.output = f"{self.run_id}-words", f"{self.run_id}-counts"
        self.name = f"wc-{self.run_id}"
        self.text = words(self.lines)
        self.total = sum(len(line.split()) for line in self.text)
        Admin(self.bootstrap).create_topics({self.input: PARTITIONS, self.output: PARTITIONS})
        # Two phases of input, each checked on its own: the first half, then the rest.
        half = len(self.text) // 2
        self.phases = [self.text[:half], self.text]
        self.phase_lines = [half, len(self.text) - half]
        self.feeders = [
            Feeder(self.bootstrap, self.input, [s.encode() for s in part], PARTITIONS, self.rate)
            for part in (self.text[:half], self.text[half:])
        ]
        self.phase = 0

    def _options(self) -> list[str]:
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
            "/var/lib/kstream/state",
            "--checkpoint-storage",
            f"file://{CHECKPOINTS}",
        ]

    def _run(self, name: str, role: str, args: list[str]) -> str:
        docker(
            "run",
            "--detach",
            "--name",
            name,
            "--label",
            f"{LABEL}={self.label}",
            "--network",
            "host",
            "--volume",
            f"{self.volume}:{CHECKPOINTS}",
            IMAGE,
            *args,
        )
        self.started.append(name)
        self.live[name] = role
        return name

    def start_coordinator(self) -> str:
        return self._run(
            f"{self.prefix}-coordinator",
            "coordinator",
            [
                "run",
                *self._options(),
                "--no-spawn",
                "--checkpoint-interval",
                str(self.checkpoint_interval),
                "--liveness-timeout",
                str(self.liveness_timeout),
            ],
        )

    def start_worker(self, index: int, suffix: str = "") -> str:
        return self._run(
            f"{self.prefix}-worker{index}{suffix}",
            f"worker {index}",
            ["worker", *self._options(), "--worker", str(index)],
        )

    def start(self) -> None:
        self.start_coordinator()
        for i in range(self.workers):
            self.start_worker(i)

    def kill(self, container: str) -> None:
        """SIGKILL the container's process (`docker kill`), as a crashed host would."""
        del self.live[container]
        docker("kill", container)

    def stop(self, container: str) -> int:
        """Stop the container (SIGTERM, SIGKILL after 30 s); its exit code."""
        del self.live[container]
        docker("stop", "--time", "30", container, timeout=60)
        return state(container)[1]

    def restart(self, container: str, role: str) -> None:
        """Start a stopped container again: same file system, so the same state directory."""
        docker("start", container)
        self.live[container] = role

    def logs(self) -> str:
        """The last lines of every container of the job, for a failing assertion."""
        return "\n".join(f"--- {name}\n{log_tail(name)}" for name in self.started)

    def committed_outputs(self) -> int:
        """Output records visible to a read_committed reader now."""
        return len(read_all(self.bootstrap, self.output, timeout=2.0))

    def run_until(self, done: Callable[[], bool], what: str, timeout: float = DEADLINE_S) -> None:
        """Feed the input until `done()`; a container that exits early fails the test
        with its last log lines."""
        deadline = time.monotonic() + timeout
        while not done():
            self.feeders[self.phase].feed()
            for name, role in self.live.items():
                status, code = state(name)
                if status != "running":
                    raise AssertionError(
                        f"the {role} container {name} exited early ({status}, exit code "
                        f"{code}); its last log lines:\n{log_tail(name)}"
                    )
            if time.monotonic() > deadline:
                raise AssertionError(f"not {what} within {timeout:.0f}s\n{self.logs()}")
            time.sleep(0.5)  # poll interval of a watcher, not a synchronisation

    def check_phase(self) -> tuple[CountCheck, int]:
        """Feed this phase's input, wait until all of it is counted, check the
        read_committed output against the input so far; then move to the next phase.
        The check, and the number of words in the input so far."""
        text, feeder = self.phases[self.phase], self.feeders[self.phase]
        lines = self.phase_lines[self.phase]
        total = sum(len(line.split()) for line in text)
        self.run_until(
            lambda: feeder.sent == lines and self.committed_outputs() >= total,
            f"every word of phase {self.phase + 1} counted",
        )
        wait_settled(self.bootstrap, self.output)
        output: list[ReadRecord] = read_all(self.bootstrap, self.output)
        self.phase = min(self.phase + 1, len(self.phases) - 1)
        return check_running_counts(text, output), total

    def close(self) -> None:
        """Remove every container of the job and the checkpoint volume."""
        for name in self.started:
            docker("rm", "--force", "--volumes", name, check=False)
        docker("volume", "rm", "--force", self.volume, check=False)
