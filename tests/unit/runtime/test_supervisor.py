"""`kstream.runtime.supervisor`: real child processes, started, watched and stopped."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kstream.errors import AlreadyRunningError
from kstream.runtime.lock import ProcessLock, worker_lock_path
from kstream.runtime.supervisor import MAX_RESTARTS, RESTART_WINDOW_S, Supervisor


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_exits_report_each_exited_worker_with_its_code_and_output_goes_to_its_log(
    tmp_path: Path,
) -> None:
    codes = {0: 0, 1: 3}
    sup = Supervisor(
        "j",
        tmp_path / "j",
        lambda i: python(f"import os; print(os.environ['WHO'], {i}); raise SystemExit({codes[i]})"),
        {"WHO": "worker"},
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
    sup = Supervisor("j", tmp_path / "j", lambda i: python("import time; time.sleep(600)"), {})
    sup.spawn(0)
    assert list(sup.pids()) == [0]
    assert list(sup.exits()) == []
    sup.stop()
    assert sup.pids() == {}
    assert [code for _, code in sup.exits()] == [-15]  # SIGTERM, within the grace period


def test_restarts_beyond_the_budget_within_the_window_are_refused(tmp_path: Path) -> None:
    sup = Supervisor("j", tmp_path / "j", lambda i: [], {})
    assert all(sup.restart_allowed(float(t)) for t in range(MAX_RESTARTS))
    assert not sup.restart_allowed(float(MAX_RESTARTS))
    # Restarts older than the window no longer count.
    assert sup.restart_allowed(MAX_RESTARTS + RESTART_WINDOW_S)


def test_a_worker_locked_by_another_process_is_not_started(tmp_path: Path) -> None:
    sup = Supervisor("j", tmp_path / "j", lambda i: [], {})
    sup.check_free(0)  # free: no error, lock released again
    held = ProcessLock(worker_lock_path(tmp_path / "j", 0), "worker 0 of job j")
    held.acquire()
    try:
        with pytest.raises(AlreadyRunningError):
            sup.check_free(0)
    finally:
        held.release()
