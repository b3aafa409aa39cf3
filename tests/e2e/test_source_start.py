"""A source that starts at its topic's end ("latest") keeps, through a recovery, the
place it started from: what arrived while the job was down is read, once (real
broker, `kstream run` killed whole)."""

from __future__ import annotations

from pathlib import Path

import pytest
from job_runs import run_cli, sigkill_whole, wait_running
from test_cli_run import JOB_FILE
from test_job_safety import caught_up, lines, truth

from kstream.infra.admin import Admin
from kstream.runtime.control import read_history
from kstream.testing import produce, unique_name

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

LATEST_JOB = JOB_FILE.replace(
    'KafkaSource(params["input"])', 'KafkaSource(params["input"], start="latest")'
)


def _write(bootstrap: str, topic: str, text: list[str], partition: int) -> None:
    produce(bootstrap, topic, [(None, line.encode()) for line in text], partition=partition)


def test_a_latest_source_resumed_after_a_kill_reads_what_arrived_while_it_was_down(
    bootstrap: str, tmp_path: Path
) -> None:
    assert LATEST_JOB != JOB_FILE
    run = unique_name("latest")
    src, dst, name = f"{run}-in", f"{run}-out", f"lt-{run}"
    Admin(bootstrap).create_topics({src: 2, dst: 2})
    job_file = tmp_path / "wc.py"
    job_file.write_text(LATEST_JOB)
    params = {"input": src, "output": dst}
    state = tmp_path / "state"
    # Before the job's first start: "latest" leaves these out.
    _write(bootstrap, src, lines(30, salt=1), 0)
    _write(bootstrap, src, lines(30, salt=2), 1)

    def started() -> bool:
        return any(m["type"] == "complete" for m in read_history(bootstrap, name))

    first = run_cli(bootstrap, f"{job_file}:job", params, name=name, workers=1, state=state)
    wait_running(first, started, "a first completed checkpoint")
    # Read, output and checkpointed while partition 1 stays silent: the checkpoint
    # that covers this holds where partition 1 was started.
    read = lines(10, salt=3)
    _write(bootstrap, src, read, 0)
    wait_running(first, lambda: caught_up(bootstrap, dst, truth(read)), "the first lines counted")
    sigkill_whole(first, name)
    # Arrived after the first start, while the job was down.
    meanwhile = lines(12, salt=4)
    _write(bootstrap, src, meanwhile[:6], 1)
    _write(bootstrap, src, meanwhile[6:], 0)
    second = run_cli(bootstrap, f"{job_file}:job", params, name=name, workers=1, state=state)
    try:
        expected = truth(read + meanwhile)
        wait_running(
            second, lambda: caught_up(bootstrap, dst, expected), "the lines of the downtime"
        )
    finally:
        if second.poll() is None:
            sigkill_whole(second, name)
