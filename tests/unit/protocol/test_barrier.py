"""Barrier alignment (`kstream.protocol.barrier.Aligner`) against a simulated worker.

The simulator plays the worker exactly as docs/internals/barriers.md
describes: it reads FIFO channels in batches, stops reading a channel on
`Block`, lets the rest of an already fetched batch arrive (the aligner must
drop it), and on `Unblock` re-reads the channel from the `resume_offset` of
its `Block`. Hypothesis chooses which channel is read, how big each batch is,
and when the coordinator aborts a checkpoint. The channels belong to two inputs
(two topics with the same partition numbers), as in a stage fed by a union or a
connect: one Aligner covers every channel of every input.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kstream.errors import ProtocolError
from kstream.protocol.barrier import (
    AbandonAlignment,
    Action,
    Aligner,
    BarrierArrived,
    Block,
    Channel,
    CheckpointAborted,
    Drop,
    Event,
    Process,
    RecordArrived,
    TakeSnapshot,
    Unblock,
)

GEN = 7
FOREIGN_GENERATIONS = (GEN - 1, GEN + 1)

C0 = Channel("kstream.j.e1", 0)
C1 = Channel("kstream.j.e1", 1)
C2 = Channel("kstream.j.e1", 2)


# -- example-based tests: the exact action lists ------------------------------


def record(channel: Channel, offset: int, generation: int = GEN) -> RecordArrived:
    return RecordArrived(channel, offset, generation)


def barrier(channel: Channel, offset: int, n: int, generation: int = GEN) -> BarrierArrived:
    return BarrierArrived(channel, offset, n, generation)


def test_two_channels_block_drop_then_snapshot_and_unblock() -> None:
    aligner = Aligner.over([C0, C1], GEN)
    assert aligner.handle(record(C0, 0)) == [Process()]
    assert aligner.handle(barrier(C0, 1, 1)) == [Block(C0, 2)]
    assert aligner.blocked == {C0}
    # The rest of c0's fetched batch: dropped, re-read from offset 2 later.
    [drop] = aligner.handle(record(C0, 2))
    assert isinstance(drop, Drop)
    assert aligner.handle(record(C1, 0)) == [Process()]
    assert aligner.handle(barrier(C1, 1, 1)) == [TakeSnapshot(1, {C0: 2, C1: 2}), Unblock(C0)]
    assert aligner.blocked == frozenset()
    assert aligner.last_checkpoint == 1
    assert aligner.handle(record(C0, 2)) == [Process()]


def test_three_channels_unblock_every_other_channel_in_order() -> None:
    aligner = Aligner.over([C2, C0, C1], GEN)
    assert aligner.handle(barrier(C2, 0, 1)) == [Block(C2, 1)]
    assert aligner.handle(barrier(C0, 4, 1)) == [Block(C0, 5)]
    assert aligner.handle(barrier(C1, 9, 1)) == [
        TakeSnapshot(1, {C0: 5, C1: 10, C2: 1}),
        Unblock(C0),
        Unblock(C2),
    ]


def test_single_channel_snapshots_at_once() -> None:
    aligner = Aligner.over([C0], GEN)
    assert aligner.handle(record(C0, 0)) == [Process()]
    assert aligner.handle(barrier(C0, 1, 1)) == [TakeSnapshot(1, {C0: 2})]
    assert aligner.handle(record(C0, 2)) == [Process()]
    assert aligner.handle(barrier(C0, 3, 2)) == [TakeSnapshot(2, {C0: 4})]
    assert aligner.blocked == frozenset()


def test_abort_of_the_checkpoint_being_aligned_abandons_it_and_unblocks() -> None:
    aligner = Aligner.over([C0, C1, C2], GEN)
    aligner.handle(barrier(C1, 0, 1))
    aligner.handle(barrier(C0, 0, 1))
    assert aligner.handle(CheckpointAborted(1)) == [AbandonAlignment(1), Unblock(C0), Unblock(C1)]
    # Its last barrier is now stale: no snapshot, no block.
    [drop] = aligner.handle(barrier(C2, 0, 1))
    assert isinstance(drop, Drop)
    assert aligner.aligning is None


def test_abort_before_the_barriers_arrive_makes_them_stale() -> None:
    aligner = Aligner.over([C0, C1], GEN)
    assert aligner.handle(CheckpointAborted(1)) == []
    for event in (barrier(C0, 0, 1), barrier(C1, 0, 1)):
        [drop] = aligner.handle(event)
        assert isinstance(drop, Drop)
    assert aligner.handle(barrier(C0, 1, 2)) == [Block(C0, 2)]
    assert aligner.handle(barrier(C1, 1, 2)) == [TakeSnapshot(2, {C0: 2, C1: 2}), Unblock(C0)]


def test_abort_of_a_taken_checkpoint_is_ignored() -> None:
    aligner = Aligner.over([C0], GEN)
    aligner.handle(barrier(C0, 0, 1))
    assert aligner.handle(CheckpointAborted(1)) == []


def test_newer_barrier_abandons_the_older_alignment() -> None:
    # c1 never carried barrier 1 (an upstream bug): barrier 2 overtakes it.
    aligner = Aligner.over([C0, C1], GEN)
    assert aligner.handle(barrier(C0, 0, 1)) == [Block(C0, 1)]
    assert aligner.handle(barrier(C1, 0, 2)) == [
        AbandonAlignment(1),
        Unblock(C0),
        Block(C1, 1),
    ]
    assert aligner.handle(record(C0, 1)) == [Process()]
    assert aligner.handle(barrier(C0, 2, 2)) == [TakeSnapshot(2, {C0: 3, C1: 1}), Unblock(C1)]


def test_older_barrier_during_a_newer_alignment_is_dropped() -> None:
    aligner = Aligner.over([C0, C1], GEN)
    assert aligner.handle(barrier(C1, 0, 2)) == [Block(C1, 1)]
    [drop] = aligner.handle(barrier(C0, 0, 1))
    assert isinstance(drop, Drop)
    assert aligner.blocked == {C1}
    assert aligner.handle(record(C0, 1)) == [Process()]
    assert aligner.handle(barrier(C0, 2, 2)) == [TakeSnapshot(2, {C0: 3, C1: 1}), Unblock(C1)]


def test_other_generations_are_dropped() -> None:
    aligner = Aligner.over([C0, C1], GEN)
    for generation in FOREIGN_GENERATIONS:
        [drop] = aligner.handle(record(C0, 0, generation))
        assert isinstance(drop, Drop)
        [drop] = aligner.handle(barrier(C0, 1, 1, generation))
        assert isinstance(drop, Drop)
    assert aligner.aligning is None
    assert aligner.blocked == frozenset()


def test_barriers_up_to_the_restored_checkpoint_are_stale() -> None:
    aligner = Aligner.over([C0, C1], GEN, last=3)
    for n in (1, 2, 3):
        [drop] = aligner.handle(barrier(C0, n, n))
        assert isinstance(drop, Drop)
    assert aligner.handle(barrier(C0, 4, 4)) == [Block(C0, 5)]


def test_events_on_unknown_channels_are_protocol_errors() -> None:
    aligner = Aligner.over([C0], GEN)
    with pytest.raises(ProtocolError):
        aligner.handle(record(C1, 0))
    with pytest.raises(ProtocolError):
        aligner.handle(barrier(C1, 0, 1))
    # Not even a foreign generation excuses an unknown channel.
    with pytest.raises(ProtocolError):
        aligner.handle(record(C1, 0, GEN + 1))


def test_an_aligner_needs_a_channel() -> None:
    with pytest.raises(ProtocolError):
        Aligner.over([], GEN)
    with pytest.raises(ProtocolError):
        Aligner(frozenset(), GEN)


# -- the channel model --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Item:
    """One message in a channel: a record (checkpoint None) or a barrier."""

    checkpoint: int | None
    generation: int = GEN

    @property
    def is_record(self) -> bool:
        return self.checkpoint is None

    @property
    def is_ours(self) -> bool:
        return self.generation == GEN


Contents = list[Item]
RecordId = tuple[int, int]  # (channel index, offset)


#: The channel topics of a stage's two inputs: the simulated subtask reads both,
#: so partition numbers repeat across its channels (t0[0], t1[0], t0[1], ...).
INPUT_TOPICS = ("kstream.j.s1", "kstream.j.s1.i1")


def channel_of(index: int) -> Channel:
    """Channel `index` of the simulation: alternately on each input's topic."""
    return Channel(INPUT_TOPICS[index % 2], index // 2)


def index_of(channel: Channel) -> int:
    return INPUT_TOPICS.index(channel.topic) + 2 * channel.partition


#: Zombie writes of other generations: never processed, never aligned.
FOREIGN_ITEMS = st.lists(
    st.builds(Item, st.none() | st.integers(1, 6), st.sampled_from(FOREIGN_GENERATIONS)),
    max_size=2,
)
NO_ITEMS: st.SearchStrategy[Contents] = st.just([])
RECORD_COUNT = st.integers(0, 3)


@st.composite
def channel_contents(draw: st.DrawFn, barriers: Sequence[int], foreign: bool) -> Contents:
    """Records, then each of `barriers` in order with records in between, then records."""
    zombies = FOREIGN_ITEMS if foreign else NO_ITEMS
    items: Contents = []
    for n in [*barriers, None]:
        items += [Item(None)] * draw(RECORD_COUNT)
        items += draw(zombies)
        if n is not None:
            items.append(Item(n))
    return items


def barrier_offset(items: Contents, n: int) -> int | None:
    for offset, item in enumerate(items):
        if item.is_ours and item.checkpoint == n:
            return offset
    return None


def our_records(channels: Sequence[Contents]) -> set[RecordId]:
    return {
        (c, offset)
        for c, items in enumerate(channels)
        for offset, item in enumerate(items)
        if item.is_record and item.is_ours
    }


def cut_before(channels: Sequence[Contents], n: int) -> set[RecordId] | None:
    """Records that precede barrier n on every channel; None if a channel lacks barrier n."""
    cut: set[RecordId] = set()
    for c, items in enumerate(channels):
        end = barrier_offset(items, n)
        if end is None:
            return None
        cut |= {(c, o) for o, item in enumerate(items[:end]) if item.is_record and item.is_ours}
    return cut


def on_every_channel(channels: Sequence[Contents], n: int) -> bool:
    return all(barrier_offset(items, n) is not None for items in channels)


# -- the simulated worker -----------------------------------------------------


@dataclass
class Worker:
    """Carries out the aligner's actions and checks each one as it goes."""

    channels: Sequence[Contents]
    aligner: Aligner
    #: The checkpoint the aligner was restored from: its barriers and older are stale.
    restored_from: int = 0
    #: Next offset to fetch, per channel.
    position: list[int] = field(init=False)
    #: Fetched but not yet delivered offsets, per channel (the consumer's prefetch).
    fetched: list[list[int]] = field(init=False)
    #: Blocked channel index -> (checkpoint it delivered, resume offset).
    blocked: dict[int, tuple[int, int]] = field(default_factory=dict)
    processed: set[RecordId] = field(default_factory=set)
    snapshots: list[int] = field(default_factory=list)
    #: Aborts sent while the checkpoint had not been snapshotted here.
    aborted_early: set[int] = field(default_factory=set)
    #: Aborts sent as the coordinator's timeout would: alignment could not go on.
    timed_out: set[int] = field(default_factory=set)
    abandoned: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.position = [0] * len(self.channels)
        self.fetched = [[] for _ in self.channels]

    @property
    def aligning(self) -> int | None:
        """The checkpoint the blocked channels wait for (they all wait for the same one)."""
        waiting = {n for n, _ in self.blocked.values()}
        assert len(waiting) <= 1, f"channels blocked for different checkpoints: {self.blocked}"
        return next(iter(waiting), None)

    def fetchable(self) -> list[int]:
        """Channels the consumer may fetch from: not paused, not at their end."""
        return [
            c
            for c, items in enumerate(self.channels)
            if c not in self.blocked and self.position[c] < len(items)
        ]

    def deliverable(self) -> list[int]:
        return [c for c, offsets in enumerate(self.fetched) if offsets]

    def fetch(self, c: int, size: int) -> None:
        """Fetch up to `size` items of channel c; they arrive later, even if c is paused."""
        stop = min(self.position[c] + size, len(self.channels[c]))
        self.fetched[c] += range(self.position[c], stop)
        self.position[c] = stop

    def send(self, event: Event) -> list[Action]:
        before = self.aligning
        actions = self.aligner.handle(event)
        self.check_abandon(before, event, actions)
        return actions

    def check_abandon(self, before: int | None, event: Event, actions: list[Action]) -> None:
        """`AbandonAlignment(n)` appears exactly when the alignment of n stops unfinished."""
        abandons = [a.checkpoint for a in actions if isinstance(a, AbandonAlignment)]
        moved_on = any(
            (
                isinstance(a, Block)
                and isinstance(event, BarrierArrived)
                and event.checkpoint != before
            )
            or (isinstance(a, TakeSnapshot) and a.checkpoint != before)
            for a in actions
        )
        aborted = isinstance(event, CheckpointAborted) and event.checkpoint == before
        if before is not None and (moved_on or aborted):
            assert abandons == [before], (event, actions)
            # The abandon comes first, then every channel blocked for it is unblocked.
            blocked = sorted(channel_of(c) for c in self.blocked)
            assert actions[: 1 + len(blocked)] == [
                AbandonAlignment(before),
                *(Unblock(ch) for ch in blocked),
            ]
        else:
            assert abandons == [], (event, actions)

    def deliver(self, c: int) -> None:
        """Hand the next fetched item of channel c to the aligner and carry out its actions."""
        offset = self.fetched[c].pop(0)
        item = self.channels[c][offset]
        ch = channel_of(c)
        event: Event
        if item.checkpoint is None:
            event = RecordArrived(ch, offset, item.generation)
        else:
            event = BarrierArrived(ch, offset, item.checkpoint, item.generation)
        was_blocked = c in self.blocked
        # The runtime's fast path: a record of the aligner's open generation is
        # processed without an event. It must agree with the aligner's own answer.
        fast = isinstance(event, RecordArrived) and event.generation == self.aligner.open_generation
        actions = self.send(event)
        if fast:
            assert actions == [Process()], (event, actions)
        if not item.is_ours or was_blocked:
            assert len(actions) == 1, (event, actions)
            assert isinstance(actions[0], Drop), (event, actions)
            return
        if item.is_record:
            assert actions == [Process()], (event, actions)
            assert (c, offset) not in self.processed, f"record {(c, offset)} processed twice"
            self.processed.add((c, offset))
            return
        assert item.checkpoint is not None
        if item.checkpoint <= self.restored_from:
            assert len(actions) == 1, (event, actions)
            assert isinstance(actions[0], Drop), (event, actions)
        if len(self.channels) == 1:
            assert not any(isinstance(a, Block) for a in actions), actions
        self.apply(actions, c, offset, item.checkpoint)

    def apply(self, actions: list[Action], c: int, offset: int, n: int) -> None:
        for action in actions:
            if isinstance(action, Block):
                assert action == Block(channel_of(c), offset + 1), action
                self.blocked[c] = (n, offset + 1)
            elif isinstance(action, Unblock):
                self.unblock(action)
            elif isinstance(action, TakeSnapshot):
                assert action.checkpoint == n
                self.check_snapshot(action)
            elif isinstance(action, AbandonAlignment):
                self.abandoned.append(action.checkpoint)
            else:
                assert isinstance(action, Drop), actions
                assert actions == [action], actions

    def unblock(self, action: Unblock) -> None:
        """Resume the channel and seek it back: what was fetched beyond the barrier is gone."""
        c = index_of(action.channel)
        assert c in self.blocked, f"{action} for a channel that is not blocked"
        _, resume = self.blocked.pop(c)
        self.position[c] = resume
        self.fetched[c].clear()

    def check_snapshot(self, snap: TakeSnapshot) -> None:
        n = snap.checkpoint
        assert n not in self.aborted_early, f"snapshot {n} taken after its abort"
        assert not self.snapshots or n > self.snapshots[-1], (self.snapshots, n)
        cut = cut_before(self.channels, n)
        assert cut is not None, f"snapshot {n} taken though a channel never carried barrier {n}"
        assert self.processed == cut, f"snapshot {n} is not a consistent cut"
        expected_offsets = {
            channel_of(c): offset + 1
            for c, items in enumerate(self.channels)
            if (offset := barrier_offset(items, n)) is not None
        }
        assert dict(snap.channel_offsets) == expected_offsets
        self.snapshots.append(n)

    def abort(self, n: int) -> None:
        if n not in self.snapshots:
            self.aborted_early.add(n)
        for action in self.send(CheckpointAborted(n)):
            if isinstance(action, Unblock):
                self.unblock(action)
            else:
                assert action == AbandonAlignment(n), action
                self.abandoned.append(n)

    def resolve_stall(self) -> None:
        """No channel can be read but some are blocked: the coordinator times the checkpoint out.

        That only happens when a channel never carries the barrier being aligned.
        """
        n = self.aligning
        assert n is not None
        assert not on_every_channel(self.channels, n), f"alignment of {n} stalled"
        self.timed_out.add(n)
        self.abort(n)

    def check_end(self, last: int) -> None:
        assert not self.blocked
        assert not self.deliverable()
        assert self.aligner.blocked == frozenset()
        assert self.processed == our_records(self.channels), "records missed"
        m = max((it.checkpoint or 0 for items in self.channels for it in items), default=0)
        expected = [
            n
            for n in range(last + 1, m + 1)
            if on_every_channel(self.channels, n) and n not in self.aborted_early
        ]
        assert self.snapshots == expected


ONE_IN_FIVE = st.integers(0, 4).map(lambda x: x == 0)
BATCH_SIZE = st.integers(1, 4)


def run(
    data: st.DataObject,
    channels: Sequence[Contents],
    last: int = 0,
    abort_ids: Sequence[int] = (),
) -> Worker:
    """Play the worker until every channel is read to its end.

    Each step either fetches a few items of a channel that is not paused, or
    delivers the next fetched item of some channel; so items that follow a
    barrier may reach the aligner after it blocked their channel, and
    deliveries of different channels interleave as in a real `consume()` batch.
    An abort from the coordinator may come between any two steps.
    """
    aligner = Aligner.over((channel_of(c) for c in range(len(channels))), GEN, last)
    worker = Worker(channels, aligner, restored_from=last)
    while True:
        abort_now: bool = bool(abort_ids) and data.draw(ONE_IN_FIVE)
        if abort_now:
            worker.abort(abort_ids[data.draw(st.integers(0, len(abort_ids) - 1))])
        steps = [("fetch", c) for c in worker.fetchable()]
        steps += [("deliver", c) for c in worker.deliverable()]
        if not steps:
            if not worker.blocked:
                break
            worker.resolve_stall()
            continue
        step, c = steps[data.draw(st.integers(0, len(steps) - 1))]
        if step == "fetch":
            worker.fetch(c, data.draw(BATCH_SIZE))
        else:
            worker.deliver(c)
        assert aligner.blocked == {channel_of(b) for b in worker.blocked}
    worker.check_end(last)
    return worker


@st.composite
def aligned_channels(draw: st.DrawFn, foreign: bool = True) -> tuple[list[Contents], int]:
    """1..4 channels, each carrying every barrier 1..m."""
    k = draw(st.integers(1, 4))
    m = draw(st.integers(0, 4))
    barriers = range(1, m + 1)
    return [draw(channel_contents(barriers, foreign)) for _ in range(k)], m


@st.composite
def gappy_channels(draw: st.DrawFn) -> tuple[list[Contents], int]:
    """2..4 channels; some never carried some barriers (an upstream bug)."""
    k = draw(st.integers(2, 4))
    m = draw(st.integers(1, 5))
    channels = []
    for _ in range(k):
        barriers = [n for n in range(1, m + 1) if draw(st.integers(0, 3)) > 0]
        channels.append(draw(channel_contents(barriers, foreign=False)))
    return channels, m


# -- properties ---------------------------------------------------------------


@settings(max_examples=500, deadline=None)
@given(aligned_channels(), st.data())
def test_every_snapshot_is_a_consistent_cut_and_every_record_is_processed_once(
    model: tuple[list[Contents], int], data: st.DataObject
) -> None:
    channels, m = model
    worker = run(data, channels)
    assert worker.snapshots == list(range(1, m + 1))
    assert worker.abandoned == []
    assert worker.timed_out == set()


@settings(max_examples=200, deadline=None)
@given(aligned_channels(), st.data())
def test_barriers_up_to_the_restored_checkpoint_are_ignored(
    model: tuple[list[Contents], int], data: st.DataObject
) -> None:
    channels, m = model
    last = data.draw(st.integers(0, m), label="restored from")
    worker = run(data, channels, last=last)
    assert worker.snapshots == list(range(last + 1, m + 1))


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_a_single_channel_snapshots_on_every_barrier_without_blocking(
    data: st.DataObject,
) -> None:
    m = data.draw(st.integers(0, 5))
    channel = data.draw(channel_contents(range(1, m + 1), foreign=True))
    worker = run(data, [channel])
    assert worker.snapshots == list(range(1, m + 1))


@settings(max_examples=300, deadline=None)
@given(aligned_channels(), st.data())
def test_aborted_checkpoints_are_never_taken_and_later_ones_still_are(
    model: tuple[list[Contents], int], data: st.DataObject
) -> None:
    channels, m = model
    worker = run(data, channels, abort_ids=range(1, m + 2))
    # Every checkpoint not aborted in time was taken (check_end), consistently
    # (check_snapshot); nothing ever stalled.
    assert worker.timed_out == set()
    assert set(worker.abandoned) <= worker.aborted_early


@settings(max_examples=300, deadline=None)
@given(gappy_channels(), st.data())
def test_a_newer_barrier_abandons_an_alignment_that_cannot_finish(
    model: tuple[list[Contents], int], data: st.DataObject
) -> None:
    channels, _ = model
    worker = run(data, channels)
    # Only checkpoints missing from some channel are abandoned or time out.
    for n in [*worker.abandoned, *worker.timed_out]:
        assert not on_every_channel(channels, n)


@settings(max_examples=200, deadline=None)
@given(gappy_channels(), st.data())
def test_gaps_and_aborts_together(model: tuple[list[Contents], int], data: st.DataObject) -> None:
    channels, m = model
    run(data, channels, abort_ids=range(1, m + 2))


def test_the_simulator_detects_an_inconsistent_cut() -> None:
    # Guard against a vacuous simulator: a snapshot missing a record must fail.
    channels = [[Item(None), Item(1)], [Item(1)]]
    a, b = channel_of(0), channel_of(1)
    worker = Worker(channels, Aligner.over([a, b], GEN))
    with pytest.raises(AssertionError, match="consistent cut"):
        worker.check_snapshot(TakeSnapshot(1, {a: 2, b: 1}))
    worker.processed.add((0, 0))
    with pytest.raises(AssertionError):
        worker.check_snapshot(TakeSnapshot(1, {a: 1, b: 1}))
    worker.check_snapshot(TakeSnapshot(1, {a: 2, b: 1}))
    assert worker.snapshots == [1]


def test_channels_of_two_inputs_with_the_same_partition_are_aligned_apart() -> None:
    # A stage fed by two inputs reads partition 0 of both topics: they are two
    # channels, and the snapshot waits for the barrier on each.
    a, b = Channel("kstream.j.s2", 0), Channel("kstream.j.s2.i1", 0)
    aligner = Aligner.over([a, b], GEN)
    assert aligner.handle(barrier(a, 4, 1)) == [Block(a, 5)]
    assert aligner.handle(record(b, 0)) == [Process()]
    assert isinstance(aligner.handle(record(a, 5))[0], Drop)
    assert aligner.handle(barrier(b, 1, 1)) == [TakeSnapshot(1, {a: 5, b: 2}), Unblock(a)]
