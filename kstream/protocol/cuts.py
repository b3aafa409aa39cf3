"""Where a subtask took its snapshot of a checkpoint: on a marker, or on an injection (pure).

Chandy-Lamport (seeds 000 and 001): the initiator records its state and sends
a marker on each outgoing channel; every other process records its state when
the first marker reaches it. In a job the initiator is a source subtask (or
the coordinator, which injects into every source) and a source has no input
channel, so the subtasks join a snapshot in one of four ways:

* ``started``: a source subtask started it itself (`Initiated`);
* ``injected``: a source subtask took it on a trigger read from the control
  topic (the coordinator's, or its relay of a snapshot another source
  started: no channel leads from one source to another);
* ``marker``: a channel subtask took it on the barrier of one of its input
  channels (the channel, and the upstream subtask that wrote it);
* ``timeout``: an aligned subtask whose alignment timed out took it then
  (`kstream.protocol.barrier.AlignmentTimedOut`).

Each ack carries its subtask's cut (`Acked.cut_on`, the `encode`d form), so
``kstream checkpoints`` and the seed demos show it per snapshot and subtask.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["Cut", "CutKind"]


class CutKind(enum.StrEnum):
    """How a subtask joined a snapshot."""

    STARTED = "started"
    INJECTED = "injected"
    MARKER = "marker"
    TIMEOUT = "timeout"


@dataclass(frozen=True, slots=True)
class Cut:
    """How one subtask joined one snapshot; for a marker, on which channel
    (``topic[partition]``) written by which upstream subtask."""

    kind: CutKind
    channel: str = ""
    upstream: str = ""

    @classmethod
    def marker(cls, channel: str, upstream: str) -> Cut:
        return cls(CutKind.MARKER, channel, upstream)

    def encode(self) -> str:
        """The wire form: ``started``, ``injected``, ``timeout`` or
        ``marker <upstream> <topic>[<partition>]``."""
        if self.kind is CutKind.MARKER:
            return f"{self.kind} {self.upstream} {self.channel}"
        return str(self.kind)

    @classmethod
    def parse(cls, text: str) -> Cut | None:
        """The cut `encode` wrote; None for anything else (an older writer's
        empty field, or a value this version does not know)."""
        kind, _, rest = text.partition(" ")
        try:
            k = CutKind(kind)
        except ValueError:
            return None
        if k is not CutKind.MARKER:
            return cls(k) if not rest else None
        upstream, _, channel = rest.partition(" ")
        if not upstream or not channel:
            return None
        return cls(k, channel, upstream)

    def __str__(self) -> str:
        """For a table: ``started``, ``injection``, ``marker from s1-0``, ``timeout``."""
        if self.kind is CutKind.MARKER:
            return f"marker from {self.upstream}"
        return "injection" if self.kind is CutKind.INJECTED else str(self.kind)
