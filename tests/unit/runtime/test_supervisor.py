"""`kstream.runtime.runner.supervisor`: real child processes, started, watched and stopped."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from kstream.errors import AlreadyRunningError
from kstream.runtime.failure import Failure
from kstream.runtime.lock import ProcessLock, worker_lock_path
from kstream.runtime.runner.supervisor import Supervisor


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


#: A stand-in for ``kstream worker --standby``: reads the job line, then the line
#: naming its index, log and configuration, then writes to that log (as the worker
#: does) and runs `BODY` with `i` set. The end of stdin without a line: exit 0.
STANDBY = """
import json, os, sys
assert sys.stdin.readline() == "job\\n"
line = sys.stdin.readline()
if not line:
    raise SystemExit(0)
told = json.loads(line)
assert told["config"] == {{"run": 1}}
i, log = told["index"], told["log"]
fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
os.dup2(fd, 1)
{body}
"""


def CONFIG() -> str:  # noqa: N802 (stands for the runner's configuration)
    return '{"run": 1}'


def standby(body: str) -> list[str]:
    return python(STANDBY.format(body=body))


def supervisor(tmp_path: Path, code: str) -> Supervisor:
    """A supervisor of job "j" whose standbys run `code` once told their index."""
    return Supervisor("j", tmp_path / "j", lambda: standby(code), {}, job_ref="job", config=CONFIG)


def test_exits_report_each_exited_worker_with_its_code_and_output_goes_to_its_log(
    tmp_path: Path,
) -> None:
    sup = Supervisor(
        "j",
        tmp_path / "j",
        lambda: standby("print(os.environ['WHO'], i); raise SystemExit({0: 0, 1: 3}[i])"),
        {"WHO": "worker"},
        job_ref="job",
        config=CONFIG,
    )
    sup.spawn(0)
    sup.spawn(1)
    for proc in sup.procs.values():
        proc.wait()
    assert sorted(sup.exits()) == [(0, 0), (1, 3)]
    assert sup.pids() == {}
    sup.stop()
    assert sup.log_path(1).read_text() == "worker 1\n"


def test_stop_ends_running_workers(tmp_path: Path) -> None:
    sup = supervisor(tmp_path, "import time; time.sleep(600)")
    sup.spawn(0)
    assert list(sup.pids()) == [0]
    assert list(sup.exits()) == []
    sup.stop()
    assert sup.pids() == {}
    assert [code for _, code in sup.exits()] == [-15]  # SIGTERM, within the grace period


def test_a_prestarted_standby_becomes_the_worker_of_its_index(tmp_path: Path) -> None:
    sup = supervisor(tmp_path, "print('worker', i)")
    sup.prestart(range(2))
    started = {i: p.pid for i, p in sup._waiting.items()}
    assert sup.pids() == {}  # not workers until told their index
    sup.spawn(1)
    sup.spawn(0)
    assert {i: p.pid for i, p in sup.procs.items()} == started
    for proc in sup.procs.values():
        proc.wait()
    sup.stop()
    assert sup.log_path(0).read_text() == "worker 0\n"
    assert sup.log_path(1).read_text() == "worker 1\n"


def test_the_spare_replaces_the_next_worker_started_and_a_new_spare_follows(
    tmp_path: Path,
) -> None:
    sup = supervisor(tmp_path, "import time; time.sleep(600)")
    sup.keep_spare()
    assert sup.spare is not None
    spare = sup.spare.pid
    sup.keep_spare()  # alive: kept, not doubled
    assert sup.spare.pid == spare
    sup.spawn(0)
    assert sup.pids() == {0: spare}
    assert sup.spare is None
    sup.keep_spare()
    assert sup.spare is not None
    assert sup.spare.pid != spare
    sup.stop()


def test_a_dead_spare_is_not_a_worker_and_is_replaced(tmp_path: Path) -> None:
    sup = supervisor(tmp_path, "import time; time.sleep(600)")
    sup.keep_spare()
    assert sup.spare is not None
    dead = sup.spare
    dead.kill()
    dead.wait()
    assert list(sup.exits()) == []  # a spare's death is no worker's
    sup.spawn(0)  # not given to the dead spare
    assert sup.pids()[0] != dead.pid
    sup.keep_spare()
    assert sup.spare is not None
    assert sup.spare.pid not in (dead.pid, sup.pids()[0])
    sup.stop()


def test_stop_ends_standbys_never_told_their_index(tmp_path: Path) -> None:
    sup = supervisor(tmp_path, "raise SystemExit(9)")
    sup.prestart(range(2))
    sup.keep_spare()
    standbys = [*sup._waiting.values(), sup.spare]
    sup.stop()
    # The end of stdin, not a signal: they exit on their own, never having been workers.
    assert [p.returncode for p in standbys] == [0, 0, 0]


def test_a_worker_locked_by_another_process_is_not_started(tmp_path: Path) -> None:
    sup = Supervisor("j", tmp_path / "j", list, {}, job_ref="job", config=CONFIG)
    sup.check_free(0)  # free: no error, lock released again
    held = ProcessLock(worker_lock_path(tmp_path / "j", 0), "worker 0 of job j")
    held.acquire()
    try:
        with pytest.raises(AlreadyRunningError):
            sup.check_free(0)
    finally:
        held.release()


#: Reports a failure as a worker does (`kstream.runtime.failure.write_cause`), then exits.
REPORTING = """
import os, sys
from pathlib import Path
from kstream.runtime.failure import CAUSE_DIR_ENV, Failure, write_cause
write_cause(Path(os.environ[CAUSE_DIR_ENV]), Failure("{cause}", {deterministic}, "{log}"))
sys.exit(4)
"""


def test_failure_is_what_the_process_reported_else_its_exit_code(tmp_path: Path) -> None:
    def command() -> list[str]:
        bodies = [
            REPORTING.format(cause="import failed", deterministic=True, log=""),
            "raise SystemExit(3)",  # EXIT_FATAL without a report: could not write it
            "raise SystemExit(4)",
        ]
        return python(bodies[len(started)])

    started: list[int] = []
    sup = Supervisor("j", tmp_path / "j", lambda: command(), {}, job_ref="job", config=CONFIG)
    for i in range(3):
        sup.spawn(i)
        started.append(i)
        sup.procs[i].wait()
    # Not told its index (it died loading): its output went to the standbys' log.
    assert sup.failure(0) == Failure("import failed", True, str(sup.standby_log_path()))
    assert sup.failure(1).deterministic
    assert sup.failure(1).cause == "exited with code 3"
    assert sup.failure(2) == Failure("exited with code 4", False, str(sup.standby_log_path()))
    sup.stop()


def test_a_killed_worker_is_a_transient_failure_naming_its_log(tmp_path: Path) -> None:
    sup = supervisor(tmp_path, "import time; time.sleep(600)")
    sup.spawn(0)
    # The worker's log exists once the standby read its index.
    deadline = time.monotonic() + 30
    while not sup.log_path(0).exists() and time.monotonic() < deadline:
        time.sleep(0.05)  # polling a child process's file; no event to wait on
    assert sup.kill(0)
    assert sup.failure(0) == Failure("killed by signal 9", False, str(sup.log_path(0)))
    sup.stop()
