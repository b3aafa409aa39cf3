"""The input side of a channel subtask, as a pure machine: items in, deliveries and actions out.

The shape is Flink's ``CheckpointedInputGate``. A reader
(`kstream.runtime.channels.reader`) turns a fetched batch of channel records
into `ChannelItem`\\s, their header decoded once; `InputProcessor` applies the
aligner's rule (`kstream.protocol.barrier.Aligner`) to them and returns, in
order, what the subtask must push through its chain (the items themselves)
and what it must do (`InputAction`\\s). It does no I/O and reads no clock:
time (``time.perf_counter`` seconds) is passed in.

=====================================  ==============================================
item, in order                         what the processor outputs
=====================================  ==============================================
``DATA``/``TIMED`` of the aligner's     the item itself, without an aligner event: the
open generation, channel neither        fast path (`Aligner.open_generation`)
blocked nor re-seeked in the batch
any item of a blocked channel           held, in order (nothing out); once the hold is
                                        full, ``Pause(c)`` and the item and every later
                                        one of c dropped (c *overflowed*)
any other ``DATA``/``TIMED``            ``Aligner.handle(RecordArrived)``: ``Process``
                                        outputs the item (counted as replayed if of
                                        another generation), ``Drop`` counts it dropped
``BARRIER``                             the item (where the actions come from), then
                                        the actions of ``Aligner.handle(BarrierArrived)``
``MALFORMED`` (no channel record)       the item, for the job's error policy
any other kind                          nothing (its position moves on)
an item of a channel re-seeked since    nothing: a stale copy, fetched again in order
the batch was fetched, or deferred
=====================================  ==============================================

=====================================  ==============================================
aligner action                         processor's action (and bookkeeping)
=====================================  ==============================================
``Block(c, o)``                         ``Hold(c, checkpoint)`` (and ``Pause(c, ...)`` with
                                        no room to hold); c is `blocked` until
                                        unblocked, the alignment clock starts
``TakeSnapshot``                        ``Snapshot(take, alignment_ms)``; a snapshot
                                        with channels recording starts its recording
                                        clock
``ChannelStateComplete``                ``StoreHeld(complete, recording_ms)``
``Unblock(c)``                          c's position is its resume offset again and
                                        c's held items come next, before the rest of
                                        the batch; an overflowed c is ``Resume(c, o)``d
                                        at its first dropped offset o and re-seeked for
                                        the rest of the batch. While flow control holds
                                        reading paused, nothing until `flow_resumed`
                                        (c is *deferred*, and still holds)
``AbandonAlignment(n)``                 ``Abandon(n)`` (drop a held snapshot, decline)
``Drop`` (a barrier)                    counted dropped
=====================================  ==============================================

**Parts.** A batch is handed over in parts: `batch` starts it and returns its
first part, `more` each next one, ``[]`` once the batch is done. A part ends
before a barrier when something precedes it in the part, so the subtask has
carried out everything before a barrier when the aligner sees it: what it does
meanwhile (a sink serving an abort while it waits, `abort`) reaches the
aligner in the order of the records, as if each were handled in turn. A part
also ends after a barrier that handed held items back: they start the next.
The fast path runs until the next barrier with no call but this loop's.

**Holding** (internals, "Holding a blocked channel"). The consumer goes on
fetching a blocked channel; its items wait in the processor, `hold_bytes` at
most over all channels (each item counts its value's size plus
`ITEM_OVERHEAD`), and are handed back in order when the channel is unblocked,
so an alignment needs no pause, resume or seek unless a channel overflows.
Items handed back between batches (an abort, a timeout, a flow resume) start
the next batch: `pending` says some wait, so the subtask does not sleep in its
next fetch.

`positions` maps each channel to its next offset to process (the ranges of
unaligned snapshots start there: `BarrierArrived.positions`); `blocked` maps
the channels blocked for alignment, deferred ones included, to their resume
offsets; `paused` are the overflowed ones the consumer holds paused (flow
control leaves them paused on a resume).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import chain
from typing import Any, NamedTuple, assert_never

from kstream.protocol.barrier import (
    NO_GENERATION,
    AbandonAlignment,
    Action,
    Aligner,
    AlignmentTimedOut,
    BarrierArrived,
    Block,
    Channel,
    ChannelStateComplete,
    CheckpointAborted,
    Drop,
    Process,
    RecordArrived,
    TakeSnapshot,
    Unblock,
)

__all__ = [
    "BARRIER",
    "DATA",
    "HOLD_BYTES",
    "ITEM_OVERHEAD",
    "MALFORMED",
    "TIMED",
    "Abandon",
    "BatchCounts",
    "ChannelItem",
    "Hold",
    "InputAction",
    "InputProcessor",
    "Output",
    "Pause",
    "Resume",
    "Snapshot",
    "StoreHeld",
]

#: Item kinds: the channel record kinds of the wire format (`kstream.runtime.channels.format`)
#: as they are, and one for a value that is no channel record.
DATA = 0
BARRIER = 1
TIMED = 2
MALFORMED = -1
#: The kinds that carry stream records (one set lookup per item on the fast path).
_RECORDS = frozenset((DATA, TIMED))
#: What a subtask holds of its blocked channels at most, by default: a few
#: full fetches (`kstream.runtime.worker.consumers.QUEUED_KBYTES` is 32 MiB).
HOLD_BYTES = 8 << 20
#: What one held item counts on top of its value (the tuple, the message).
ITEM_OVERHEAD = 256


class ChannelItem(NamedTuple):
    """One fetched channel record, its header decoded.

    A tuple, not a dataclass: one is made per record, where decoding the
    header made a tuple before.
    """

    kind: int
    channel: Channel
    offset: int
    #: The writer's generation (0 for a `MALFORMED` item).
    generation: int
    #: A barrier's checkpoint id (0 for any other kind).
    checkpoint: int
    #: The record's value, header included.
    value: bytes
    #: The Kafka message it came from (what the error policy keeps; opaque here).
    message: Any


# -- actions -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Hold:
    """`channel` delivered the barrier of `checkpoint`, being aligned: what comes of
    it is held until the alignment ends (the consumer reads on)."""

    channel: Channel
    checkpoint: int


@dataclass(frozen=True, slots=True)
class Pause:
    """Stop reading `channel`, blocked for `checkpoint`: the hold is full."""

    channel: Channel
    checkpoint: int


@dataclass(frozen=True, slots=True)
class Resume:
    """Read overflowed `channel` again from `offset` (resume it and seek there)."""

    channel: Channel
    offset: int


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Take the snapshot `take` says now; the alignment before it lasted `alignment_ms`."""

    take: TakeSnapshot
    alignment_ms: float


@dataclass(frozen=True, slots=True)
class StoreHeld:
    """The channel state of a held snapshot is recorded: store it, then ack.

    `recording_ms`: from its first barrier to its last.
    """

    complete: ChannelStateComplete
    recording_ms: float


@dataclass(frozen=True, slots=True)
class Abandon:
    """Alignment of `checkpoint` stopped unfinished: drop its held snapshot, decline it."""

    checkpoint: int


InputAction = Hold | Pause | Resume | Snapshot | StoreHeld | Abandon
#: What a part of a batch holds, in order.
Output = ChannelItem | InputAction


@dataclass(frozen=True, slots=True)
class BatchCounts:
    """What one part of a batch skipped or took from recorded channel state."""

    #: Records of another generation delivered as recorded channel state (replay windows).
    replayed: int = 0
    #: Records and barriers dropped (another generation, an overflowed channel,
    #: a stale barrier).
    dropped: int = 0


_NO_COUNTS = BatchCounts()


class InputProcessor:
    """Applies `aligner` to the items of a channel subtask's batches (module docstring).

    `positions`: each channel's next offset to process (the restored ones);
    the processor keeps the dict up to date. `alignment_timeout`: seconds an
    alignment may last before `tick` switches it to unaligned (None: never).
    `hold_bytes`: what the blocked channels' held items may take (0: pause a
    channel at its barrier).
    """

    def __init__(
        self,
        aligner: Aligner,
        positions: dict[Channel, int],
        alignment_timeout: float | None = None,
        hold_bytes: int = HOLD_BYTES,
    ) -> None:
        self.aligner = aligner
        self.positions = positions
        self.alignment_timeout = alignment_timeout
        self.hold_bytes = hold_bytes
        #: Channel blocked for alignment -> where it is read again once unblocked.
        self._blocked: dict[Channel, int] = {}
        #: Blocked channel -> its held items, in order.
        self._hold: dict[Channel, list[ChannelItem]] = {}
        self._held_bytes = 0
        #: Overflowed channel (paused) -> its first dropped offset, the seek target.
        self._overflowed: dict[Channel, int] = {}
        #: Items handed back by an unblock: they come before the rest of the batch.
        self._front: list[ChannelItem] = []
        #: Channels unblocked while flow control paused reading (still in `_blocked`).
        self._deferred: set[Channel] = set()
        self._flow_paused = False
        #: Channel re-seeked to an offset -> its items from there on in the batch
        #: are stale copies.
        self._reseeked: dict[Channel, int] = {}
        self._items: Iterator[ChannelItem] = iter(())
        #: A barrier that ended a part: the next part starts with it.
        self._held: ChannelItem | None = None
        #: When the alignment in progress started (its first `Block`).
        self._align_started: float | None = None
        #: Held snapshot -> when its first barrier arrived (its channel state is recorded).
        self._recording_since: dict[int, float] = {}

    @property
    def blocked(self) -> Mapping[Channel, int]:
        """Channels paused for alignment (deferred ones too) -> their resume offsets."""
        return self._blocked

    @property
    def paused(self) -> frozenset[Channel]:
        """Blocked channels that overflowed their hold: the consumer holds them paused."""
        return frozenset(self._overflowed)

    @property
    def pending(self) -> bool:
        """Whether handed-back items wait for the next batch (do not sleep in a fetch)."""
        return bool(self._front)

    @property
    def deferred(self) -> frozenset[Channel]:
        """Channels unblocked while flow control paused reading, waiting for `flow_resumed`."""
        return frozenset(self._deferred)

    # -- batches -------------------------------------------------------------

    def batch(self, items: Iterable[ChannelItem], now: float) -> tuple[list[Output], BatchCounts]:
        """Start a batch of fetched `items`; its first part (see "Parts")."""
        self._items = iter(items)
        self._held = None
        # A seek's stale copies were fetched before it: no later batch has any.
        self._reseeked = {}
        return self.more(now)

    def more(self, now: float) -> tuple[list[Output], BatchCounts]:
        """The next part of the batch, once the previous one was carried out; ``[]``
        when the batch is done."""
        out: list[Output] = []
        reseeked, positions, aligner = self._reseeked, self.positions, self.aligner
        blocked, records = self._blocked, _RECORDS
        dropped = replayed = 0
        held, self._held = self._held, None
        if held is not None:
            # Not of a blocked channel (see below): items handed back since, of
            # blocked ones, need not come before it.
            dropped += self._barrier(held, now, out)
        if self._front:
            self._items = chain(self._front, self._items)
            self._front = []
        open_generation = self._open_generation()
        for item in self._items:
            kind, ch, offset, gen, _, _, _ = item
            if gen == open_generation and kind in records:
                # The fast path: open only while no channel holds or was re-seeked.
                positions[ch] = offset + 1
                out.append(item)
                continue
            if ch in reseeked and offset >= reseeked[ch]:
                continue
            if ch in blocked:
                dropped += self._hold_item(item, out)
                continue
            if kind in records:
                positions[ch] = offset + 1
                action = aligner.handle(RecordArrived(ch, offset, gen))[0]
                if isinstance(action, Process):
                    out.append(item)
                    replayed += gen != aligner.generation
                else:
                    dropped += 1
            elif kind == BARRIER:
                if out:
                    self._held = item
                    break
                dropped += self._barrier(item, now, out)
                if self._front:
                    # An unblock handed items back: they go first, in the next part.
                    break
                open_generation = self._open_generation()
            else:
                positions[ch] = offset + 1
                if kind == MALFORMED:
                    out.append(item)
        if not dropped and not replayed:
            return out, _NO_COUNTS
        return out, BatchCounts(replayed, dropped)

    def _open_generation(self) -> int:
        """The generation whose records take the fast path now (read after each
        barrier): none while a channel is blocked (a deferred one too) or re-seeked."""
        if self._blocked or self._reseeked:
            return NO_GENERATION
        return self.aligner.open_generation

    def _barrier(self, item: ChannelItem, now: float, out: list[Output]) -> int:
        """Hand barrier `item` to the aligner; how many it dropped (0 or 1).

        `item`'s channel is neither blocked nor re-seeked past it: `more` held or
        skipped it otherwise, and between parts (the barrier that ended one) an
        abort only unblocks channels, which were blocked, so not this one.
        """
        _, ch, offset, gen, checkpoint, _, _ = item
        self.positions[ch] = offset + 1
        out.append(item)
        # The positions dict is read during `handle` only: no copy.
        event = BarrierArrived(ch, offset, checkpoint, gen, self.positions)
        return self._run(self.aligner.handle(event), now, out)

    def _hold_item(self, item: ChannelItem, out: list[Output]) -> int:
        """Hold `item` of a blocked channel, or drop it (overflowed); how many dropped."""
        ch = item.channel
        if ch in self._overflowed:
            return 1
        size = _size(item)
        if self._held_bytes + size > self.hold_bytes:
            self._overflow(ch, item.offset, out)
            return 1
        self._hold[ch].append(item)
        self._held_bytes += size
        return 0

    def _overflow(self, ch: Channel, offset: int, out: list[Output]) -> None:
        """Pause blocked `ch`: it is read again from `offset` once unblocked."""
        self._overflowed[ch] = offset
        out.append(Pause(ch, self.aligner.aligning or 0))

    def _release(self, c: Channel) -> Resume | None:
        """Unblocked `c` is read again: its held items come next; if it overflowed,
        the resume at its first dropped offset."""
        del self._blocked[c]
        held = self._hold.pop(c)
        self._held_bytes -= sum(map(_size, held))
        self._front += held
        seek = self._overflowed.pop(c, None)
        if seek is None:
            return None
        self._reseeked[c] = seek
        return Resume(c, seek)

    # -- between batches -----------------------------------------------------

    def tick(self, now: float) -> list[InputAction]:
        """Switch an alignment that lasted longer than `alignment_timeout` to unaligned."""
        limit, started = self.alignment_timeout, self._align_started
        if limit is None or started is None or now - started < limit:
            return []
        n = self.aligner.aligning
        if n is None:
            return []
        out: list[Output] = []
        self._run(self.aligner.handle(AlignmentTimedOut(n, self.positions)), now, out)
        return _actions(out)

    def abort(self, checkpoint: int) -> list[InputAction]:
        """The coordinator gave up on `checkpoint` (between parts of a batch, too)."""
        out: list[Output] = []
        # An abort only abandons and unblocks: no action of it reads the time.
        self._run(self.aligner.handle(CheckpointAborted(checkpoint)), 0.0, out)
        return _actions(out)

    def flow_paused(self) -> None:
        """Flow control holds reading paused: an unblocked channel waits for `flow_resumed`."""
        self._flow_paused = True

    def flow_resumed(self) -> list[Resume]:
        """Flow control resumed reading: the deferred channels are read again."""
        self._flow_paused = False
        resumes = [r for c in sorted(self._deferred) if (r := self._release(c)) is not None]
        self._deferred.clear()
        return resumes

    # -- the aligner's actions -------------------------------------------------

    def _run(self, actions: list[Action], now: float, out: list[Output]) -> int:
        """Append what the aligner's `actions` ask of the subtask; how many drops."""
        dropped = 0
        for action in actions:
            match action:
                case Process():
                    pass  # only a record's own event asks to process it (see `more`)
                case Drop():
                    dropped += 1
                case Block():
                    if self._align_started is None:
                        self._align_started = now
                    c = action.channel
                    self._blocked[c] = action.resume_offset
                    self._hold[c] = []
                    out.append(Hold(c, self.aligner.aligning or 0))
                    if self.hold_bytes <= 0:
                        self._overflow(c, action.resume_offset, out)
                case TakeSnapshot():
                    started = self._align_started
                    alignment_ms = 0.0 if started is None else (now - started) * 1000
                    self._align_started = None
                    if action.recording:
                        self._recording_since[action.checkpoint] = started or now
                    out.append(Snapshot(action, alignment_ms))
                case ChannelStateComplete():
                    # From the first barrier to the last, as for an aligned snapshot.
                    since = self._recording_since.pop(action.checkpoint)
                    out.append(StoreHeld(action, (now - since) * 1000))
                case Unblock():
                    c = action.channel
                    self.positions[c] = self._blocked[c]
                    if self._flow_paused:
                        self._deferred.add(c)
                    elif (resume := self._release(c)) is not None:
                        out.append(resume)
                case AbandonAlignment():
                    self._align_started = None
                    self._recording_since.pop(action.checkpoint, None)
                    out.append(Abandon(action.checkpoint))
                case _:
                    assert_never(action)
        return dropped


def _size(item: ChannelItem) -> int:
    """What a held item counts against `InputProcessor.hold_bytes`."""
    return len(item.value) + ITEM_OVERHEAD


def _actions(out: list[Output]) -> list[InputAction]:
    """`out` of an event that delivers no item."""
    return [a for a in out if not isinstance(a, ChannelItem)]
