"""The worker processes a runner starts on this machine: start, watch, stop.

Each worker is a separate OS process (`kstream worker ...`) writing to its own
log file under the job's state directory. What a worker's exit means for the
job (a rollback, a failed job) is the runner's to decide; the supervisor only
reports exits and refuses to start a
worker whose lock another process holds.

Every process starts as a *standby* (``kstream worker --standby``, nothing
else on its command line): it imports kstream, reads its first stdin line, the
job to load (`kstream.runtime.config.JobRef`, written as it starts), loads the
job module, then waits for a second line: the worker index it is to be, the
log it is to write and the run configuration (`Supervisor.assign`). Before
that it touches neither Kafka nor the state directory, so a standby can be
started before the job's generation is announced: `prestart` starts the first
workers while the runner still checks the cluster and reads the control topic,
and `keep_spare` holds one spare ready, which becomes the replacement of the
next worker that dies (a fresh process, its imports already done). A standby
whose runner goes away reads the end of its stdin and exits.

A process that fails says why in a file named after its pid in `cause_dir`
(`kstream.runtime.failure`); `failure` reads it once the process exited, with
the log the process really wrote (the standbys' log if it died before it was
told its index).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from kstream.runtime.failure import CAUSE_DIR_ENV, EXIT_FATAL, Failure, read_cause
from kstream.runtime.lock import ProcessLock, worker_lock_path
from kstream.runtime.parent import RUNNER_PID_ENV

__all__ = ["STOP_TIMEOUT_S", "Supervisor"]

#: Grace period for workers to exit on SIGTERM before they are killed.
STOP_TIMEOUT_S = 20.0


class Supervisor:
    """Worker processes of job `job_name`, state in `job_dir`, started with `command()`.

    `env` is added to this process's environment for every worker. `job_ref` is
    the first line each process reads (what job to load), `config()` the run
    configuration's JSON it reads with its index (`assign`).
    """

    def __init__(
        self,
        job_name: str,
        job_dir: Path,
        command: Callable[[], list[str]],
        env: dict[str, str],
        *,
        job_ref: str = "",
        config: Callable[[], str] = lambda: "{}",
    ) -> None:
        self.job_name = job_name
        self.job_dir = job_dir
        #: The command line of a standby (`kstream worker --standby`).
        self.command = command
        self.env = env
        self.job_ref = job_ref
        self.config = config
        #: The workers, by index: processes told their index.
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        #: Standbys started for a worker index (`prestart`), not told it yet.
        self._waiting: dict[int, subprocess.Popen[bytes]] = {}
        #: The standby kept for the next replacement (`keep_spare`).
        self.spare: subprocess.Popen[bytes] | None = None
        self._standby_log: IO[bytes] | None = None
        #: Where the processes report why they end (`kstream.runtime.failure`).
        self.cause_dir = job_dir / "causes"

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

    def standby_log_path(self) -> Path:
        """Where standbys write until told their index (imports and job loading only)."""
        return self.job_dir / "logs" / "standby.log"

    def _start_standby(self) -> subprocess.Popen[bytes]:
        path = self.standby_log_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        if self._standby_log is None:
            self._standby_log = path.open("ab")
            # Reports of an earlier run's processes: a new process may reuse a pid.
            shutil.rmtree(self.cause_dir, ignore_errors=True)
        proc = subprocess.Popen(
            self.command(),
            stdin=subprocess.PIPE,
            stdout=self._standby_log,
            stderr=subprocess.STDOUT,
            # The worker dies with this process (`kstream.runtime.parent`) and
            # reports why it ends (`kstream.runtime.failure`).
            env={
                **os.environ,
                **self.env,
                RUNNER_PID_ENV: str(os.getpid()),
                CAUSE_DIR_ENV: str(self.cause_dir),
            },
        )
        # At once: the job module loads while the runner goes on with its checks.
        assert proc.stdin is not None
        try:
            proc.stdin.write(f"{self.job_ref}\n".encode())
            proc.stdin.flush()
        except BrokenPipeError:
            pass  # it died meanwhile: `exits` reports it like any worker's death
        return proc

    def prestart(self, indices: range) -> None:
        """Start a standby for each of `indices`; `spawn` later tells it its index."""
        for index in indices:
            self._waiting[index] = self._start_standby()

    def keep_spare(self) -> None:
        """Start a spare standby unless one is alive (a dead one is replaced)."""
        if self.spare is None or self.spare.poll() is not None:
            self.spare = self._start_standby()

    def spawn(self, index: int) -> None:
        """Start worker `index` (again), its output appended to `log_path(index)`.

        A standby already started for it (`prestart`) or the spare, if alive,
        becomes the worker; else a new process is started.
        """
        proc = self._waiting.pop(index, None)
        if proc is None or proc.poll() is not None:
            proc, self.spare = self.spare, None
        if proc is None or proc.poll() is not None:
            proc = self._start_standby()
        self.procs[index] = proc
        self.assign(proc, index)

    def assign(self, proc: subprocess.Popen[bytes], index: int) -> None:
        """Tell standby `proc` it is worker `index`: a line of JSON, ``{"index", "log",
        "config"}``, the run configuration as `config()` gives it now."""
        path = self.log_path(index)
        path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps({"index": index, "log": str(path), "config": json.loads(self.config())})
        assert proc.stdin is not None
        try:
            proc.stdin.write(f"{line}\n".encode())
            proc.stdin.close()
        except BrokenPipeError:
            pass  # it died meanwhile: `exits` reports it like any worker's death

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

    def failure(self, index: int) -> Failure:
        """Why worker `index`'s process, which exited, ended: as it reported, else from
        its exit code. Its log is the file it wrote: its worker log, or the standbys'
        log if it died before it was told its index (loading the job, say).
        """
        proc = self.procs[index]
        code = proc.poll()
        assert code is not None, "asked why a running worker ended"
        found = read_cause(self.cause_dir, proc.pid)
        if found is None:
            how = f"killed by signal {-code}" if code < 0 else f"exited with code {code}"
            # Unreported (killed, crashed): the worker log if it ever was told its index.
            log = self.log_path(index)
            log = log if log.exists() else self.standby_log_path()
            # A failure that could not be written down still exits with its code.
            return Failure(how, code == EXIT_FATAL, str(log))
        if not found.log:
            return dataclasses.replace(found, log=str(self.standby_log_path()))
        return found

    def stop(self) -> None:
        """Stop every worker (SIGTERM, then SIGKILL after `STOP_TIMEOUT_S`); close the logs."""
        standbys = [*self._waiting.values(), *([self.spare] if self.spare else [])]
        for proc in standbys:
            # Not a worker yet: the end of its stdin tells it to exit.
            if proc.stdin is not None and not proc.stdin.closed:
                proc.stdin.close()
        everyone = [*self.procs.values(), *standbys]
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for proc in everyone:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._waiting.clear()
        self.spare = None
        if self._standby_log is not None:
            self._standby_log.close()
            self._standby_log = None
