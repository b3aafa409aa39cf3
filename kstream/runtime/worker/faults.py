"""Fault injection: `KSTREAM_FAULT=POINT@CHECKPOINT[,POINT@CHECKPOINT...]`.

A worker that reaches the named protocol point on the given checkpoint id
kills itself with SIGKILL, as a crash would (no cleanup, no flush). Points:

==========================  ===================================================
``aligning``                some barriers of the checkpoint arrived, not all
``overflowed``              aligning, a blocked channel outgrew the hold
                            (``--alignment-hold-bytes``) and was paused; what
                            was dropped of it not yet read again
``snapshotting``            during the local snapshot
``pre-committed``           after the sinks' pre-commit, before the ack
``recording``               a snapshot that records channel state taken
                            (unaligned, or a loop head's; barriers forwarded),
                            its channel state not yet recorded
``completed-before-commit`` checkpoint complete, before the sinks committed it
``committed``               right after the sinks' commit
==========================  ===================================================

Unset, it does nothing. Meant for tests and for anyone verifying kstream.

`KSTREAM_FAULT_FILE=PATH` arms points from a file instead, in the same syntax
(items separated by commas or newlines), read again whenever its size or
modification time changed: a fault campaign arms a point in workers that are
already running, or that a supervisor restarts, by rewriting the file. A
missing file arms nothing. A worker that dies by an armed point first appends
``POINT@CHECKPOINT PID`` to ``PATH.fired``, so the campaign knows it fired.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass, field
from pathlib import Path

from kstream.errors import ConfigurationError

__all__ = ["FAULT_FILE_ENV", "POINTS", "FaultFile", "Faults"]

#: Names the file a running worker reads its armed points from.
FAULT_FILE_ENV = "KSTREAM_FAULT_FILE"

POINTS = frozenset(
    {
        "aligning",
        "overflowed",
        "snapshotting",
        "pre-committed",
        "recording",
        "completed-before-commit",
        "committed",
    }
)


@dataclass(frozen=True, slots=True)
class Faults:
    """The set of (point, checkpoint) at which this process dies, and the file that adds to it."""

    at: frozenset[tuple[str, int]] = frozenset()
    file: FaultFile | None = None

    @classmethod
    def parse(cls, spec: str) -> Faults:
        at = set()
        for item in filter(None, (s.strip() for s in spec.replace("\n", ",").split(","))):
            point, sep, n = item.partition("@")
            # isdecimal, not isdigit: "²" is a digit that int() refuses.
            if not sep or point not in POINTS or not n.isdecimal():
                raise ConfigurationError(
                    f"KSTREAM_FAULT item {item!r} must be POINT@CHECKPOINT with POINT one of "
                    + ", ".join(sorted(POINTS))
                )
            at.add((point, int(n)))
        return cls(frozenset(at))

    @classmethod
    def from_env(cls) -> Faults:
        armed = cls.parse(os.environ.get("KSTREAM_FAULT", "")).at
        path = os.environ.get(FAULT_FILE_ENV)
        return cls(armed, FaultFile(Path(path)) if path else None)

    def hit(self, point: str, checkpoint: int) -> None:
        """SIGKILL this process if (point, checkpoint) is armed."""
        armed = (point, checkpoint) in self.at
        if self.file is not None and (point, checkpoint) in self.file.armed():
            self.file.record_fired(point, checkpoint)
            armed = True
        if armed:
            os.kill(os.getpid(), signal.SIGKILL)


@dataclass(slots=True)
class FaultFile:
    """The points armed in `path`, re-read when the file changed (cached by size and mtime).

    A file that cannot be parsed arms nothing: a half-written file read at the
    wrong moment must not stop a worker, only fail to kill it this time.
    """

    path: Path
    _seen: tuple[int, int] | None = None
    _armed: frozenset[tuple[str, int]] = field(default_factory=frozenset)

    def armed(self) -> frozenset[tuple[str, int]]:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return frozenset()
        if (st.st_mtime_ns, st.st_size) != self._seen:
            self._seen = (st.st_mtime_ns, st.st_size)
            try:
                self._armed = Faults.parse(self.path.read_text()).at
            except (ConfigurationError, OSError, UnicodeDecodeError):
                self._armed = frozenset()
        return self._armed

    def record_fired(self, point: str, checkpoint: int) -> None:
        with self.path.with_name(self.path.name + ".fired").open("a") as f:
            f.write(f"{point}@{checkpoint} {os.getpid()}\n")
