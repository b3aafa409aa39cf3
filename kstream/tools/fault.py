"""Fault injection: `KSTREAM_FAULT=POINT@CHECKPOINT[,POINT@CHECKPOINT...]`.

A worker that reaches the named protocol point on the given checkpoint id
kills itself with SIGKILL, as a crash would (no cleanup, no flush). Points:

==========================  ===================================================
``aligning``                some barriers of the checkpoint arrived, not all
``snapshotting``            during the local snapshot
``pre-committed``           after the sinks' pre-commit, before the ack
``completed-before-commit`` checkpoint complete, before the sinks committed it
``committed``               right after the sinks' commit
==========================  ===================================================

Unset, it does nothing. Meant for tests and for anyone verifying kstream.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass

from kstream.errors import ConfigurationError

__all__ = ["POINTS", "Faults"]

POINTS = frozenset(
    {"aligning", "snapshotting", "pre-committed", "completed-before-commit", "committed"}
)


@dataclass(frozen=True, slots=True)
class Faults:
    """The set of (point, checkpoint) at which this process dies."""

    at: frozenset[tuple[str, int]] = frozenset()

    @classmethod
    def parse(cls, spec: str) -> Faults:
        at = set()
        for item in filter(None, (s.strip() for s in spec.split(","))):
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
        return cls.parse(os.environ.get("KSTREAM_FAULT", ""))

    def hit(self, point: str, checkpoint: int) -> None:
        """SIGKILL this process if (point, checkpoint) is armed."""
        if (point, checkpoint) in self.at:
            os.kill(os.getpid(), signal.SIGKILL)
