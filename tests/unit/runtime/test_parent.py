"""`kstream.runtime.parent`: a worker dies with the runner that spawned it (real processes)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from kstream.runtime.parent import RUNNER_PID_ENV, die_with_runner, runner_gone
from kstream.tools.chaos.targets import alive

#: A stand-in runner: spawns one child as the supervisor does (its pid in
#: `RUNNER_PID_ENV`), prints the child's pid, then waits to be killed.
RUNNER = textwrap.dedent(
    """
    import os, subprocess, sys, time
    child = subprocess.Popen(
        [sys.executable, "-c", sys.argv[1]],
        env={**os.environ, "KSTREAM_RUNNER_PID": str(os.getpid())},
    )
    print(child.pid, flush=True)
    while True:
        time.sleep(60)
    """
)
#: The worker side through the kernel: asks for SIGKILL on its parent's death.
ARMED = textwrap.dedent(
    """
    import time
    from kstream.runtime.parent import die_with_runner, runner_pid
    die_with_runner(runner_pid())
    while True:
        time.sleep(60)
    """
)
#: The worker side without the kernel's help: polls, as a heartbeat does, and exits.
POLLING = textwrap.dedent(
    """
    import time
    from kstream.runtime.parent import runner_gone, runner_pid
    pid = runner_pid()
    while not runner_gone(pid):
        time.sleep(0.1)
    """
)


def wait_gone(pid: int, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)  # polling the kernel's process table; no event to wait on
    return False


@pytest.mark.parametrize("child", [ARMED, POLLING], ids=["pdeathsig", "polling"])
def test_a_spawned_worker_ends_when_its_runner_is_sigkilled(child: str) -> None:
    runner = subprocess.Popen(
        [sys.executable, "-c", RUNNER, child], stdout=subprocess.PIPE, text=True
    )
    assert runner.stdout is not None
    worker = int(runner.stdout.readline())
    try:
        assert alive(worker)
        runner.kill()
        runner.wait()
        assert wait_gone(worker), "the worker outlived its SIGKILLed runner"
    finally:
        if alive(worker):
            os.kill(worker, signal.SIGKILL)


def test_a_worker_started_by_hand_is_left_alone() -> None:
    assert not runner_gone(None)
    die_with_runner(None)  # no runner named: nothing armed, and this process lives on
    assert RUNNER_PID_ENV not in os.environ or os.environ[RUNNER_PID_ENV].isdecimal()


def test_a_runner_that_died_before_the_worker_armed_itself_is_noticed() -> None:
    # Parent pid 1 is never this test's parent: the worker acts as an orphan would.
    child = subprocess.run(
        [sys.executable, "-c", "from kstream.runtime.parent import die_with_runner; "
         "die_with_runner(1); print('survived')"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert child.returncode == -signal.SIGKILL
    assert "survived" not in child.stdout
