"""Exclusive ownership of a job's state directory: one runner per job, one process per worker.

`ProcessLock.acquire` takes an exclusive `fcntl.flock` on a file and writes the
owner (pid, host, start time, role) into it. The kernel releases the lock when
the process dies, however it dies, so a SIGKILLed runner or worker never leaves
a stale lock behind, and the supervisor's replacement of a dead worker finds
the lock free. A second process asking for a held lock is refused with
`AlreadyRunningError` naming the holder.

Scope: processes that share the state directory's file system (local disks,
and NFS with working lock support). Two runners of the same job name with
*different* state directories are not caught here.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

from kstream.errors import AlreadyRunningError

__all__ = ["Owner", "ProcessLock", "runner_lock_path", "worker_lock_path"]


def runner_lock_path(job_dir: Path) -> Path:
    """The lock of the job's coordinator (`kstream run`) in `<state-dir>/<job>`."""
    return job_dir / "runner.lock"


def worker_lock_path(job_dir: Path, index: int) -> Path:
    """The lock of worker `index` of the job: two processes never run the same index."""
    return job_dir / f"worker-{index}.lock"


@dataclass(frozen=True, slots=True)
class Owner:
    """Who holds a lock, as written into the lock file."""

    role: str
    pid: int
    host: str
    started: float

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started))
        return f"{self.role} pid {self.pid} on {self.host}, started {when}"


class ProcessLock:
    """An exclusive lock on `path`, held by this process until `release()` or its death."""

    def __init__(self, path: Path, role: str) -> None:
        self.path = path
        self.role = role
        self._file: IO[str] | None = None

    def acquire(self) -> None:
        """Take the lock or raise `AlreadyRunningError` naming its holder. Never waits."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # "a+": opening must not truncate the holder's description before we own the lock.
        f = self.path.open("a+")
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = _describe(f.read())
            f.close()
            raise AlreadyRunningError(
                f"{self.role} is already running ({holder}; lock {self.path}): "
                "stop it first, or use another --job-name or --state-dir"
            ) from None
        owner = Owner(self.role, os.getpid(), socket.gethostname(), time.time())
        f.seek(0)
        f.truncate()
        f.write(json.dumps(asdict(owner)))
        f.flush()
        self._file = f

    def release(self) -> None:
        if self._file is not None:
            # Closing the descriptor drops the flock.
            self._file.close()
            self._file = None


def _describe(text: str) -> str:
    try:
        return Owner(**json.loads(text)).describe()
    except (ValueError, TypeError):
        # The holder is between taking the lock and writing its name.
        return "owner still starting"
