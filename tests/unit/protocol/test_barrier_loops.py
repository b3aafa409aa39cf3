"""The loop head's marker rule (`Aligner(logged=...)`): align the forward channels,
log the loop channels from the snapshot until the barrier comes back.

Example tests give the actions of each transition. The property tests play a
loop head whose loop channel it writes itself (the body and tail fused into
the head: what a record fed back depends on what the head processed, so the
loop channel is generated as the run goes, not drawn in advance): every
processed record with hops left feeds a child back; every snapshot forwards
its barrier into the loop. Each completed snapshot must name a consistent
cut: the records it reflects plus those a restore replays are exactly the
forward records before its barriers and the children of what it reflects,
each once. Restores run in new generations, twice in a row, and every record
is processed exactly once along the surviving history.
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
F0 = Channel("kstream.j.s1", 0)
F1 = Channel("kstream.j.s1", 1)
L0 = Channel("kstream.j.s1.loop", 0)


def barrier(
    channel: Channel, offset: int, n: int, positions: Mapping[Channel, int], gen: int = GEN
) -> BarrierArrived:
    return BarrierArrived(channel, offset, n, gen, dict(positions))


# -- example tests ------------------------------------------------------------


def test_a_loop_head_aligns_its_forward_channels_and_logs_its_loop() -> None:
    a = Aligner.over([F0, F1, L0], GEN, logged=[L0])
    pos = {F0: 4, F1: 8, L0: 2}
    assert a.handle(barrier(F0, 3, 1, pos)) == [Block(F0, 4)]
    # A fed-back record while aligning is processed: the loop is never blocked.
    assert a.handle(RecordArrived(L0, 2, GEN)) == [Process()]
    pos[L0] = 3
    assert a.handle(RecordArrived(F0, 4, GEN)) == [
        Drop("channel blocked for alignment; re-read after the barrier")
    ]
    actions = a.handle(barrier(F1, 7, 1, pos))
    assert actions == [TakeSnapshot(1, {F0: 4, F1: 8, L0: 3}, frozenset({L0})), Unblock(F0)]
    assert a.recording == {1: frozenset({L0})}
    # Fed back before barrier 1 came around: channel state [3, 6) of the snapshot.
    for o in (3, 4, 5):
        assert a.handle(RecordArrived(L0, o, GEN)) == [Process()]
    done = a.handle(barrier(L0, 6, 1, {**pos, L0: 6}))
    assert done == [ChannelStateComplete(1, {F0: 4, F1: 8, L0: 3}, {L0: (Replay(6, GEN),)})]
    assert a.recording == {}


def test_an_empty_loop_range_resumes_after_the_barrier() -> None:
    a = Aligner.over([F0, L0], GEN, logged=[L0])
    [snap] = a.handle(barrier(F0, 0, 1, {F0: 1, L0: 5}))
    assert snap == TakeSnapshot(1, {F0: 1, L0: 5}, frozenset({L0}))
    assert a.handle(barrier(L0, 5, 1, {F0: 1, L0: 6})) == [
        ChannelStateComplete(1, {F0: 1, L0: 6}, {})
    ]


def test_a_snapshot_started_inside_the_loop_is_aligned_with_the_loop_blocked() -> None:
    # A source feeding the loop's body started snapshot 1: its barrier comes
    # around the loop before the relay brings it to the head's forward input.
    a = Aligner.over([F0, L0], GEN, logged=[L0])
    assert a.handle(barrier(L0, 2, 1, {F0: 5, L0: 3})) == [Block(L0, 3)]
    assert a.aligning == 1
    # Fed back after q's snapshot: not in this cut, so not processed before it.
    assert a.handle(RecordArrived(L0, 3, GEN)) == [
        Drop("channel blocked for alignment; re-read after the barrier")
    ]
    assert a.handle(RecordArrived(F0, 5, GEN)) == [Process()]
    # The loop's barrier came before the snapshot: nothing to record on it.
    assert a.handle(barrier(F0, 6, 1, {F0: 7, L0: 3})) == [
        TakeSnapshot(1, {F0: 7, L0: 3}, frozenset()),
        Unblock(L0),
    ]
    assert a.recording == {}


def test_a_snapshot_started_inside_the_loop_is_taken_at_once_unaligned() -> None:
    a = Aligner.over([F0, L0], GEN, mode=Alignment.UNALIGNED, logged=[L0])
    assert a.handle(barrier(L0, 2, 1, {F0: 5, L0: 3})) == [
        TakeSnapshot(1, {F0: 5, L0: 3}, frozenset({F0}))
    ]
    assert a.recording == {1: frozenset({F0})}
    for o in (5, 6):
        assert a.handle(RecordArrived(F0, o, GEN)) == [Process()]
    # The forward channel's records before its barrier are the snapshot's channel state.
    assert a.handle(barrier(F0, 7, 1, {F0: 8, L0: 3})) == [
        ChannelStateComplete(1, {F0: 5, L0: 3}, {F0: (Replay(7, GEN),)})
    ]


@pytest.mark.parametrize("mode", list(Alignment))
def test_a_loop_barrier_of_an_aborted_snapshot_is_dropped(mode: Alignment) -> None:
    a = Aligner.over([F0, L0], GEN, mode=mode, logged=[L0])
    a.handle(CheckpointAborted(1))
    assert a.handle(barrier(L0, 0, 1, {F0: 0, L0: 1})) == [
        Drop("barrier of a checkpoint already taken or aborted")
    ]
    assert a.aligning is None
    assert a.recording == {}


def test_the_next_checkpoint_may_start_while_the_loop_still_records_the_last() -> None:
    a = Aligner.over([F0, L0], GEN, logged=[L0])
    a.handle(barrier(F0, 0, 1, {F0: 1, L0: 0}))
    a.handle(barrier(F0, 1, 2, {F0: 2, L0: 1}))
    assert a.recording == {1: frozenset({L0}), 2: frozenset({L0})}
    assert a.handle(barrier(L0, 3, 1, {F0: 2, L0: 4})) == [
        ChannelStateComplete(1, {F0: 1, L0: 0}, {L0: (Replay(3, GEN),)})
    ]
    assert a.handle(barrier(L0, 5, 2, {F0: 2, L0: 6})) == [
        ChannelStateComplete(2, {F0: 2, L0: 1}, {L0: (Replay(5, GEN),)})
    ]


def test_a_loop_that_skipped_a_barrier_abandons_its_recording() -> None:
    a = Aligner.over([F0, L0], GEN, logged=[L0])
    a.handle(barrier(F0, 0, 1, {F0: 1, L0: 0}))
    a.handle(barrier(F0, 1, 2, {F0: 2, L0: 0}))
    assert a.handle(barrier(L0, 0, 2, {F0: 2, L0: 1})) == [
        AbandonAlignment(1),
        ChannelStateComplete(2, {F0: 2, L0: 1}, {}),
    ]


def test_loop_channels_must_be_inputs_and_leave_a_forward_one() -> None:
    with pytest.raises(ProtocolError, match=r"loop channel .* not an input"):
        Aligner.over([F0], GEN, logged=[L0])
    with pytest.raises(ProtocolError, match="needs an input besides its loop channels"):
        Aligner.over([L0], GEN, logged=[L0])


# -- the model -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Item:
    """A channel message: a record (checkpoint None) with `hops` left to loop, or a barrier."""

    checkpoint: int | None
    generation: int
    hops: int = 0


RecordId = tuple[int, int]  # (channel index, offset); the loop channel is the last index


def channel(index: int, k: int) -> Channel:
    return L0 if index == k else Channel("kstream.j.s1", index)


@st.composite
def forward(draw: st.DrawFn, barriers: Sequence[int], gen: int, zombies: bool) -> list[Item]:
    items: list[Item] = []
    for n in [*barriers, None]:
        items += draw(
            st.lists(st.builds(Item, st.none(), st.just(gen), st.integers(0, 3)), max_size=3)
        )
        if zombies:
            items += draw(
                st.lists(
                    st.builds(Item, st.none() | st.integers(1, 6), st.just(gen - 5)), max_size=1
                )
            )
        if n is not None:
            items.append(Item(n, gen))
    return items


@dataclass
class Snap:
    state: set[RecordId]
    offsets: dict[Channel, int]
    replay: dict[Channel, tuple[Replay, ...]] = field(default_factory=dict)
    complete: bool = False


@dataclass
class LoopSim:
    """A loop head that writes its own loop channel (`logs[k]`) as it processes."""

    logs: list[list[Item]]  # k forward channels, then the loop channel (appended to)
    aligner: Aligner
    start: list[int]
    base: set[RecordId]
    #: Parent -> the child it fed back, for every parent in the surviving history.
    emitted: dict[RecordId, RecordId]
    timeouts: bool
    fetch_at: list[int] = field(init=False)
    fetched: list[list[int]] = field(init=False)
    pos: list[int] = field(init=False)
    blocked: dict[int, int] = field(default_factory=dict)
    processed: list[RecordId] = field(default_factory=list)
    snapshots: dict[int, Snap] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.fetch_at, self.pos = list(self.start), list(self.start)
        self.fetched = [[] for _ in self.logs]

    @property
    def k(self) -> int:
        return len(self.logs) - 1

    def positions(self) -> dict[Channel, int]:
        return {channel(c, self.k): p for c, p in enumerate(self.pos)}

    def run(self, data: st.DataObject) -> None:
        while True:
            steps = [
                ("fetch", c)
                for c, items in enumerate(self.logs)
                if c not in self.blocked and self.fetch_at[c] < len(items)
            ]
            steps += [("deliver", c) for c, f in enumerate(self.fetched) if f]
            if self.timeouts and self.aligner.aligning is not None:
                steps.append(("timeout", -1))
            if not steps:
                break
            step, c = steps[data.draw(st.integers(0, len(steps) - 1))]
            if step == "fetch":
                stop = min(self.fetch_at[c] + data.draw(st.integers(1, 3)), len(self.logs[c]))
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

    def deliver(self, c: int) -> None:
        offset = self.fetched[c].pop(0)
        item, ch = self.logs[c][offset], channel(c, self.k)
        self.pos[c] = offset + 1
        if item.checkpoint is not None:
            self.apply(
                self.aligner.handle(
                    BarrierArrived(ch, offset, item.checkpoint, item.generation, self.positions())
                )
            )
            return
        fast = item.generation == self.aligner.open_generation
        actions = self.aligner.handle(RecordArrived(ch, offset, item.generation))
        if fast:
            assert actions == [Process()]
        if actions != [Process()]:
            return
        rid = (c, offset)
        assert rid not in self.processed, f"{rid} processed twice"
        assert rid not in self.base, f"{rid} in the restored state and processed"
        self.processed.append(rid)
        if item.hops:
            # Fed back in the aligner's generation, like every record the head writes.
            self.emitted[rid] = (self.k, len(self.logs[self.k]))
            self.logs[self.k].append(Item(None, self.aligner.generation, item.hops - 1))

    def apply(self, actions: list[Action]) -> None:
        for action in actions:
            match action:
                case Block():
                    assert action.channel != L0, "a loop channel was blocked"
                    self.blocked[action.channel.partition] = action.resume_offset
                case Unblock():
                    c = action.channel.partition
                    self.fetch_at[c] = self.pos[c] = self.blocked.pop(c)
                    self.fetched[c].clear()
                case TakeSnapshot():
                    assert L0 in action.recording, "the loop channel was not logged"
                    self.snapshots[action.checkpoint] = Snap(
                        self.base | set(self.processed), dict(action.channel_offsets)
                    )
                    # The head forwards the barrier: into the loop, too.
                    self.logs[self.k].append(Item(action.checkpoint, self.aligner.generation))
                case ChannelStateComplete():
                    snap = self.snapshots[action.checkpoint]
                    snap.offsets, snap.replay = dict(action.channel_offsets), dict(action.replay)
                    snap.complete = True
                case AbandonAlignment():
                    raise AssertionError(f"checkpoint {action.checkpoint} abandoned")
                case Drop() | Process():
                    pass


def restored(logs: Sequence[Sequence[Item]], snap: Snap, gen: int, last: int, mode: str) -> Aligner:
    k = len(logs) - 1
    return Aligner.over(
        (channel(c, k) for c in range(k + 1)),
        gen,
        last,
        Alignment.UNALIGNED if mode == "unaligned" else Alignment.ALIGNED,
        snap.replay,
        logged=[L0],
    )


def replayed(logs: Sequence[Sequence[Item]], snap: Snap, gen: int) -> set[RecordId]:
    """What a restore from `snap` into generation `gen` processes of the log as it is."""
    k = len(logs) - 1
    rule = Aligner.over((channel(c, k) for c in range(k + 1)), gen, replay=snap.replay, logged=[L0])
    return {
        (c, o)
        for c, items in enumerate(logs)
        for o in range(max(snap.offsets[channel(c, k)], 0), len(items))
        if items[o].checkpoint is None
        and rule.handle(RecordArrived(channel(c, k), o, items[o].generation)) == [Process()]
    }


def check_cuts(
    sim: LoopSim, prior: set[RecordId], gen: int, rule: Aligner, ns: Sequence[int]
) -> None:
    """Each completed snapshot: reflected + replayed == sent before its cut, disjoint."""
    assert sorted(n for n, s in sim.snapshots.items() if s.complete) == list(ns)
    for n in ns:
        snap = sim.snapshots[n]
        again = replayed(sim.logs, snap, gen + 1)
        assert not snap.state & again, f"snapshot {n}: records both reflected and replayed"
        sent = set(prior)
        for c in range(sim.k):
            end = sim.logs[c].index(Item(n, gen))
            sent |= {
                (c, o)
                for o in range(sim.start[c], end)
                if sim.logs[c][o].checkpoint is None
                and rule.handle(RecordArrived(channel(c, sim.k), o, sim.logs[c][o].generation))
                == [Process()]
            }
        sent |= {sim.emitted[r] for r in snap.state if r in sim.emitted}
        assert snap.state | again == sent, f"snapshot {n} is not a consistent cut"


MODES = ("aligned", "unaligned", "timeout")


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 3),
    st.integers(1, 3),
    st.lists(st.sampled_from(MODES), min_size=3, max_size=3),
    st.data(),
)
def test_a_loop_head_records_consistent_cuts_across_two_restores(
    k: int, m: int, modes: list[str], data: st.DataObject
) -> None:
    gen = GEN
    logs: list[list[Item]] = [data.draw(forward(range(1, m + 1), gen, True)) for _ in range(k)]
    logs.append([])
    start, base, prior, last, emitted = [0] * (k + 1), set[RecordId](), set[RecordId](), 0, {}
    replay: dict[Channel, tuple[Replay, ...]] = {}
    checkpoints = range(1, m + 1)
    for round_, mode in enumerate(modes):
        rule = Aligner.over((channel(c, k) for c in range(k + 1)), gen, replay=replay, logged=[L0])
        expected_replay = set(prior) - base
        aligner = restored(logs, Snap(set(), {}, replay), gen, last, mode)
        sim = LoopSim(logs, aligner, start, base, emitted, mode == "timeout")
        sim.run(data)
        # Exactly once along the surviving history: what the restore named, then
        # every record and child of this generation.
        mine = {
            (c, o)
            for c, items in enumerate(logs)
            for o, it in enumerate(items)
            if it.generation == gen and it.checkpoint is None
        }
        assert set(sim.processed) == expected_replay | mine
        check_cuts(sim, prior, gen, rule, checkpoints)
        if round_ == len(modes) - 1:
            break
        # Restore from one completed snapshot into the next generation; upstream
        # regenerates its records and barriers after it.
        n = data.draw(st.sampled_from(list(checkpoints)), label=f"round {round_} restores")
        snap = sim.snapshots[n]
        new = data.draw(st.integers(1, 2), label="new checkpoints")
        checkpoints = range(n + 1, n + new + 1)
        prior = snap.state | replayed(logs, snap, gen + 1)
        base, last, replay = snap.state, n, snap.replay
        emitted = {p: c for p, c in sim.emitted.items() if p in base}
        start = [max(snap.offsets[channel(c, k)], 0) for c in range(k + 1)]
        gen += 1
        for c in range(k):
            logs[c] += data.draw(forward(checkpoints, gen, False))
