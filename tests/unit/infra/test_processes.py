"""`runs_with`: a pid file's pid is still the process it named, on real processes."""

from __future__ import annotations

import os
import subprocess
import sys

from kstream.infra.processes import runs_with

SLEEPER = "import time; print('ready', flush=True); time.sleep(60)"


def test_a_live_process_is_recognised_by_one_whole_argument() -> None:
    proc = subprocess.Popen([sys.executable, "-c", SLEEPER], stdout=subprocess.PIPE, text=True)
    try:
        # Until the child has exec'd, /proc shows the forked parent's command line.
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n"
        assert runs_with(proc.pid, SLEEPER.encode())
        assert not runs_with(proc.pid, b"time.sleep"), "a part of an argument is not one"
        assert runs_with(proc.pid, b"time.sleep", within=True)
        assert not runs_with(proc.pid, b"another-marker", within=True)
    finally:
        proc.kill()
        proc.communicate()
    assert not runs_with(proc.pid, SLEEPER.encode()), "reaped: gone"


def test_a_zombie_is_not_running() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    # Exited but not reaped: a zombie until waited for (waitid with WNOWAIT
    # blocks until it exits and leaves it unreaped).
    os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
    try:
        assert not runs_with(proc.pid, b"pass")
        assert not runs_with(proc.pid, b"pass", within=True)
    finally:
        proc.wait()
