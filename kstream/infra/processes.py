"""Whether a pid is still the process a pid file named: for the servers kstream starts
(the broker, PostgreSQL, a Spark cluster), whose pid files outlive them."""

from __future__ import annotations

from pathlib import Path

__all__ = ["runs_with"]


def runs_with(pid: int, argument: bytes, *, within: bool = False) -> bool:
    """Process `pid` is alive and one of its command-line arguments is `argument`
    (with `within`: some argument contains it).

    False for a process that is gone, unreadable, or a zombie (state Z: it has
    exited, only its parent has not reaped it yet), and for a pid reused by
    another program, which is why a pid file is never trusted alone.
    """
    try:
        arguments = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False
    if stat.rsplit(")", 1)[-1].split()[0] == "Z":
        return False
    if within:
        return any(argument in a for a in arguments)
    return argument in arguments
