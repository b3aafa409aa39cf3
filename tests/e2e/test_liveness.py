"""Liveness: a slow batch is not a worker's death; a silent worker is replaced.

The worker's main loop sends heartbeats between batches; one user call slower
than the timeout used to make the coordinator declare the worker dead, roll
the job back, and meet the same slow record again after the restore: the job
retried it for ever. A thread of the worker now repeats the heartbeat while
the main loop is busy.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections import Counter
from pathlib import Path

import pytest
from test_cli_run import JOB_FILE as CLI_JOB_FILE
from test_cli_run import kstream, wait_for
from wordcount_runs import assert_exactly_once, run_wordcount

from kstream.infra.admin import Admin
from kstream.protocol.coordination import CoordinatorConfig
from kstream.runtime.config import JobRef, RunConfig
from kstream.runtime.control import read_history
from kstream.runtime.runner.runner import Runner, RunningJob
from kstream.testing import produce, read_all, run_until_consumed, unique_name
from kstream.tools.spec import load_job

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

JOB_FILE = Path(__file__).with_name("slow_record_job.py")
#: The coordinator's liveness timeout in this test (the default is 15 s).
LIVENESS_S = 6.0
#: How long the user function takes on the slow line: well over the timeout.
PAUSE_S = 2.5 * LIVENESS_S


def test_a_user_call_slower_than_the_liveness_timeout_is_waited_for(
    bootstrap: str, tmp_path: Path
) -> None:
    run_id = unique_name("slow-batch")
    src, dst = f"{run_id}-in", f"{run_id}-out"
    Admin(bootstrap).create_topics({src: 1, dst: 1})
    lines = [f"line {i}" for i in range(200)]
    lines[100] = "slow"
    produce(bootstrap, src, [(None, line.encode()) for line in lines], partition=0)
    params = {"name": run_id, "input": src, "output": dst, "pause": str(PAUSE_S)}
    spec = f"{JOB_FILE}:job"
    runner = Runner(
        RunConfig(
            JobRef(spec, params),
            bootstrap,
            1,
            tmp_path,
            checkpoints=CoordinatorConfig(interval=0.5, timeout=120.0, liveness_timeout=LIVENESS_S),
        ),
        load_job(spec, params),
        say=lambda _: None,
    )
    runner.prepare()
    run_until_consumed(runner, src, {0: len(lines)}, timeout=240)

    assert runner.stats.recoveries == 0, "the busy worker was declared dead"
    out = Counter(r.value.decode() for r in read_all(bootstrap, dst) if r.value is not None)
    assert out == Counter(line.upper() for line in lines)


def test_a_worker_that_stays_silent_is_replaced_and_the_job_finishes(bootstrap: str) -> None:
    """A worker alive but unheard of generation after generation (here: stopped and never
    continued; in fault campaigns: a process whose Kafka clients were stuck after broker
    faults) used to be rolled back around every liveness timeout, for ever."""
    stopped: list[int] = []

    def stop_one_worker(runner: RunningJob) -> None:
        if not stopped and runner.stats.completed >= 2:
            pid = runner.worker_pids()[1]
            os.kill(pid, signal.SIGSTOP)  # never continued: only replacing it ends this
            stopped.append(pid)

    messages: list[str] = []
    try:
        outcome = run_wordcount(
            bootstrap,
            messages,
            lines=6_000,
            kills=0,
            checkpoint_interval=0.5,
            rate=400.0,
            chaos=stop_one_worker,
        )
    finally:
        for pid in stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert stopped, messages
    assert any("killed and restarted" in m for m in messages), messages
    assert_exactly_once(outcome)


def test_a_runner_stopped_and_resumed_blames_no_worker_and_says_it_was_itself(
    bootstrap: str, tmp_path: Path
) -> None:
    """Ctrl-Z on `kstream run`, then `fg`: the runner read no heartbeat while it was
    stopped, and used to find a worker "silent for more than 4s", roll the job back and
    print a rich multi-line WARNING about its own control reader."""
    src, dst, name = unique_name("in"), unique_name("out"), unique_name("paused")
    Admin(bootstrap).create_topics({src: 4, dst: 4})
    produce(bootstrap, src, [(None, f"a b c{i}".encode()) for i in range(400)])
    job_file = tmp_path / "wc.py"
    job_file.write_text(CLI_JOB_FILE)
    proc = kstream(
        "run", f"{job_file}:job", "-p", f"input={src}", "-p", f"output={dst}",
        "--bootstrap-servers", bootstrap, "--workers", "4", "--job-name", name,
        "--state-dir", str(tmp_path / "state"), "--checkpoint-interval", "0.5",
        "--liveness-timeout", "4",
    )  # fmt: skip

    def completed() -> int:
        return sum(m["type"] == "complete" for m in read_history(bootstrap, name))

    try:
        wait_for(lambda: completed() >= 2, 120, "two checkpoints")
        os.kill(proc.pid, signal.SIGSTOP)
        # The fault itself: the runner stays stopped three liveness timeouts long.
        time.sleep(12)
        os.kill(proc.pid, signal.SIGCONT)
        before = completed()
        wait_for(lambda: completed() >= before + 2, 120, "checkpoints after the pause")
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert "the runner itself did not run for" in stderr
    assert "silent for more than" not in stderr
    assert "recovery:" not in stderr
    # One line per event: every line of the console is a `kstream:` line.
    assert all(line.startswith("kstream: ") for line in stderr.splitlines()), stderr
