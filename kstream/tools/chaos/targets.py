"""The processes a campaign hits: the job's runner (`kstream run`) and its workers.

Linux only: a runner's workers are found as its children in ``/proc``.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import IO

__all__ = ["RunnerProcess", "alive", "children", "signal_pid"]


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of process `pid`, or None if it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name is in parentheses and may itself hold spaces or parentheses.
    fields = raw[raw.rindex(")") + 2 :].split()
    return fields[0], int(fields[1])


def alive(pid: int) -> bool:
    """True while `pid` runs (a zombie, dead but not yet reaped, is not alive)."""
    stat = _stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


def children(pid: int) -> list[int]:
    """The live child processes of `pid`."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdecimal():
            stat = _stat(int(entry.name))
            if stat is not None and stat[1] == pid and stat[0] not in ("Z", "X"):
                out.append(int(entry.name))
    return sorted(out)


def signal_pid(pid: int, sig: signal.Signals) -> bool:
    """Send `sig` to `pid`; False if it is gone."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return False
    return True


class RunnerProcess:
    """`kstream run ...` as a child process, its output appended to `log`; restartable."""

    def __init__(self, command: list[str], log: Path, env: dict[str, str]) -> None:
        self.command = command
        self.log = log
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        self._out: IO[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        if self._out is None:
            self._out = self.log.open("ab")
        self.proc = subprocess.Popen(
            self.command,
            stdin=subprocess.DEVNULL,
            stdout=self._out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **self.env},
        )
        self.starts += 1

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def exit_code(self) -> int | None:
        """The exit code once it ended (negative: killed by that signal); None while it runs."""
        return None if self.proc is None else self.proc.poll()

    def workers(self) -> list[int]:
        """The pids of its worker processes now."""
        return children(self.proc.pid) if self.running() and self.proc is not None else []

    def kill(self) -> None:
        """SIGKILL the runner, as a crash or an OOM killer would, and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self, timeout: float) -> int | None:
        """SIGTERM (a clean stop), SIGKILL after `timeout`; its exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._out is not None:
            self._out.close()
            self._out = None
        return self.proc.returncode

    def last_line(self) -> str:
        try:
            lines = self.log.read_text(errors="replace").strip().splitlines()
        except FileNotFoundError:
            return ""
        return lines[-1] if lines else ""
