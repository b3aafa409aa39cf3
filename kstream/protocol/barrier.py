"""Barrier alignment: the Chandy-Lamport marker rule for one subtask, as a pure state machine.

A subtask reads several input channels (Kafka partitions, each one FIFO stream
from one upstream subtask). Checkpoint barriers flow in them with the records.
For checkpoint n the subtask must snapshot its state after processing every
record that precedes barrier n on *every* channel and none that follows it:

* barrier n arrives on channel c → c is blocked: records that follow it are not
  processed (the worker drops them and re-reads c from just after the barrier
  once it is unblocked - the log holds the data, nothing is buffered);
* barrier n has arrived on every channel → take the snapshot (with, per
  channel, the offset just after barrier n), then unblock every channel.

`Aligner.handle` takes one event and returns the actions the worker must carry
out, in order. It does no I/O, reads no clock and never raises on input from
the network: stale or foreign records and barriers become `Drop` actions.
Events that a correct worker cannot produce (a record on an unknown channel)
raise `ProtocolError`.

**The fast path.** Consulting the aligner for every record would cost a call
and an allocation per record. `Aligner.open_generation` is the one rule for
skipping it: a record of that generation is processed without an event (and
`handle` would answer `Process` for it); any other record, and every record
while an alignment is in progress, goes through `handle`. The property tests
drive both paths side by side and require the same answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import assert_never

from kstream.errors import ProtocolError

__all__ = [
    "NO_GENERATION",
    "AbandonAlignment",
    "Action",
    "Aligner",
    "BarrierArrived",
    "Block",
    "Channel",
    "CheckpointAborted",
    "Drop",
    "Event",
    "Process",
    "RecordArrived",
    "TakeSnapshot",
    "Unblock",
]


@dataclass(frozen=True, slots=True, order=True)
class Channel:
    """One FIFO channel: a partition of an internal topic."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}[{self.partition}]"


# -- events ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RecordArrived:
    """A data record at `offset` of `channel`, written in `generation`."""

    channel: Channel
    offset: int
    generation: int


@dataclass(frozen=True, slots=True)
class BarrierArrived:
    """Barrier `checkpoint` at `offset` of `channel`, written in `generation`."""

    channel: Channel
    offset: int
    checkpoint: int
    generation: int


@dataclass(frozen=True, slots=True)
class CheckpointAborted:
    """The coordinator gave up on `checkpoint`: stop aligning it, ignore its barriers."""

    checkpoint: int


Event = RecordArrived | BarrierArrived | CheckpointAborted

# -- actions -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Process:
    """Process the record."""


@dataclass(frozen=True, slots=True)
class Drop:
    """Skip the record or barrier; `reason` is for logs and metrics."""

    reason: str


@dataclass(frozen=True, slots=True)
class Block:
    """Stop reading `channel`; when unblocked, re-read it from `resume_offset`."""

    channel: Channel
    resume_offset: int


@dataclass(frozen=True, slots=True)
class Unblock:
    """Read `channel` again, from the `resume_offset` of its `Block`."""

    channel: Channel


@dataclass(frozen=True, slots=True)
class TakeSnapshot:
    """Every channel delivered barrier `checkpoint`: snapshot now, then forward the barrier.

    `channel_offsets` maps each input channel to the offset just after its
    barrier: where a restore from this checkpoint resumes reading.
    """

    checkpoint: int
    channel_offsets: Mapping[Channel, int]


@dataclass(frozen=True, slots=True)
class AbandonAlignment:
    """Alignment of `checkpoint` stopped unfinished (aborted or overtaken); decline it."""

    checkpoint: int


Action = Process | Drop | Block | Unblock | TakeSnapshot | AbandonAlignment

#: Matches no record's generation (generations start at 1).
NO_GENERATION = -1

_PROCESS = Process()
_DROP_BLOCKED = Drop("channel blocked for alignment; re-read after the barrier")
_DROP_GENERATION = Drop("written by another generation")
_DROP_STALE_BARRIER = Drop("barrier of a checkpoint already taken or aborted")


@dataclass(slots=True)
class Aligner:
    """Aligns barriers over a fixed set of input channels, in one generation.

    `last_checkpoint` is the checkpoint the subtask was restored from (0 for a
    fresh start): barriers up to it are stale. Create a new `Aligner` when the
    generation changes (recovery); an old one must not be reused.
    """

    channels: frozenset[Channel]
    generation: int
    last_checkpoint: int = 0
    #: Checkpoint being aligned, or None.
    aligning: int | None = field(default=None, init=False)
    #: Channel → offset after its barrier, for channels that delivered `aligning`.
    _arrived: dict[Channel, int] = field(default_factory=dict, init=False)
    #: Aborted checkpoints newer than `last_checkpoint`, whose barriers may still come.
    _aborted: set[int] = field(default_factory=set, init=False)
    #: Records of this generation may be processed without calling `handle`
    #: (see "The fast path"): `generation` while no alignment is in progress,
    #: `NO_GENERATION` (matching no record) while one is.
    open_generation: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        if not self.channels:
            raise ProtocolError("an Aligner needs at least one input channel")
        self.open_generation = self.generation

    @classmethod
    def over(cls, channels: Iterable[Channel], generation: int, last: int = 0) -> Aligner:
        return cls(frozenset(channels), generation, last)

    @property
    def blocked(self) -> frozenset[Channel]:
        """Channels currently blocked (they delivered the barrier being aligned)."""
        return frozenset(self._arrived)

    def handle(self, event: Event) -> list[Action]:
        """Feed one event; return the actions to carry out, in order."""
        match event:
            case RecordArrived():
                return [self._on_record(event)]
            case BarrierArrived():
                return self._on_barrier(event)
            case CheckpointAborted():
                return self._on_abort(event)
            case _:
                assert_never(event)

    def _check_channel(self, channel: Channel) -> None:
        if channel not in self.channels:
            raise ProtocolError(f"event on {channel}, which is not an input of this subtask")

    def _on_record(self, event: RecordArrived) -> Action:
        self._check_channel(event.channel)
        if event.generation != self.generation:
            return _DROP_GENERATION
        if event.channel in self._arrived:
            return _DROP_BLOCKED
        return _PROCESS

    def _on_barrier(self, event: BarrierArrived) -> list[Action]:
        self._check_channel(event.channel)
        n = event.checkpoint
        if event.generation != self.generation:
            return [_DROP_GENERATION]
        if event.channel in self._arrived:
            # Only possible if the worker kept reading a blocked channel.
            return [_DROP_BLOCKED]
        if n <= self.last_checkpoint or n in self._aborted:
            return [_DROP_STALE_BARRIER]
        actions: list[Action] = []
        if self.aligning is not None and n < self.aligning:
            # A channel can only carry barrier n before barrier `aligning` if the
            # current alignment began with a barrier newer than n: n is overtaken.
            return [_DROP_STALE_BARRIER]
        if self.aligning is not None and n > self.aligning:
            # This channel skipped the barrier being aligned: that checkpoint can
            # no longer be a consistent cut here. Give it up and align n instead.
            actions += self._abandon(self.aligning)
        self._set_aligning(n)
        self._arrived[event.channel] = event.offset + 1
        if len(self._arrived) < len(self.channels):
            actions.append(Block(event.channel, event.offset + 1))
            return actions
        offsets = MappingProxyType(dict(self._arrived))
        others = sorted(c for c in self._arrived if c != event.channel)
        self._finish(n)
        actions.append(TakeSnapshot(n, offsets))
        actions += [Unblock(c) for c in others]
        return actions

    def _on_abort(self, event: CheckpointAborted) -> list[Action]:
        n = event.checkpoint
        if n <= self.last_checkpoint:
            return []
        if n == self.aligning:
            return self._abandon(n)
        self._aborted.add(n)
        return []

    def _abandon(self, n: int) -> list[Action]:
        blocked = sorted(self._arrived)
        self._aborted.add(n)
        self._set_aligning(None)
        self._arrived.clear()
        return [AbandonAlignment(n), *(Unblock(c) for c in blocked)]

    def _finish(self, n: int) -> None:
        self.last_checkpoint = n
        self._set_aligning(None)
        self._arrived.clear()
        self._aborted = {a for a in self._aborted if a > n}

    def _set_aligning(self, n: int | None) -> None:
        self.aligning = n
        self.open_generation = self.generation if n is None else NO_GENERATION
