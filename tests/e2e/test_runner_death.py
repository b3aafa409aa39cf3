"""A SIGKILLed `kstream run` leaves no worker behind, and a restart of it resumes the job."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kstream.infra.admin import Admin
from kstream.testing import produce, read_all, unique_name
from kstream.tools.chaos.targets import alive, children

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

WORKERS = 2


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)  # polling processes and topics; there is no event to wait on
    raise AssertionError(f"timed out waiting for {what}")


def test_workers_die_with_their_sigkilled_runner_and_the_restarted_runner_resumes(
    bootstrap: str, tmp_path: Path
) -> None:
    src, dst, name = unique_name("in"), unique_name("out"), unique_name("orphans")
    Admin(bootstrap).create_topics({src: 2, dst: 2})
    produce(bootstrap, src, [(None, b"x y z") for _ in range(200)])
    command = [
        sys.executable, "-m", "kstream", "run", "kstream.examples.wordcount:job",
        "-p", f"input={src}", "-p", f"output={dst}", "--bootstrap-servers", bootstrap,
        "--workers", str(WORKERS), "--job-name", name, "--state-dir", str(tmp_path / "state"),
        "--checkpoint-interval", "0.5",
    ]  # fmt: skip
    log = (tmp_path / "runner.log").open("ab")
    runner = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    workers: list[int] = []
    try:
        wait_for(lambda: len(children(runner.pid)) == WORKERS, 120, "the workers")
        workers = children(runner.pid)
        runner.kill()
        runner.wait()
        wait_for(lambda: not any(alive(p) for p in workers), 30, "the orphaned workers to die")
        # Nothing is left holding the job: a restart is not refused and finishes the job.
        runner = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        wait_for(
            lambda: {r.value for r in read_all(bootstrap, dst) if r.key == b"z"} >= {b"200"},
            180,
            "the restarted job's final count",
        )
        assert runner.poll() is None, (tmp_path / "runner.log").read_text()
    finally:
        for p in workers:
            if alive(p):
                os.kill(p, signal.SIGKILL)
        runner.terminate()
        runner.wait(60)
        log.close()
