"""`kstream run --liveness-file`: the file a supervisor's probe reads (`kstream alive`).

The runner's loop touches it while it turns; a stopped (stuck) runner stops touching
it and the probe fails; a clean stop removes it. This is the coordinator's liveness
probe on Kubernetes (deploy/kubernetes). About 15 s.
"""

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
from kstream.testing import unique_name

pytestmark = [pytest.mark.broker, pytest.mark.e2e]


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)  # polling a file's time and a probe's exit; no event to wait on
    raise AssertionError(f"timed out waiting for {what}")


def probe(path: Path, max_age: float) -> int:
    """`kstream alive` as Kubernetes' exec probe runs it: its exit code."""
    command = [sys.executable, "-m", "kstream", "alive", str(path), "--max-age", str(max_age)]
    return subprocess.run(command, capture_output=True, timeout=60).returncode


def test_the_loop_touches_the_file_a_stopped_loop_fails_the_probe_a_clean_stop_removes_it(
    bootstrap: str, tmp_path: Path
) -> None:
    src, dst, name = unique_name("in"), unique_name("out"), unique_name("alive")
    Admin(bootstrap).create_topics({src: 1, dst: 1})
    alive = tmp_path / "alive"
    command = [
        sys.executable, "-m", "kstream", "run", "kstream.examples.wordcount:job",
        "-p", f"input={src}", "-p", f"output={dst}", "--bootstrap-servers", bootstrap,
        "--workers", "1", "--job-name", name, "--state-dir", str(tmp_path / "state"),
        "--liveness-file", str(alive),
    ]  # fmt: skip
    log_path = tmp_path / "runner.log"
    with log_path.open("ab") as log:
        runner = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for(alive.exists, 120, f"the liveness file ({log_path.read_text()[-2000:]})")
        first = alive.stat().st_mtime
        # Touched again while the loop turns (at most once a second).
        wait_for(lambda: alive.stat().st_mtime > first, 10, "a second touch")
        assert probe(alive, 10) == 0
        # A loop that does not turn: the file ages and the probe fails.
        os.kill(runner.pid, signal.SIGSTOP)
        try:
            wait_for(lambda: probe(alive, 2) == 1, 30, "the probe to fail on a stopped runner")
        finally:
            os.kill(runner.pid, signal.SIGCONT)
        wait_for(lambda: probe(alive, 2) == 0, 30, "the probe to pass again")
        runner.terminate()
        assert runner.wait(60) == 0, log_path.read_text()[-2000:]
        assert not alive.exists()
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
