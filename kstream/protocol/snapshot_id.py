"""Snapshot ids: Lamport clocks, so that any source may start a snapshot (pure, no I/O).

A snapshot id is a pair (sequence, initiator), ordered by sequence, then by
the initiator's *rank* at that sequence, and carried everywhere (control
messages, barriers, checkpoint directories, sink epochs) as one integer,
``sequence * INITIATORS + rank``, whose integer order is the pair's order.
Initiator 0 is the coordinator; source subtask i of the job (in plan order,
over all sources) is 1 + i.

**Fair ties.** When two initiators start snapshots with the same sequence,
the larger id wins (the other is declined, `kstream.protocol.initiation`).
The rank is ``initiator XOR (sequence mod INITIATORS)``, a different
permutation of the initiators at each sequence, so no initiator always wins:
of two initiators whose numbers first differ at bit h, each has the larger
id on exactly half of any 2**(h+1) consecutive sequences (never more than
2**h in a row; the coordinator and source 0 alternate), and in any
`INITIATORS` consecutive sequences every initiator ranks highest of all
once. A fixed rank (the initiator itself) let the higher-numbered of two
sources win every tie, and the other starve.

Every participant keeps the largest id it has seen (`LamportClock.observe`:
in control messages, its restored snapshot, its own snapshots) and names a
snapshot it starts with `next_after(seen, initiator)`, whose sequence is one
more than that of `seen`. So ids are unique without a central counter (at
one sequence the rank is a permutation of the initiators, and one initiator
never repeats a sequence) and grow along every causal chain.

**Ids written by earlier versions** keep their integer, hence their order:
every non-negative integer decodes to a pair that encodes back to it, and a
new id (a sequence above the largest seen) is above all of them. Plain ids
1, 2, 3, ... (the coordinator alone) decode as sequence 0, where rank and
initiator coincide, as before: (0, 3), an initiator that means nothing. Ids
of the first Lamport scheme (rank = initiator) decode to their sequence and
a permuted initiator: nothing acts on an id's initiator (it is for display),
only on its order and sequence.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from kstream.errors import ConfigurationError, ProtocolError

__all__ = [
    "COORDINATOR",
    "INITIATORS",
    "LamportClock",
    "SnapshotId",
    "next_after",
    "source_initiator",
]

#: Initiator numbers per sequence: the coordinator and up to 1023 source subtasks.
#: A power of two, so an id read in hex or binary shows its two parts.
INITIATORS = 1024
#: The coordinator's initiator number (its interval-driven checkpoints).
COORDINATOR = 0


@functools.total_ordering
@dataclass(frozen=True, slots=True)
class SnapshotId:
    """One snapshot's id: `sequence` (the Lamport time) and who started it.

    Ordered as its integer (`encode`): by sequence, then by `rank`.
    """

    sequence: int
    initiator: int

    def __post_init__(self) -> None:
        if self.sequence < 0:
            raise ProtocolError(f"snapshot sequence must be >= 0, got {self.sequence}")
        if not 0 <= self.initiator < INITIATORS:
            raise ProtocolError(
                f"snapshot initiator must be in 0..{INITIATORS - 1}, got {self.initiator}"
            )

    @property
    def rank(self) -> int:
        """Where the initiator stands among all at this sequence (larger wins a tie)."""
        return _rotated(self.initiator, self.sequence)

    def encode(self) -> int:
        """The integer carried on the wire and in storage."""
        return self.sequence * INITIATORS + self.rank

    @classmethod
    def decode(cls, checkpoint: int) -> SnapshotId:
        """The pair an integer id stands for (ids of earlier versions: see the module doc)."""
        if checkpoint < 0:
            raise ProtocolError(f"snapshot id must be >= 0, got {checkpoint}")
        sequence, rank = divmod(checkpoint, INITIATORS)
        return cls(sequence, _rotated(rank, sequence))

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, SnapshotId):
            return NotImplemented
        return self.encode() < other.encode()

    def __str__(self) -> str:
        who = "coordinator" if self.initiator == COORDINATOR else f"source {self.initiator - 1}"
        return f"{self.encode()} (sequence {self.sequence}, {who})"


def _rotated(n: int, sequence: int) -> int:
    """`n` XOR the sequence's low bits: initiator to rank and back (its own inverse)."""
    return n ^ (sequence % INITIATORS)


def next_after(seen: int, initiator: int) -> int:
    """The id `initiator` gives a snapshot it starts, having seen ids up to `seen`.

    Always larger than `seen` (0: nothing seen yet).
    """
    return SnapshotId(SnapshotId.decode(seen).sequence + 1, initiator).encode()


def source_initiator(index: int) -> int:
    """The initiator number of the job's source subtask `index` (0-based, plan order)."""
    initiator = 1 + index
    if initiator >= INITIATORS:
        raise ConfigurationError(
            f"at most {INITIATORS - 1} source subtasks can start snapshots; "
            f"source subtask {index} is one too many"
        )
    return initiator


@dataclass(slots=True)
class LamportClock:
    """The largest snapshot id a participant has seen; names the snapshots it starts."""

    seen: int = 0

    def observe(self, checkpoint: int | None) -> None:
        """An id was seen (None: the message named none)."""
        if checkpoint is not None and checkpoint > self.seen:
            self.seen = checkpoint

    def tick(self, initiator: int) -> int:
        """The id of a snapshot `initiator` starts now; it counts as seen."""
        self.seen = next_after(self.seen, initiator)
        return self.seen
