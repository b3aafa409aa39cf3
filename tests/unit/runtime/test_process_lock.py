"""`kstream.runtime.lock`: one holder at a time, named in the refusal, freed when it dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from kstream.errors import AlreadyRunningError
from kstream.runtime.lock import ProcessLock

HOLD = """
import sys
from pathlib import Path
from kstream.runtime.lock import ProcessLock
lock = ProcessLock(Path(sys.argv[1]), "job j")
lock.acquire()
print("held", flush=True)
sys.stdin.read()
"""


def test_a_second_holder_is_refused_with_the_first_ones_name(tmp_path: Path) -> None:
    first = ProcessLock(tmp_path / "j" / "runner.lock", "job j")
    first.acquire()
    with pytest.raises(
        AlreadyRunningError, match=rf"job j is already running \(job j pid {os.getpid()} on "
    ):
        ProcessLock(tmp_path / "j" / "runner.lock", "job j").acquire()
    first.release()
    again = ProcessLock(tmp_path / "j" / "runner.lock", "job j")
    again.acquire()
    again.release()


def test_a_killed_holder_leaves_no_stale_lock(tmp_path: Path) -> None:
    path = tmp_path / "runner.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None
    assert holder.stdout.readline() == "held\n"
    with pytest.raises(AlreadyRunningError, match=f"pid {holder.pid} "):
        ProcessLock(path, "job j").acquire()
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    assert holder.stdin is not None
    holder.stdin.close()
    holder.stdout.close()
    lock = ProcessLock(path, "job j")
    lock.acquire()
    lock.release()
