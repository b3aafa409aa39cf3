"""deploy/compose/docker-compose.yml brought up, fed, checked and brought down.

Uses `docker compose` (v2) when the docker client has it, else `docker-compose`
(1.29, Debian's). Everything compose made carries its project label: after
``down`` nothing with it may remain.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from container_job import PARTITIONS, docker, log_tail, words
from netns import free_port

from kstream.errors import KStreamError
from kstream.infra.admin import Admin
from kstream.testing import Feeder, read_all, unique_name, wait_settled
from kstream.tools.demo import check_running_counts

pytestmark = pytest.mark.containers

COMPOSE_FILE = Path(__file__).resolve().parents[2] / "deploy" / "compose" / "docker-compose.yml"
DEADLINE_S = 180.0


def _compose_command() -> list[str] | None:
    if (
        shutil.which("docker")
        and subprocess.run(
            ["docker", "compose", "version"], capture_output=True, check=False
        ).returncode
        == 0
    ):
        return ["docker", "compose"]
    found = shutil.which("docker-compose")
    return [found] if found else None


@pytest.fixture
def compose() -> list[str]:
    command = _compose_command()
    if command is None:
        pytest.skip("neither `docker compose` nor `docker-compose` is installed")
    return command


class Project:
    def __init__(self, command: list[str]) -> None:
        self.name = unique_name("kstream-ct-compose")
        self.port = free_port("127.0.0.1")
        self.input, self.output = f"{self.name}-words", f"{self.name}-counts"
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.command = [*command, "--project-name", self.name, "--file", str(COMPOSE_FILE)]
        self.env = os.environ | {
            "KAFKA_PORT": str(self.port),
            "INPUT_TOPIC": self.input,
            "OUTPUT_TOPIC": self.output,
            "JOB_NAME": f"wc-{self.name}",
            "PARTITIONS": str(PARTITIONS),
        }

    def run(self, *args: str, timeout: float = 300) -> str:
        done = subprocess.run(
            [*self.command, *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        assert done.returncode == 0, (
            f"compose {' '.join(args)}: {done.stdout}{done.stderr}\n{self.logs()}"
        )
        return done.stdout

    def containers(self) -> list[str]:
        label = f"label=com.docker.compose.project={self.name}"
        return docker("container", "ls", "-a", "--filter", label, "--format", "{{.Names}}").split()

    def left(self) -> list[str]:
        label = f"label=com.docker.compose.project={self.name}"
        found = [f"container {c}" for c in self.containers()]
        for kind in ("network", "volume"):
            names = docker(kind, "ls", "--filter", label, "--format", "{{.Name}}").split()
            found += [f"{kind} {n}" for n in names]
        return found

    def logs(self) -> str:
        return "\n".join(f"--- {c}\n{log_tail(c)}" for c in self.containers())

    def watch(self) -> None:
        """Fail with its last log lines when a long-running service's container stopped."""
        for name in self.containers():
            if "topics" in name:  # the one-shot service
                continue
            status = docker("inspect", "-f", "{{.State.Status}} {{.State.ExitCode}}", name)
            if not status.startswith("running"):
                raise AssertionError(f"{name} exited early ({status.strip()}):\n{log_tail(name)}")


@pytest.fixture
def project(compose: list[str]) -> Iterator[Project]:
    p = Project(compose)
    try:
        yield p
    finally:
        p.run("down", "--volumes", "--remove-orphans", "--timeout", "20")
        assert p.left() == [], "compose down left these behind"


def _wait(done: object, what: str, p: Project, feeder: Feeder | None = None) -> None:
    assert callable(done)
    deadline = time.monotonic() + DEADLINE_S
    while not done():
        if feeder is not None:
            feeder.feed()
        p.watch()
        if time.monotonic() > deadline:
            raise AssertionError(f"not {what} within {DEADLINE_S:.0f}s\n{p.logs()}")
        time.sleep(0.5)  # poll interval of a watcher, not a synchronisation


def _input_ready(p: Project) -> bool:
    try:
        return p.input in Admin(p.bootstrap).topics(timeout=5.0)
    except KStreamError:
        return False  # the broker is still starting


def test_compose_up_runs_the_word_count(project: Project) -> None:
    p = project
    p.run("up", "--detach")
    _wait(lambda: _input_ready(p), "the input topic created", p)
    text = words(1500, seed=5)
    total = sum(len(line.split()) for line in text)
    feeder = Feeder(p.bootstrap, p.input, [s.encode() for s in text], PARTITIONS, 300.0)

    def counted() -> bool:
        try:
            return (
                feeder.sent == len(text)
                and len(read_all(p.bootstrap, p.output, timeout=2.0)) >= total
            )
        except KStreamError:
            return False  # the output topic does not exist yet

    _wait(counted, "every word counted", p, feeder)
    wait_settled(p.bootstrap, p.output)
    check = check_running_counts(text, read_all(p.bootstrap, p.output))
    assert check.wrong_final == [], p.logs()
    assert (check.duplicates, check.missing, check.out_of_order) == (0, 0, 0), p.logs()
    assert check.outputs == total
