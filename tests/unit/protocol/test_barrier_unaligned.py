"""Unaligned checkpoints and the alignment timeout (`kstream.protocol.barrier.Aligner`).

Example tests give the exact actions of every transition; property tests drive
the three modes (aligned, unaligned, aligned with timeouts at random moments)
over random FIFO channels read in random batches, then restore every
completed snapshot with a fresh `Aligner` in a new generation, as the runtime
does, and check the global state it names is a consistent cut: every valid
record before barrier n is either reflected in the snapshot's state
(processed before it) or read again by the restore (inside a recorded range)
- exactly one of the two - and nothing after barrier n is. A second round
restores into a generation that takes snapshots while still replaying, and
restores again: replay windows carried through two recoveries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kstream.errors import ProtocolError
from kstream.protocol.barrier import (
    AbandonAlignment,
    Action,
    Aligner,
    Alignment,
    AlignmentTimedOut,
    BarrierArrived,
    Block,
    Channel,
    ChannelStateComplete,
    CheckpointAborted,
    Drop,
    Process,
    RecordArrived,
    Replay,
    TakeSnapshot,
    Unblock,
)

GEN = 7
UNALIGNED = Alignment.UNALIGNED

C0 = Channel("kstream.j.s1", 0)
C1 = Channel("kstream.j.s1", 1)
C2 = Channel("kstream.j.s1", 2)


def record(channel: Channel, offset: int, generation: int = GEN) -> RecordArrived:
    return RecordArrived(channel, offset, generation)


def barrier(
    channel: Channel,
    offset: int,
    n: int,
    positions: Mapping[Channel, int] | None = None,
    generation: int = GEN,
) -> BarrierArrived:
    return BarrierArrived(channel, offset, n, generation, dict(positions or {}))


# -- example tests: every transition ------------------------------------------


def test_unaligned_snapshots_at_the_first_barrier_and_completes_at_the_last() -> None:
    a = Aligner.over([C0, C1, C2], GEN, mode=UNALIGNED)
    assert a.handle(barrier(C0, 4, 1, {C1: 2, C2: 9})) == [
        TakeSnapshot(1, {C0: 5, C1: 2, C2: 9}, frozenset({C1, C2}))
    ]
    assert a.recording == {1: frozenset({C1, C2})}
    # Nothing is blocked: every channel goes on being processed (fast path open).
    assert a.blocked == frozenset()
    assert a.open_generation == GEN
    assert a.handle(record(C0, 5)) == [Process()]
    assert a.handle(record(C1, 2)) == [Process()]
    assert a.handle(barrier(C1, 6, 1)) == []
    assert a.recording == {1: frozenset({C2})}
    assert a.handle(barrier(C2, 12, 1)) == [
        ChannelStateComplete(
            1,
            {C0: 5, C1: 2, C2: 9},
            {C1: (Replay(6, GEN),), C2: (Replay(12, GEN),)},
        )
    ]
    assert a.recording == {}


def test_unaligned_empty_range_resumes_after_the_barrier() -> None:
    # C1 was at its barrier when the snapshot was taken: nothing in flight.
    a = Aligner.over([C0, C1], GEN, mode=UNALIGNED)
    assert a.handle(barrier(C0, 0, 1, {C1: 3})) == [
        TakeSnapshot(1, {C0: 1, C1: 3}, frozenset({C1}))
    ]
    assert a.handle(barrier(C1, 3, 1)) == [ChannelStateComplete(1, {C0: 1, C1: 4}, {})]


def test_unaligned_single_channel_snapshot_is_complete_at_once() -> None:
    a = Aligner.over([C0], GEN, mode=UNALIGNED)
    assert a.handle(barrier(C0, 2, 1)) == [TakeSnapshot(1, {C0: 3})]
    assert a.recording == {}


def test_unaligned_needs_the_position_of_every_other_channel() -> None:
    a = Aligner.over([C0, C1], GEN, mode=UNALIGNED)
    with pytest.raises(ProtocolError, match="no position"):
        a.handle(barrier(C0, 0, 1, {}))


def test_overlapping_checkpoints_are_recorded_both() -> None:
    a = Aligner.over([C0, C1], GEN, mode=UNALIGNED)
    assert a.handle(barrier(C0, 0, 1, {C1: 0}))[0] == TakeSnapshot(
        1, {C0: 1, C1: 0}, frozenset({C1})
    )
    # Barrier 2 on C0 while C1 still records for 1: snapshot 2 is taken too.
    assert a.handle(barrier(C0, 3, 2, {C1: 2})) == [
        TakeSnapshot(2, {C0: 4, C1: 2}, frozenset({C1}))
    ]
    assert a.recording == {1: frozenset({C1}), 2: frozenset({C1})}
    assert a.handle(barrier(C1, 5, 1)) == [
        ChannelStateComplete(1, {C0: 1, C1: 0}, {C1: (Replay(5, GEN),)})
    ]
    # The ranges overlap: [0, 5) for 1, [2, 7) for 2 (the barrier of 1 at 5 is
    # inside; a restore drops it as old generation).
    assert a.handle(barrier(C1, 7, 2)) == [
        ChannelStateComplete(2, {C0: 4, C1: 2}, {C1: (Replay(7, GEN),)})
    ]


def test_a_skipped_barrier_abandons_the_recording() -> None:
    a = Aligner.over([C0, C1], GEN, mode=UNALIGNED)
    a.handle(barrier(C0, 0, 1, {C1: 0}))
    # C1 carries 2 without 1 (its upstream declined 1): 1 can never complete.
    assert a.handle(barrier(C1, 1, 2, {C0: 1})) == [
        AbandonAlignment(1),
        TakeSnapshot(2, {C1: 2, C0: 1}, frozenset({C0})),
    ]
    assert a.recording == {2: frozenset({C0})}


def test_a_barrier_older_than_a_recording_on_its_channel_is_stale() -> None:
    a = Aligner.over([C0, C1], GEN, mode=UNALIGNED)
    a.handle(barrier(C0, 0, 2, {C1: 0}))
    assert isinstance(a.handle(barrier(C1, 0, 1))[0], Drop)
    assert a.recording == {2: frozenset({C1})}


def test_abort_of_a_recording_checkpoint_abandons_it_and_its_barriers_are_stale() -> None:
    a = Aligner.over([C0, C1], GEN, mode=UNALIGNED)
    a.handle(barrier(C0, 0, 1, {C1: 0}))
    assert a.handle(CheckpointAborted(1)) == [AbandonAlignment(1)]
    assert a.recording == {}
    assert isinstance(a.handle(barrier(C1, 2, 1))[0], Drop)
    # The next checkpoint is taken normally.
    assert a.handle(barrier(C1, 3, 2, {C0: 1}))[0] == TakeSnapshot(
        2, {C1: 4, C0: 1}, frozenset({C0})
    )


def test_abort_before_any_barrier_makes_unaligned_barriers_stale() -> None:
    a = Aligner.over([C0, C1], GEN, mode=UNALIGNED)
    assert a.handle(CheckpointAborted(1)) == []
    assert isinstance(a.handle(barrier(C0, 0, 1, {C1: 0}))[0], Drop)


def test_timeout_switches_the_alignment_to_unaligned() -> None:
    a = Aligner.over([C0, C1, C2], GEN)
    assert a.handle(barrier(C0, 4, 1)) == [Block(C0, 5)]
    assert a.handle(record(C1, 0)) == [Process()]
    assert a.handle(AlignmentTimedOut(1, {C1: 1, C2: 0})) == [
        TakeSnapshot(1, {C0: 5, C1: 1, C2: 0}, frozenset({C1, C2})),
        Unblock(C0),
    ]
    assert a.blocked == frozenset()
    assert a.aligning is None
    assert a.open_generation == GEN
    assert a.handle(barrier(C2, 0, 1)) == []
    assert a.handle(barrier(C1, 3, 1)) == [
        ChannelStateComplete(1, {C0: 5, C1: 1, C2: 1}, {C1: (Replay(3, GEN),)})
    ]
    # Checkpoint 2 aligns again (the timeout switched only checkpoint 1).
    assert a.handle(barrier(C0, 9, 2)) == [Block(C0, 10)]


def test_stale_timeouts_are_ignored() -> None:
    a = Aligner.over([C0, C1], GEN)
    assert a.handle(AlignmentTimedOut(1, {})) == []
    a.handle(barrier(C0, 0, 2))
    assert a.handle(AlignmentTimedOut(1, {})) == []
    assert a.aligning == 2


def test_aligned_barrier_during_a_recording_of_the_previous_one_blocks() -> None:
    a = Aligner.over([C0, C1], GEN)
    a.handle(barrier(C0, 0, 1))
    a.handle(AlignmentTimedOut(1, {C1: 0}))
    # C0 delivers 2 while C1 still records 1: aligned mode blocks C0 for 2.
    assert a.handle(barrier(C0, 1, 2)) == [Block(C0, 2)]
    assert a.handle(barrier(C1, 4, 1)) == [
        ChannelStateComplete(1, {C0: 1, C1: 0}, {C1: (Replay(4, GEN),)})
    ]
    assert a.handle(barrier(C1, 5, 2)) == [TakeSnapshot(2, {C0: 2, C1: 6}), Unblock(C0)]


def test_replay_window_admits_named_old_records_only() -> None:
    a = Aligner.over([C0, C1], GEN + 1, last=3, replay={C1: (Replay(6, GEN),)})
    assert a.handle(record(C1, 4, GEN)) == [Process()]
    assert a.handle(record(C1, 5, GEN)) == [Process()]
    # The barrier that ended the range, and what followed it, stay dropped.
    assert isinstance(a.handle(barrier(C1, 6, 3, generation=GEN))[0], Drop)
    assert isinstance(a.handle(record(C1, 7, GEN))[0], Drop)
    # Another old generation inside the range is a zombie write: dropped.
    assert isinstance(a.handle(record(C1, 5, GEN - 1))[0], Drop)
    # The window is per channel.
    assert isinstance(a.handle(record(C0, 4, GEN))[0], Drop)
    assert a.handle(record(C0, 8, GEN + 1)) == [Process()]


def test_windows_still_open_at_the_snapshot_are_carried_into_its_range() -> None:
    a = Aligner.over(
        [C0, C1], GEN + 1, last=1, mode=UNALIGNED, replay={C1: (Replay(6, GEN), Replay(2, 3))}
    )
    a.handle(barrier(C0, 10, 2, {C1: 4}, generation=GEN + 1))
    assert a.handle(barrier(C1, 12, 2, generation=GEN + 1)) == [
        ChannelStateComplete(2, {C0: 11, C1: 4}, {C1: (Replay(6, GEN), Replay(12, GEN + 1))})
    ]


def test_replay_windows_must_name_inputs() -> None:
    with pytest.raises(ProtocolError, match="replay window"):
        Aligner.over([C0], GEN, replay={C1: (Replay(3, GEN - 1),)})


# -- the model ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Item:
    """One message of a channel: a record (checkpoint None) or a barrier."""

    checkpoint: int | None
    generation: int


Contents = list[Item]
RecordId = tuple[int, int]  # (channel index, offset)


def channel_of(index: int) -> Channel:
    return Channel("kstream.j.s1", index)


def accepted(aligner: Aligner, c: int, offset: int, item: Item) -> bool:
    """Whether a record is valid input for `aligner` (its generation or a replay window)."""
    action = aligner.handle(RecordArrived(channel_of(c), offset, item.generation))
    return action == [Process()]


@st.composite
def generation_contents(
    draw: st.DrawFn, barriers: Sequence[int], generation: int, zombies: bool
) -> Contents:
    """Records, then each barrier in order with records between; zombie writes interleaved."""
    items: Contents = []
    for n in [*barriers, None]:
        items += [Item(None, generation)] * draw(st.integers(0, 3))
        if zombies:
            items += draw(
                st.lists(
                    st.builds(Item, st.none() | st.integers(1, 6), st.just(generation - 5)),
                    max_size=1,
                )
            )
        if n is not None:
            items.append(Item(n, generation))
    return items


@dataclass
class Snapshot:
    state: set[RecordId]
    offsets: dict[Channel, int]
    replay: dict[Channel, tuple[Replay, ...]] = field(default_factory=dict)
    complete: bool = False


@dataclass
class Sim:
    """Plays the worker: FIFO channels fetched in batches, actions carried out."""

    channels: Sequence[Contents]
    aligner: Aligner
    #: Where each channel is read from (a restore's offsets).
    start: list[int]
    #: State the subtask was restored with (records processed before the restore).
    base: set[RecordId]
    timeouts: bool
    fetch_at: list[int] = field(init=False)
    fetched: list[list[int]] = field(init=False)
    #: Next offset to process, per channel (what the runtime passes as positions).
    pos: list[int] = field(init=False)
    blocked: dict[int, int] = field(default_factory=dict)
    processed: list[RecordId] = field(default_factory=list)
    snapshots: dict[int, Snapshot] = field(default_factory=dict)
    abandoned: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.fetch_at = list(self.start)
        self.pos = list(self.start)
        self.fetched = [[] for _ in self.channels]

    def positions(self) -> dict[Channel, int]:
        return {channel_of(c): p for c, p in enumerate(self.pos)}

    def steps(self) -> list[tuple[str, int]]:
        out = [
            ("fetch", c)
            for c, items in enumerate(self.channels)
            if c not in self.blocked and self.fetch_at[c] < len(items)
        ]
        out += [("deliver", c) for c, f in enumerate(self.fetched) if f]
        if self.timeouts and self.aligner.aligning is not None:
            out.append(("timeout", -1))
        return out

    def deliver(self, c: int) -> None:
        offset = self.fetched[c].pop(0)
        item = self.channels[c][offset]
        ch = channel_of(c)
        if item.checkpoint is None:
            fast = item.generation == self.aligner.open_generation
            actions = self.aligner.handle(RecordArrived(ch, offset, item.generation))
            if fast:
                assert actions == [Process()]
            if actions == [Process()]:
                rid = (c, offset)
                assert rid not in self.processed, f"{rid} processed twice"
                assert rid not in self.base, f"{rid} in the restored state and processed"
                self.processed.append(rid)
            self.pos[c] = offset + 1
            return
        event = BarrierArrived(ch, offset, item.checkpoint, item.generation, self.positions())
        self.pos[c] = offset + 1
        self.apply(self.aligner.handle(event))

    def apply(self, actions: list[Action]) -> None:
        for action in actions:
            match action:
                case Block():
                    self.blocked[action.channel.partition] = action.resume_offset
                case Unblock():
                    c = action.channel.partition
                    resume = self.blocked.pop(c)
                    self.fetch_at[c] = self.pos[c] = resume
                    self.fetched[c].clear()
                case TakeSnapshot():
                    n = action.checkpoint
                    assert n not in self.snapshots
                    for ch in action.recording:
                        assert action.channel_offsets[ch] == self.pos[ch.partition]
                    self.snapshots[n] = Snapshot(
                        self.base | set(self.processed),
                        dict(action.channel_offsets),
                        complete=not action.recording,
                    )
                case ChannelStateComplete():
                    snap = self.snapshots[action.checkpoint]
                    assert not snap.complete
                    snap.offsets = dict(action.channel_offsets)
                    snap.replay = dict(action.replay)
                    snap.complete = True
                case AbandonAlignment():
                    self.abandoned.append(action.checkpoint)
                case Drop() | Process():
                    pass

    def run(self, data: st.DataObject) -> None:
        while steps := self.steps():
            step, c = steps[data.draw(st.integers(0, len(steps) - 1))]
            if step == "fetch":
                stop = min(self.fetch_at[c] + data.draw(st.integers(1, 4)), len(self.channels[c]))
                self.fetched[c] += range(self.fetch_at[c], stop)
                self.fetch_at[c] = stop
            elif step == "deliver":
                self.deliver(c)
            else:
                n = self.aligner.aligning
                assert n is not None
                self.apply(self.aligner.handle(AlignmentTimedOut(n, self.positions())))
        assert not self.blocked
        assert self.aligner.recording == {}


def restore_reads(
    channels: Sequence[Contents], snap: Snapshot, generation: int
) -> tuple[Aligner, set[RecordId]]:
    """What a restore from `snap` into `generation` reads of the existing log."""
    aligner = Aligner.over(
        (channel_of(c) for c in range(len(channels))), generation, replay=snap.replay
    )
    reads = {
        (c, o)
        for c, items in enumerate(channels)
        for o in range(max(snap.offsets[channel_of(c)], 0), len(items))
        if items[o].checkpoint is None and accepted(aligner, c, o, items[o])
    }
    return aligner, reads


def valid_before(
    channels: Sequence[Contents], start: Sequence[int], rule: Aligner, n: int, generation: int
) -> set[RecordId]:
    """Valid records between the start offsets and barrier n of `generation`, per channel."""
    out: set[RecordId] = set()
    for c, items in enumerate(channels):
        end = next(o for o, it in enumerate(items) if it == Item(n, generation))
        out |= {
            (c, o)
            for o in range(start[c], end)
            if items[o].checkpoint is None and accepted(rule, c, o, items[o])
        }
    return out


def check_cuts(sim: Sim, rule: Aligner, generation: int, checkpoints: Sequence[int]) -> None:
    """Every completed snapshot names a consistent cut, each valid record exactly once."""
    assert sorted(n for n, s in sim.snapshots.items() if s.complete) == list(checkpoints)
    for n in checkpoints:
        snap = sim.snapshots[n]
        _, replayed = restore_reads(sim.channels, snap, generation + 1)
        assert not snap.state & replayed, f"snapshot {n}: records both in state and replayed"
        expected = sim.base | valid_before(sim.channels, sim.start, rule, n, generation)
        assert snap.state | replayed == expected, f"snapshot {n} is not a consistent cut"


MODES = ("aligned", "unaligned", "timeout")


def simulate(
    data: st.DataObject,
    channels: Sequence[Contents],
    mode: str,
    generation: int,
    *,
    last: int = 0,
    start: Sequence[int] | None = None,
    replay: Mapping[Channel, tuple[Replay, ...]] | None = None,
    base: set[RecordId] | None = None,
) -> Sim:
    alignment = UNALIGNED if mode == "unaligned" else Alignment.ALIGNED
    aligner = Aligner.over(
        (channel_of(c) for c in range(len(channels))), generation, last, alignment, replay
    )
    sim = Sim(
        channels, aligner, list(start or [0] * len(channels)), base or set(), mode == "timeout"
    )
    sim.run(data)
    return sim


@st.composite
def model(draw: st.DrawFn) -> tuple[list[Contents], int]:
    k = draw(st.integers(1, 4))
    m = draw(st.integers(1, 4))
    return [draw(generation_contents(range(1, m + 1), GEN, True)) for _ in range(k)], m


@settings(max_examples=400, deadline=None)
@given(model(), st.sampled_from(MODES), st.data())
def test_every_mode_records_consistent_cuts_with_each_record_once(
    world: tuple[list[Contents], int], mode: str, data: st.DataObject
) -> None:
    channels, m = world
    sim = simulate(data, channels, mode, GEN)
    rule = Aligner.over((channel_of(c) for c in range(len(channels))), GEN)
    check_cuts(sim, rule, GEN, range(1, m + 1))
    # Every valid record was processed exactly once over the whole run.
    everything = {
        (c, o)
        for c, items in enumerate(channels)
        for o, it in enumerate(items)
        if it == Item(None, GEN)
    }
    assert sorted(sim.processed) == sorted(everything)
    assert sim.abandoned == []
    if mode == "aligned":
        assert all(not s.replay for s in sim.snapshots.values())


@settings(max_examples=200, deadline=None)
@given(model(), st.data())
def test_the_three_modes_name_the_same_global_state(
    world: tuple[list[Contents], int], data: st.DataObject
) -> None:
    channels, m = world
    named: dict[str, list[set[RecordId]]] = {}
    for mode in MODES:
        sim = simulate(data, channels, mode, GEN)
        named[mode] = [
            sim.snapshots[n].state | restore_reads(channels, sim.snapshots[n], GEN + 1)[1]
            for n in range(1, m + 1)
        ]
    assert named["aligned"] == named["unaligned"] == named["timeout"]


@settings(max_examples=300, deadline=None)
@given(model(), st.sampled_from(MODES), st.sampled_from(MODES), st.data())
def test_restoring_while_still_replaying_and_restoring_again_stays_exactly_once(
    world: tuple[list[Contents], int], first: str, second: str, data: st.DataObject
) -> None:
    channels, m = world
    sim = simulate(data, channels, first, GEN)
    n = data.draw(st.integers(1, m), label="restored from")
    snap = sim.snapshots[n]
    # The new generation appends its own records and barriers n+1.. to the log
    # (upstream regenerates after its barrier n); the old ones stay in front.
    gen2 = GEN + 1
    k = data.draw(st.integers(1, 3), label="new checkpoints")
    log = [
        items + data.draw(generation_contents(range(n + 1, n + k + 1), gen2, False))
        for items in channels
    ]
    start = [max(snap.offsets[channel_of(c)], 0) for c in range(len(channels))]
    rule, replayed = restore_reads(channels, snap, gen2)
    resumed = simulate(
        data, log, second, gen2, last=n, start=start, replay=snap.replay, base=snap.state
    )
    # The restored run processed exactly what the snapshot said it would replay,
    # plus the new generation's records.
    new = {
        (c, o)
        for c, items in enumerate(log)
        for o, it in enumerate(items)
        if it.generation == gen2 and it.checkpoint is None
    }
    assert set(resumed.processed) == replayed | new
    assert len(resumed.processed) == len(set(resumed.processed))
    check_cuts(resumed, rule, gen2, range(n + 1, n + k + 1))


def test_the_simulator_detects_a_record_both_in_state_and_replayed() -> None:
    # Guard against a vacuous check: a range that starts too early is caught.
    channels = [[Item(None, GEN), Item(1, GEN)], [Item(None, GEN), Item(1, GEN)]]
    sim = Sim(channels, Aligner.over([channel_of(0), channel_of(1)], GEN), [0, 0], set(), False)
    rule = Aligner.over([channel_of(0), channel_of(1)], GEN)
    sim.snapshots[1] = Snapshot(
        {(0, 0), (1, 0)},
        {channel_of(0): 2, channel_of(1): 0},
        {channel_of(1): (Replay(1, GEN),)},
        complete=True,
    )
    with pytest.raises(AssertionError, match="both in state and replayed"):
        check_cuts(sim, rule, GEN, [1])
    sim.snapshots[1].offsets[channel_of(1)] = 2
    sim.snapshots[1].replay = {}
    check_cuts(sim, rule, GEN, [1])
    sim.snapshots[1].state = {(0, 0)}
    with pytest.raises(AssertionError, match="consistent cut"):
        check_cuts(sim, rule, GEN, [1])


def test_report_says_which_barriers_arrived_and_which_channels_are_recorded() -> None:
    a = Aligner.over([C0, C1, C2], GEN, mode=UNALIGNED)
    assert a.report("s1-0") is None  # neither aligning nor recording
    a.handle(barrier(C0, 4, 1, {C1: 2, C2: 9}))
    r = a.report("s1-0")
    assert r is not None
    assert (r.task, r.channels, r.recording_for) == ("s1-0", 3, 1)
    assert r.recording == ((str(C1), 2), (str(C2), 9))
    a.handle(barrier(C1, 6, 1))
    r = a.report("s1-0")
    assert r is not None
    assert r.recording == ((str(C2), 9),)
    a.handle(barrier(C2, 11, 1))
    assert a.report("s1-0") is None  # recorded: the snapshot is complete


def test_report_of_an_aligned_barrier_lists_the_arrived_channels() -> None:
    a = Aligner.over([C0, C1], GEN)
    a.handle(barrier(C1, 3, 2))
    r = a.report("s1-1")
    assert r is not None
    assert (r.checkpoint, r.arrived, r.recording_for) == (2, ((str(C1), 4),), None)
