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

**Unaligned checkpoints** (:ref:`barriers-unaligned`). In
`Alignment.UNALIGNED` mode nothing is blocked: the FIRST barrier n takes the
snapshot (`TakeSnapshot` with the channels still `recording`), every other
channel c records its channel state - the offset range from its position at
the snapshot to its barrier n - and once every channel delivered n,
`ChannelStateComplete` gives the final offsets and replay windows. In aligned
mode, `AlignmentTimedOut` switches the alignment in progress to that rule.
Recording never closes the fast path: every record is processed.

**Loop channels** (:ref:`barriers-cycles`). A loop head's feedback
channels are `logged`: barrier n comes back on them only after the head
forwarded it, so waiting for it would never end. In aligned mode the head
aligns its other channels only; once barrier n arrived on all of them it
snapshots with the logged channels `recording` from their positions, exactly
as an unaligned snapshot records, and `ChannelStateComplete` follows when n
came back on every loop channel. A barrier n on a logged channel that the
head has not taken is a snapshot started inside the loop (a source feeding
the loop's body started it, and its relay has not reached the head's forward
inputs yet): it is Chandy-Lamport's first marker on that channel. Aligned,
the head blocks the loop channel and aligns its forward channels as usual
(their barrier comes through the source's relay, never through the loop, so
waiting ends); unaligned, it snapshots at once and records its forward
channels. Either way the loop channel's state for n is empty: its barrier
came before the snapshot.

**Markers from the initiator** (seeds 000 and 001: a process records its
state when the first marker reaches it). A snapshot started by a source
subtask reaches the subtasks it has a channel path to through its barriers;
the other sources, which no channel reaches, take it on the coordinator's
relay (an injection). Unaligned, a subtask that the initiator reaches
(`reach`) would otherwise cut on whichever barrier came first, often one
that came from an injected source. So a barrier n on a channel off the
initiator's paths blocks that channel (its state for n is empty: nothing
after the barrier is processed), and the snapshot is cut on the first
barrier n on a channel of the initiator's paths, recording the channels
that have not delivered n yet. The wait ends: every subtask on the shortest
path from the initiator cuts on its predecessor's barrier, and no channel on
such a path is ever held. `TakeSnapshot.cut_on` names the channel a
snapshot was cut on. Aligned mode waits for every channel anyway.

**Concurrent snapshots** (seed 004: several snapshots with distinct ids may
run at once). With `concurrent` (unaligned only), snapshots are independent:
sources may take them in any order, so a channel may carry barrier m before
n on one channel and n before m on another. Each id is cut on its own first
barrier (or held for its initiator's marker, one id at a time) and records
its own pending channels, as overlapping unaligned snapshots always did; a
barrier of a newer id no longer abandons an older recording (an upstream
that really skipped a snapshot declines it, and the coordinator aborts it).
A subtask with sinks (`ordered`) still takes its snapshots in id order,
since its sinks seal their epochs in that order: a barrier below the newest
snapshot it took abandons (declines) that snapshot.

**Replay windows.** A subtask restored from an unaligned snapshot must
process the records of an old generation that the snapshot names (its
channel state). `Aligner.replay` holds them per channel as `Replay(end,
generation)`: a record of that generation before `end` is processed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import assert_never

from kstream.errors import ProtocolError
from kstream.protocol.snapshot_id import SnapshotId
from kstream.protocol.worker_alive import SubtaskAlignment

__all__ = [
    "NO_GENERATION",
    "AbandonAlignment",
    "Action",
    "Aligner",
    "Alignment",
    "AlignmentTimedOut",
    "BarrierArrived",
    "Block",
    "Channel",
    "ChannelStateComplete",
    "CheckpointAborted",
    "Drop",
    "Event",
    "Process",
    "RecordArrived",
    "Replay",
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


class Alignment(StrEnum):
    """How a subtask with several input channels takes its snapshot."""

    #: Wait for barrier n on every channel, blocking those that delivered it.
    ALIGNED = "aligned"
    #: Snapshot at the first barrier n; record the other channels until theirs.
    UNALIGNED = "unaligned"


@dataclass(frozen=True, slots=True)
class Replay:
    """A replay window: records of `generation` before offset `end` are valid.

    They are channel state a snapshot named (an offset range ending at the
    barrier `end` of that generation); a restored subtask processes them
    although they are of an old generation.
    """

    end: int
    generation: int


# -- events ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RecordArrived:
    """A data record at `offset` of `channel`, written in `generation`."""

    channel: Channel
    offset: int
    generation: int


@dataclass(frozen=True, slots=True)
class BarrierArrived:
    """Barrier `checkpoint` at `offset` of `channel`, written in `generation`.

    `positions` maps every input channel to its next offset to process (the
    barrier's own channel included, or not: it is not read). Only a snapshot
    that records channel state needs them; the aligned mode ignores them.
    """

    channel: Channel
    offset: int
    checkpoint: int
    generation: int
    positions: Mapping[Channel, int] = field(default_factory=dict, compare=False)


@dataclass(frozen=True, slots=True)
class AlignmentTimedOut:
    """Alignment of `checkpoint` has lasted longer than the job's alignment timeout.

    `positions` as in `BarrierArrived`. Stale timeouts (for a checkpoint no
    longer being aligned) are ignored.
    """

    checkpoint: int
    positions: Mapping[Channel, int] = field(default_factory=dict, compare=False)


@dataclass(frozen=True, slots=True)
class CheckpointAborted:
    """The coordinator gave up on `checkpoint`: stop aligning it, ignore its barriers."""

    checkpoint: int


Event = RecordArrived | BarrierArrived | CheckpointAborted | AlignmentTimedOut

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
    """Snapshot now for `checkpoint`, then forward the barrier.

    With `recording` empty, every channel delivered barrier `checkpoint`:
    `channel_offsets` maps each input channel to the offset just after its
    barrier, where a restore from this checkpoint resumes reading, and the
    snapshot is complete. Otherwise the channels in `recording` have not
    delivered it yet (their offsets are their positions now): their channel
    state is being recorded, and the snapshot may be acked only after the
    `ChannelStateComplete` of `checkpoint` (or is dropped on its
    `AbandonAlignment`). `cut_on` is the channel whose barrier made the
    snapshot: the first (unaligned) or last (aligned) to deliver it.
    """

    checkpoint: int
    channel_offsets: Mapping[Channel, int]
    recording: frozenset[Channel] = frozenset()
    #: The channel whose barrier made the snapshot (None: an alignment timeout did).
    #: Where it was cut, not what it holds: equal snapshots compare equal without it.
    cut_on: Channel | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class ChannelStateComplete:
    """The channel state of `checkpoint` is recorded: store and ack its snapshot.

    `channel_offsets`: where a restore resumes each channel (a recorded range's
    start, or just after the barrier); `replay`: per channel with a non-empty
    range, the windows of old-generation records a restore must process.
    """

    checkpoint: int
    channel_offsets: Mapping[Channel, int]
    replay: Mapping[Channel, tuple[Replay, ...]]


@dataclass(frozen=True, slots=True)
class AbandonAlignment:
    """Alignment of `checkpoint` stopped unfinished (aborted or overtaken); decline it.

    If its snapshot was taken already (its channel state was being recorded),
    the snapshot is dropped: it will never be acked.
    """

    checkpoint: int


Action = Process | Drop | Block | Unblock | TakeSnapshot | ChannelStateComplete | AbandonAlignment

#: Matches no record's generation (generations start at 1).
NO_GENERATION = -1

_PROCESS = Process()
_DROP_BLOCKED = Drop("channel blocked for alignment; re-read after the barrier")
_DROP_GENERATION = Drop("written by another generation")
_DROP_STALE_BARRIER = Drop("barrier of a checkpoint already taken or aborted")


@dataclass(slots=True)
class _Recording:
    """Channel state of a taken snapshot, still being recorded."""

    #: Channel -> restore offset, final for the channels that delivered the barrier.
    offsets: dict[Channel, int]
    #: Channel that has not delivered the barrier -> its position at the snapshot.
    pending: dict[Channel, int]
    replay: dict[Channel, tuple[Replay, ...]] = field(default_factory=dict)


@dataclass(slots=True)
class Aligner:
    """Aligns barriers over a fixed set of input channels, in one generation.

    `last_checkpoint` is the checkpoint the subtask was restored from (0 for a
    fresh start): barriers up to it are stale. `replay` holds the replay
    windows of that restore. `logged` are the loop channels of a loop head:
    never aligned, always recorded from the snapshot to their barrier. Create
    a new `Aligner` when the generation changes (recovery); an old one must
    not be reused.
    """

    channels: frozenset[Channel]
    generation: int
    last_checkpoint: int = 0
    mode: Alignment = Alignment.ALIGNED
    replay: Mapping[Channel, tuple[Replay, ...]] = field(default_factory=dict)
    logged: frozenset[Channel] = frozenset()
    #: Per snapshot initiator (`kstream.protocol.snapshot_id`), the input channels
    #: on a channel path from it (`Plan.marker_paths`). Unaligned, a snapshot
    #: whose initiator reaches this subtask is cut on the initiator's marker:
    #: a barrier of it on another channel (one that came from a source the
    #: snapshot was injected into) is held back until then ("Markers from the
    #: initiator" in the module doc). Empty: the first barrier cuts, whoever
    #: started the snapshot.
    reach: Mapping[int, frozenset[Channel]] = field(default_factory=dict)
    #: Unaligned only: snapshots of distinct ids are independent ("Concurrent
    #: snapshots" in the module doc): a channel may carry their barriers in any
    #: order, and each is cut on its own first barrier and recorded on its own.
    concurrent: bool = False
    #: With `concurrent`: the subtask must still take its snapshots in id order
    #: (it has sinks, whose epochs are sealed in id order): a barrier below the
    #: newest snapshot taken here is declined.
    ordered: bool = False
    #: Checkpoint being aligned, or None.
    aligning: int | None = field(default=None, init=False)
    #: The newest snapshot taken (`concurrent` keeps `last_checkpoint` as restored).
    _newest: int = field(default=0, init=False)
    #: Channel → offset after its barrier, for channels that delivered `aligning`.
    _arrived: dict[Channel, int] = field(default_factory=dict, init=False)
    #: Aborted checkpoints newer than `last_checkpoint`, whose barriers may still come.
    _aborted: set[int] = field(default_factory=set, init=False)
    #: How many channels barrier n must arrive on before an aligned snapshot
    #: (all but the `logged` ones).
    _aligned: int = field(default=0, init=False)
    #: Taken snapshots whose channel state is being recorded, oldest first.
    _recordings: dict[int, _Recording] = field(default_factory=dict, init=False)
    #: Records of this generation may be processed without calling `handle`
    #: (see "The fast path"): `generation` while no alignment is in progress,
    #: `NO_GENERATION` (matching no record) while one is.
    open_generation: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        if not self.channels:
            raise ProtocolError("an Aligner needs at least one input channel")
        unknown = sorted(set(self.replay) - self.channels)
        if unknown:
            raise ProtocolError(f"replay window for {unknown[0]}, not an input of this subtask")
        if not self.logged <= self.channels:
            stray = sorted(self.logged - self.channels)[0]
            raise ProtocolError(f"loop channel {stray}, not an input of this subtask")
        if self.logged == self.channels:
            raise ProtocolError("a loop head needs an input besides its loop channels")
        for initiator, path in self.reach.items():
            if not path <= self.channels:
                stray = sorted(path - self.channels)[0]
                raise ProtocolError(
                    f"{stray} on a path from initiator {initiator}, not an input of this subtask"
                )
        self._aligned = len(self.channels - self.logged)
        self.open_generation = self.generation
        if self.concurrent and self.mode is not Alignment.UNALIGNED:
            raise ProtocolError("concurrent snapshots are recorded unaligned only")
        self._newest = self.last_checkpoint

    @classmethod
    def over(
        cls,
        channels: Iterable[Channel],
        generation: int,
        last: int = 0,
        mode: Alignment = Alignment.ALIGNED,
        replay: Mapping[Channel, tuple[Replay, ...]] | None = None,
        logged: Iterable[Channel] = (),
        reach: Mapping[int, Iterable[Channel]] | None = None,
        concurrent: bool = False,
        ordered: bool = False,
    ) -> Aligner:
        return cls(
            frozenset(channels),
            generation,
            last,
            Alignment(mode),
            dict(replay or {}),
            frozenset(logged),
            {i: frozenset(cs) for i, cs in (reach or {}).items() if cs},
            concurrent,
            ordered,
        )

    @property
    def blocked(self) -> frozenset[Channel]:
        """Channels currently blocked (they delivered the barrier being aligned)."""
        return frozenset(self._arrived)

    @property
    def recording(self) -> dict[int, frozenset[Channel]]:
        """Checkpoint → channels whose channel state is being recorded for it."""
        return {n: frozenset(r.pending) for n, r in self._recordings.items()}

    def report(self, task: str) -> SubtaskAlignment | None:
        """What subtask `task`'s heartbeat says of it now: the barrier being
        aligned and the oldest snapshot being recorded (None: neither)."""
        if self.aligning is None and not self._recordings:
            return None
        oldest = min(self._recordings, default=None)
        pending = {} if oldest is None else self._recordings[oldest].pending
        return SubtaskAlignment.of(
            task,
            len(self.channels),
            self.aligning,
            ((str(c), o) for c, o in self._arrived.items()),
            oldest,
            ((str(c), o) for c, o in pending.items()),
        )

    def handle(self, event: Event) -> list[Action]:
        """Feed one event; return the actions to carry out, in order."""
        match event:
            case RecordArrived():
                return [self._on_record(event)]
            case BarrierArrived():
                return self._on_barrier(event)
            case CheckpointAborted():
                return self._on_abort(event)
            case AlignmentTimedOut():
                return self._on_timeout(event)
            case _:
                assert_never(event)

    def _check_channel(self, channel: Channel) -> None:
        if channel not in self.channels:
            raise ProtocolError(f"event on {channel}, which is not an input of this subtask")

    def _on_record(self, event: RecordArrived) -> Action:
        self._check_channel(event.channel)
        if event.generation != self.generation and not self._replayed(event):
            return _DROP_GENERATION
        if event.channel in self._arrived:
            return _DROP_BLOCKED
        return _PROCESS

    def _replayed(self, event: RecordArrived) -> bool:
        """Whether the record is old-generation channel state of the restored snapshot."""
        return any(
            event.generation == w.generation and event.offset < w.end
            for w in self.replay.get(event.channel, ())
        )

    def _on_barrier(self, event: BarrierArrived) -> list[Action]:
        self._check_channel(event.channel)
        n = event.checkpoint
        if event.generation != self.generation:
            return [_DROP_GENERATION]
        if event.channel in self._arrived:
            # Only possible if the worker kept reading a blocked channel.
            return [_DROP_BLOCKED]
        if self.concurrent:
            return self._on_barrier_concurrent(event)
        actions: list[Action] = []
        for m, rec in list(self._recordings.items()):
            if event.channel not in rec.pending:
                continue
            if n == m:
                # With any recording abandoned above: a skipped barrier is declined.
                return [*actions, *self._recorded(m, rec, event)]
            if n < m:
                # Barrier n never came on the channels that delivered m: stale.
                return [_DROP_STALE_BARRIER]
            # This channel skipped barrier m: its channel state can never be complete.
            actions += self._abandon_recording(m)
        if n <= self.last_checkpoint or n in self._aborted:
            return [*actions, _DROP_STALE_BARRIER]
        # A logged channel's barrier not recorded here comes first: a snapshot
        # started inside the loop (module doc); it is aligned like any other.
        if self.aligning is not None and n < self.aligning:
            # A channel can only carry barrier n before barrier `aligning` if the
            # current alignment began with a barrier newer than n: n is overtaken.
            return [*actions, _DROP_STALE_BARRIER]
        if self.aligning is not None and n > self.aligning:
            # This channel skipped the barrier being aligned: that checkpoint can
            # no longer be a consistent cut here. Give it up and align n instead.
            actions += self._abandon(self.aligning)
        if self.mode is Alignment.UNALIGNED:
            path = self.reach.get(SnapshotId.decode(n).initiator)
            if path is not None and event.channel not in path:
                # Not the initiator's marker: this channel's source had the snapshot
                # injected. Hold the channel (nothing after its barrier is processed,
                # so its state is empty) until the initiator's marker comes.
                self._set_aligning(n)
                self._arrived[event.channel] = event.offset + 1
                actions.append(Block(event.channel, event.offset + 1))
                return actions
            held = sorted(self._arrived)
            done = {**self._arrived, event.channel: event.offset + 1}
            actions += self._record(n, done, event.positions, event.channel)
            actions += [Unblock(c) for c in held]
            return actions
        self._set_aligning(n)
        self._arrived[event.channel] = event.offset + 1
        if len(self._arrived.keys() - self.logged) < self._aligned:
            actions.append(Block(event.channel, event.offset + 1))
            return actions
        others = sorted(c for c in self._arrived if c != event.channel)
        if self.logged:
            # A loop head: every forward channel delivered n; log the loop channels.
            actions += self._record(n, dict(self._arrived), event.positions, event.channel)
        else:
            offsets = MappingProxyType(dict(self._arrived))
            self._finish(n)
            actions.append(TakeSnapshot(n, offsets, cut_on=event.channel))
        actions += [Unblock(c) for c in others]
        return actions

    def _on_barrier_concurrent(self, event: BarrierArrived) -> list[Action]:
        """The marker rule per snapshot id: each is cut on its first barrier (or its
        initiator's marker) and records its own channels, whatever the others do."""
        c, n = event.channel, event.checkpoint
        rec = self._recordings.get(n)
        if rec is not None:
            return self._recorded(n, rec, event) if c in rec.pending else [_DROP_STALE_BARRIER]
        if n <= self.last_checkpoint or n in self._aborted:
            return [_DROP_STALE_BARRIER]
        # A channel held for a snapshot stands at that snapshot's barrier: nothing
        # after it was processed, so a snapshot taken now records it from there.
        # (This barrier's channel stands after it: a held snapshot cut first records it
        # from there.)
        positions = {**event.positions, c: event.offset + 1, **self._arrived}
        actions: list[Action] = []
        held = self.aligning
        if self.ordered and held is not None and n > held:
            # Sinks seal in id order: the held snapshot is cut now, before n.
            actions += self._cut(held, positions, min(self._arrived))
            held = None
        if self.ordered and n < self._newest and n != held:
            # A newer snapshot was taken here already: n can be no cut of a subtask
            # that seals its sinks' epochs in id order.
            self._aborted.add(n)
            return [*actions, AbandonAlignment(n)]
        path = self.reach.get(SnapshotId.decode(n).initiator)
        if path is not None and c not in path and held in (None, n):
            # One snapshot held at a time: two held for each other's marker could
            # each wait on a channel the other holds.
            self._set_aligning(n)
            self._arrived[c] = event.offset + 1
            return [*actions, Block(c, event.offset + 1)]
        return actions + self._cut(n, positions, c, event.offset + 1)

    def _cut(
        self, n: int, positions: Mapping[Channel, int], cut_on: Channel, after: int | None = None
    ) -> list[Action]:
        """Take snapshot n now (concurrent): `cut_on` delivered its barrier (`after`:
        the offset after it, None: a held channel), so did the channels held for n;
        the others record from their positions."""
        done = {} if after is None else {cut_on: after}
        unblock: list[Channel] = []
        if n == self.aligning:
            done.update(self._arrived)
            unblock = sorted(self._arrived)
            self._arrived.clear()
            self._set_aligning(None)
        pending: dict[Channel, int] = {}
        for other in sorted(self.channels - done.keys()):
            if other not in positions:
                raise ProtocolError(f"no position of {other} for the snapshot of checkpoint {n}")
            pending[other] = done[other] = positions[other]
        self._newest = max(self._newest, n)
        if pending:
            self._recordings[n] = _Recording(dict(done), pending)
        take = TakeSnapshot(n, MappingProxyType(done), frozenset(pending), cut_on)
        return [take, *(Unblock(h) for h in unblock)]

    def _record(
        self,
        n: int,
        offsets: dict[Channel, int],
        positions: Mapping[Channel, int],
        cut_on: Channel | None = None,
    ) -> list[Action]:
        """Snapshot n now: the channels in `offsets` are done, the others start recording."""
        pending: dict[Channel, int] = {}
        for c in sorted(self.channels - offsets.keys()):
            if c not in positions:
                raise ProtocolError(f"no position of {c} for the snapshot of checkpoint {n}")
            pending[c] = offsets[c] = positions[c]
        self._finish(n)
        if pending:
            self._recordings[n] = _Recording(dict(offsets), pending)
        return [TakeSnapshot(n, MappingProxyType(offsets), frozenset(pending), cut_on)]

    def _recorded(self, n: int, rec: _Recording, event: BarrierArrived) -> list[Action]:
        """Barrier n arrived on a recording channel: its channel state is [start, barrier)."""
        c, barrier = event.channel, event.offset
        start = rec.pending.pop(c)
        if start < barrier:
            # The windows of the restore still open at `start` cover old-generation
            # records inside the range: the range names them too.
            kept = tuple(w for w in self.replay.get(c, ()) if w.end > start)
            rec.replay[c] = (*kept, Replay(barrier, self.generation))
            rec.offsets[c] = start
        else:
            rec.offsets[c] = barrier + 1
        if rec.pending:
            return []
        del self._recordings[n]
        return [
            ChannelStateComplete(n, MappingProxyType(rec.offsets), MappingProxyType(rec.replay))
        ]

    def _on_timeout(self, event: AlignmentTimedOut) -> list[Action]:
        n = event.checkpoint
        if n != self.aligning:
            return []
        blocked = sorted(self._arrived)
        offsets = dict(self._arrived)
        self._arrived.clear()
        actions = self._record(n, offsets, event.positions)
        return [*actions, *(Unblock(c) for c in blocked)]

    def _on_abort(self, event: CheckpointAborted) -> list[Action]:
        n = event.checkpoint
        if n in self._recordings:
            return self._abandon_recording(n)
        if n <= self.last_checkpoint:
            return []
        if n == self.aligning:
            return self._abandon(n)
        self._aborted.add(n)
        return []

    def _abandon_recording(self, n: int) -> list[Action]:
        del self._recordings[n]
        return [AbandonAlignment(n)]

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
