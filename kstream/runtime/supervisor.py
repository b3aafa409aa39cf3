"""The worker processes a runner starts on this machine: start, watch, restart budget, stop.

Each worker is a separate OS process (`kstream worker ...`) writing to its own
log file under the job's state directory. What a worker's exit means for the
job (a rollback, a failed job) is the runner's to decide; the supervisor only
reports exits, counts restarts against `MAX_RESTARTS`, and refuses to start a
worker whose lock another process holds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from kstream.runtime.lock import ProcessLock, worker_lock_path
from kstream.runtime.parent import RUNNER_PID_ENV

__all__ = ["MAX_RESTARTS", "RESTART_WINDOW_S", "STOP_TIMEOUT_S", "Supervisor"]

#: A worker restarted more often than this within `RESTART_WINDOW_S` fails the job.
MAX_RESTARTS = 20
RESTART_WINDOW_S = 120.0
#: Grace period for workers to exit on SIGTERM before they are killed.
STOP_TIMEOUT_S = 20.0


class Supervisor:
    """Worker processes of job `job_name`, state in `job_dir`, started with `command(index)`.

    `env` is added to this process's environment for every worker.
    """

    def __init__(
        self,
        job_name: str,
        job_dir: Path,
        command: Callable[[int], list[str]],
        env: dict[str, str],
    ) -> None:
        self.job_name = job_name
        self.job_dir = job_dir
        self.command = command
        self.env = env
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self._logs: dict[int, IO[bytes]] = {}
        self._restart_times: list[float] = []

    def log_path(self, index: int) -> Path:
        """Where worker `index` writes its output (appended to across restarts)."""
        return self.job_dir / "logs" / f"worker-{index}.log"

    def check_free(self, index: int) -> None:
        """Raise `AlreadyRunningError` if a process not started here runs worker `index`.

        Our own worker is dead when this runs (the kernel dropped its lock), so a
        held lock is someone's `kstream worker` started by hand; restarting ours
        into it would only fail again and again.
        """
        probe = ProcessLock(
            worker_lock_path(self.job_dir, index), f"worker {index} of job {self.job_name}"
        )
        probe.acquire()
        probe.release()

    def spawn(self, index: int) -> None:
        """Start worker `index` (again), its output appended to `log_path(index)`."""
        path = self.log_path(index)
        path.parent.mkdir(parents=True, exist_ok=True)
        if index not in self._logs:
            self._logs[index] = path.open("ab")
        self.procs[index] = subprocess.Popen(
            self.command(index),
            stdin=subprocess.DEVNULL,
            stdout=self._logs[index],
            stderr=subprocess.STDOUT,
            # The worker dies with this process (`kstream.runtime.parent`).
            env={**os.environ, **self.env, RUNNER_PID_ENV: str(os.getpid())},
        )

    def kill(self, index: int) -> bool:
        """SIGKILL worker `index` if it runs; True if it did. Returns once it is gone."""
        proc = self.procs.get(index)
        if proc is None or proc.poll() is not None:
            return False
        proc.kill()
        proc.wait()
        return True

    def pids(self) -> dict[int, int]:
        """The process ids of the workers running now, by worker index."""
        return {i: p.pid for i, p in self.procs.items() if p.poll() is None}

    def exits(self) -> Iterator[tuple[int, int]]:
        """The workers that exited, as (index, exit code; negative: killed by that signal).

        Lazy: a caller that stops early leaves the other workers unexamined, and
        one that restarts a worker while iterating is not told about it again.
        """
        for index, proc in list(self.procs.items()):
            code = proc.poll()
            if code is not None:
                yield index, code

    def restart_allowed(self, now: float) -> bool:
        """Count a restart at `now`; False if that makes too many within the window."""
        self._restart_times = [t for t in self._restart_times if now - t < RESTART_WINDOW_S]
        self._restart_times.append(now)
        return len(self._restart_times) <= MAX_RESTARTS

    def stop(self) -> None:
        """Stop every worker (SIGTERM, then SIGKILL after `STOP_TIMEOUT_S`); close the logs."""
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for proc in self.procs.values():
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for f in self._logs.values():
            f.close()
