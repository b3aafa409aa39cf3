"""Checkpoints that keep timing out fail the job over.

A worker's heartbeats come from a thread, so a subtask stuck for good in user
code keeps its worker "alive" while every checkpoint times out: nothing was
committed again and exactly-once output stalled for ever. After
`--tolerable-checkpoint-timeouts` timeouts in a row the job now rolls back, and
the worker whose subtask never acked is killed and replaced. A call that never
returns is named (subtask, function, record, where it waits), and when it sticks
again after that rollback the job fails with its line instead of looping.
"""

from __future__ import annotations

import re
import signal
from collections import Counter
from pathlib import Path

import pytest
from test_cli_run import kstream, wait_for

from kstream.infra.admin import Admin
from kstream.runtime.control import read_history
from kstream.testing import produce, read_all, unique_name

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

JOB_FILE = Path(__file__).with_name("stuck_record_job.py")


def recoveries(bootstrap: str, name: str) -> list[str]:
    """The reasons of the job's rollbacks (its start excluded)."""
    reasons = [m["reason"] for m in read_history(bootstrap, name) if m["type"] == "recover"]
    return reasons[1:]


def test_a_subtask_stuck_in_user_code_fails_the_job_over_and_it_catches_up(
    bootstrap: str, tmp_path: Path
) -> None:
    src, dst, name = unique_name("in"), unique_name("out"), unique_name("stuck")
    Admin(bootstrap).create_topics({src: 2, dst: 2})
    # Partition 1 is read by subtask s0-1, which runs on worker w1 (of two).
    lines = {p: [f"p{p} line {i}" for i in range(300)] for p in (0, 1)}
    lines[1][150] = "stuck"
    for p, part in lines.items():
        produce(bootstrap, src, [(None, line.encode()) for line in part], partition=p)
    marker = tmp_path / "stuck-once"
    proc = kstream(
        "run", f"{JOB_FILE}:job", "-p", f"name={name}", "-p", f"input={src}",
        "-p", f"output={dst}", "-p", f"marker={marker}",
        "--bootstrap-servers", bootstrap, "--workers", "2",
        "--state-dir", str(tmp_path / "state"), "--checkpoint-interval", "0.5",
        "--checkpoint-timeout", "5", "--tolerable-checkpoint-timeouts", "1",
    )  # fmt: skip
    expected = Counter(line.upper() for part in lines.values() for line in part)

    def output() -> Counter[str]:
        return Counter(r.value.decode() for r in read_all(bootstrap, dst) if r.value is not None)

    try:
        wait_for(marker.exists, 120, "the worker to get stuck on its line")
        wait_for(lambda: recoveries(bootstrap, name), 120, "the job to fail over")
        wait_for(lambda: output() == expected, 180, "every line's output once")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr
    # The rollback names the checkpoint, the count and the subtask that never acked
    # (on a loaded machine a slow checkpoint could add a rollback of its own).
    reasons = recoveries(bootstrap, name)
    # (A reason may go on with the stuck call's line, if the watchdog saw it first.)
    stuck = re.compile(
        r"checkpoint \d+ not complete within 5s: timeout 2 in a row, at most 1 tolerated; "
        r"never acked by s0-1 \(on w1\)(; s0-1: \S*work\(\) .*)?"
    )
    assert any(stuck.fullmatch(r) for r in reasons), reasons
    assert (
        "worker w1 ran subtasks that never acked checkpoints timing out in a row: "
        "killed and restarted"
    ) in stderr, stderr
    # Exactly once, the stuck line's too: nothing lost, nothing repeated.
    assert output() == expected


def test_a_call_that_never_returns_is_named_and_fails_the_job_instead_of_looping(
    bootstrap: str, tmp_path: Path
) -> None:
    """The line "stuck" blocks every process that meets it: the job used to roll back,
    replace the worker and meet it again for ever, naming neither record nor function.
    The watchdog names subtask, function, record and where it waits; when the same call
    sticks again after the rollback it caused, the job fails with that line."""
    src, dst, name = unique_name("in"), unique_name("out"), unique_name("stuck-always")
    Admin(bootstrap).create_topics({src: 2, dst: 2})
    lines = {p: [f"p{p} line {i}" for i in range(300)] for p in (0, 1)}
    lines[1][150] = "stuck"
    for p, part in lines.items():
        produce(bootstrap, src, [(None, line.encode()) for line in part], partition=p)
    marker = tmp_path / "stuck-once"
    proc = kstream(
        "run", f"{JOB_FILE}:job", "-p", f"name={name}", "-p", f"input={src}",
        "-p", f"output={dst}", "-p", f"marker={marker}", "-p", "always=1",
        "--bootstrap-servers", bootstrap, "--workers", "2",
        "--state-dir", str(tmp_path / "state"), "--checkpoint-interval", "0.5",
        "--checkpoint-timeout", "8", "--tolerable-checkpoint-timeouts", "1",
    )  # fmt: skip
    try:
        wait_for(lambda: proc.poll() is not None, 300, "the job to fail")
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1, stderr  # a failed job
    assert "Traceback" not in stderr
    # Subtask s0-1 reads partition 1; the line is its record 150.
    call = (
        rf"s0-1: job\.<locals>\.work\(\) \(stuck_record_job\.py:\d+\) has not returned for 10s on "
        rf"\('stuck'\) from {re.escape(src)}\[1\]@150; stuck at threading\.py:\d+ in wait"
    )
    failed = re.compile(
        rf"kstream: failed: {call}; stuck again after the rollback it caused "
        r"\(2 checkpoints timed out in a row\): the job fails rather than roll back for ever"
    )
    assert any(failed.fullmatch(line) for line in stderr.splitlines()), stderr
    # Told when first seen, as it happened (once per call and worker process).
    assert re.search(rf"worker w1: {call}", stdout + stderr), stdout + stderr
    # At least one rollback gave the job (and a new process) another chance; no loop.
    reasons = recoveries(bootstrap, name)
    assert 1 <= len(reasons) <= 3, reasons
