"""A worker started by a runner dies with it.

A runner that is SIGKILLed cannot stop its workers; left running, they would
keep writing for a coordinator that is gone, hold their worker locks (so the
restarted runner refuses to start), and join whatever generation the next
runner opens. So a runner tells each worker it spawns its own pid
(`RUNNER_PID_ENV`), and the worker

* on Linux asks the kernel for SIGKILL when its parent dies
  (``prctl(PR_SET_PDEATHSIG)``, through ctypes: no compiled dependency);
* everywhere checks at start-up, and then with every heartbeat, that its
  parent is still that runner (`runner_gone`): an orphan is re-parented, so
  its ``getppid()`` changes.

SIGKILL, not a clean stop: without a coordinator nothing the worker would do
on the way out can be completed, and the restarted runner rolls the job back
to its latest checkpoint as after any crash. A worker started by hand
(``kstream worker`` with ``--no-spawn``) has no such variable and is left alone.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys

__all__ = ["RUNNER_PID_ENV", "die_with_runner", "runner_gone", "runner_pid"]

#: The environment variable a runner sets, for each worker it spawns, to its pid.
RUNNER_PID_ENV = "KSTREAM_RUNNER_PID"
#: From <linux/prctl.h>.
_PR_SET_PDEATHSIG = 1


def runner_pid() -> int | None:
    """The pid of the runner that spawned this process, if one did."""
    value = os.environ.get(RUNNER_PID_ENV, "")
    return int(value) if value.isdecimal() else None


def runner_gone(pid: int | None) -> bool:
    """True if this process was spawned by runner `pid` and that runner is no longer its parent."""
    return pid is not None and os.getppid() != pid


def die_with_runner(pid: int | None) -> None:
    """Arrange to be SIGKILLed when runner `pid` dies; die now if it already has."""
    if pid is None:
        return
    if sys.platform == "linux":
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    # Checked after arming: a runner that died before the prctl is caught here.
    if runner_gone(pid):
        os.kill(os.getpid(), signal.SIGKILL)
