"""Snapshots started by a source are cut on its marker (`Aligner.reach`, unaligned).

Seeds 000/001: a process other than the initiator records its state when the
first marker reaches it. A source subtask reaches a channel subtask through
some of its channels only; the other channels carry barriers of sources the
snapshot was injected into. Example tests give every transition; the property
drives random FIFO channels carrying snapshots of random initiators, each
reaching a random set of channels, and checks that every snapshot completes,
is a consistent cut with each record exactly once, and was cut on a channel
of its initiator's paths whenever the initiator reaches the subtask.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kstream.errors import ProtocolError
from kstream.protocol.barrier import (
    AbandonAlignment,
    Action,
    Aligner,
    Alignment,
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
from kstream.protocol.snapshot_id import SnapshotId
from tests.unit.protocol.test_barrier_unaligned import (
    GEN,
    Contents,
    Item,
    Sim,
    channel_of,
    check_cuts,
    generation_contents,
)

UNALIGNED = Alignment.UNALIGNED
C0, C1, C2 = (Channel("kstream.j.s1", i) for i in range(3))
#: A snapshot started by source subtask 1 (initiator 2), and one of the coordinator.
BY_SOURCE = SnapshotId(5, 2).encode()
BY_COORDINATOR = SnapshotId(6, 0).encode()


def barrier(
    channel: Channel, offset: int, n: int, positions: Mapping[Channel, int]
) -> BarrierArrived:
    return BarrierArrived(channel, offset, n, GEN, dict(positions))


def aligner(reach: Mapping[int, Sequence[Channel]]) -> Aligner:
    return Aligner.over([C0, C1, C2], GEN, mode=UNALIGNED, reach=reach)


def test_a_barrier_off_the_initiators_paths_waits_for_its_marker() -> None:
    a = aligner({2: [C1]})
    # C0's source had the snapshot injected: C0 is held, nothing is cut yet.
    assert a.handle(barrier(C0, 4, BY_SOURCE, {C0: 4, C1: 2, C2: 7})) == [Block(C0, 5)]
    [drop] = a.handle(RecordArrived(C0, 5, GEN))
    assert isinstance(drop, Drop)
    assert a.handle(RecordArrived(C1, 2, GEN)) == [Process()]
    # The initiator's marker on C1: the cut. C0's state is empty (after its barrier),
    # C2 is recorded from where it stands.
    [take, unblock] = a.handle(barrier(C1, 3, BY_SOURCE, {C0: 5, C1: 3, C2: 7}))
    assert take == TakeSnapshot(BY_SOURCE, {C0: 5, C1: 4, C2: 7}, frozenset({C2}))
    assert isinstance(take, TakeSnapshot)
    assert take.cut_on == C1
    assert unblock == Unblock(C0)
    [done] = a.handle(barrier(C2, 9, BY_SOURCE, {C0: 5, C1: 4, C2: 9}))
    assert isinstance(done, ChannelStateComplete)
    assert done.channel_offsets == {C0: 5, C1: 4, C2: 7}


def test_the_initiators_marker_first_cuts_at_once() -> None:
    a = aligner({2: [C1, C2]})
    [take] = a.handle(barrier(C2, 0, BY_SOURCE, {C0: 3, C1: 1, C2: 0}))
    assert isinstance(take, TakeSnapshot)
    assert take.cut_on == C2
    assert take.recording == {C0, C1}


def test_a_snapshot_of_an_initiator_that_does_not_reach_here_cuts_on_the_first_barrier() -> None:
    # The coordinator injects into every source; a source reaching no channel of
    # this subtask (not in `reach`) joins it the same way.
    for n in (BY_COORDINATOR, SnapshotId(7, 3).encode()):
        a = aligner({2: [C1]})
        [take] = a.handle(barrier(C0, 0, n, {C0: 0, C1: 0, C2: 0}))
        assert isinstance(take, TakeSnapshot)
        assert take.cut_on == C0


def test_an_abort_while_waiting_for_the_marker_releases_the_held_channel() -> None:
    a = aligner({2: [C1]})
    a.handle(barrier(C0, 4, BY_SOURCE, {C0: 4, C1: 0, C2: 0}))
    assert a.handle(CheckpointAborted(BY_SOURCE)) == [AbandonAlignment(BY_SOURCE), Unblock(C0)]
    [stale] = a.handle(barrier(C1, 0, BY_SOURCE, {C0: 5, C1: 0, C2: 0}))
    assert isinstance(stale, Drop)


def test_aligned_mode_waits_for_every_channel_and_names_the_last() -> None:
    a = Aligner.over([C0, C1], GEN, reach={2: [C0]})
    assert a.handle(barrier(C0, 0, BY_SOURCE, {})) == [Block(C0, 1)]
    [take, _] = a.handle(barrier(C1, 0, BY_SOURCE, {}))
    assert isinstance(take, TakeSnapshot)
    assert take.cut_on == C1


def test_reach_must_name_inputs() -> None:
    with pytest.raises(ProtocolError, match="on a path from initiator 2, not an input"):
        Aligner.over([C0], GEN, reach={2: [C1]})


# -- the property ---------------------------------------------------------------------


class CutSim(Sim):
    """The unaligned simulator, keeping the channel each snapshot was cut on."""

    cut_on: dict[int, Channel | None]

    def apply(self, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, TakeSnapshot):
                self.cut_on[action.checkpoint] = action.cut_on
                for ch in action.recording & {channel_of(c) for c in self.blocked}:
                    # A channel held for another snapshot stands at its barrier (the
                    # records fetched after it are dropped and read again): a
                    # snapshot taken meanwhile records it from there, as the runtime
                    # does (`BarrierArrived.positions` are its reads, held ones too).
                    self.pos[ch.partition] = self.blocked[ch.partition]
        super().apply(actions)


@st.composite
def world(
    draw: st.DrawFn,
) -> tuple[list[Contents], list[int], dict[int, frozenset[Channel]]]:
    k = draw(st.integers(1, 4))
    initiators = draw(st.lists(st.integers(0, 3), min_size=1, max_size=4))
    # Ids in increasing order, as every channel carries them (one per sequence).
    ids = [SnapshotId(seq, i).encode() for seq, i in enumerate(initiators, 1)]
    channels = [draw(generation_contents(ids, GEN, True)) for _ in range(k)]
    reach: dict[int, frozenset[Channel]] = {}
    for i in (1, 2, 3):  # source initiators; the coordinator (0) reaches nothing
        chosen = draw(st.sets(st.integers(0, k - 1), max_size=k))
        if chosen:
            reach[i] = frozenset(channel_of(c) for c in chosen)
    return channels, ids, reach


@settings(max_examples=400, deadline=None)
@given(world(), st.data())
def test_every_snapshot_completes_as_a_consistent_cut_on_its_initiators_marker(
    w: tuple[list[Contents], list[int], dict[int, frozenset[Channel]]], data: st.DataObject
) -> None:
    channels, ids, reach = w
    inputs = [channel_of(c) for c in range(len(channels))]
    a = Aligner.over(inputs, GEN, mode=UNALIGNED, reach=reach)
    sim = CutSim(channels, a, [0] * len(channels), set(), False)
    sim.cut_on = {}
    sim.run(data)  # ends with nothing held: waiting for a marker never deadlocks
    check_cuts(sim, Aligner.over(inputs, GEN), GEN, ids)
    everything = {
        (c, o)
        for c, items in enumerate(channels)
        for o, it in enumerate(items)
        if it == Item(None, GEN)
    }
    assert sorted(sim.processed) == sorted(everything)
    assert sim.abandoned == []
    for n in ids:
        path = reach.get(SnapshotId.decode(n).initiator)
        if path:
            assert sim.cut_on[n] in path, f"snapshot {n} cut on {sim.cut_on[n]}, not on {path}"


# -- concurrent snapshots (seed 004) ---------------------------------------------------


class OrderSim(CutSim):
    """Also keeps the order snapshots were taken in."""

    taken: list[int]

    def apply(self, actions: list[Action]) -> None:
        self.taken += [a.checkpoint for a in actions if isinstance(a, TakeSnapshot)]
        super().apply(actions)


@st.composite
def crossing_world(
    draw: st.DrawFn,
) -> tuple[list[Contents], list[int], dict[int, frozenset[Channel]]]:
    """Several initiators' snapshots, each channel carrying them in an order of its own
    (sources took them in different orders), with records between."""
    k = draw(st.integers(1, 4))
    initiators = draw(st.lists(st.integers(0, 3), min_size=1, max_size=4))
    ids = [SnapshotId(seq, i).encode() for seq, i in enumerate(initiators, 1)]
    channels = [draw(generation_contents(draw(st.permutations(ids)), GEN, True)) for _ in range(k)]
    reach: dict[int, frozenset[Channel]] = {}
    for i in (1, 2, 3):
        chosen = draw(st.sets(st.integers(0, k - 1), max_size=k))
        if chosen:
            reach[i] = frozenset(channel_of(c) for c in chosen)
    return channels, ids, reach


def run_concurrent(
    w: tuple[list[Contents], list[int], dict[int, frozenset[Channel]]],
    data: st.DataObject,
    ordered: bool,
) -> OrderSim:
    channels, _, reach = w
    inputs = [channel_of(c) for c in range(len(channels))]
    a = Aligner.over(inputs, GEN, mode=UNALIGNED, reach=reach, concurrent=True, ordered=ordered)
    sim = OrderSim(channels, a, [0] * len(channels), set(), False)
    sim.cut_on, sim.taken = {}, []
    sim.run(data)  # ends with nothing held and nothing recording: no deadlock
    return sim


@settings(max_examples=500, deadline=None)
@given(crossing_world(), st.data())
def test_concurrent_snapshots_in_any_order_all_complete_as_consistent_cuts(
    w: tuple[list[Contents], list[int], dict[int, frozenset[Channel]]], data: st.DataObject
) -> None:
    channels, ids, _ = w
    sim = run_concurrent(w, data, ordered=False)
    inputs = [channel_of(c) for c in range(len(channels))]
    # Every snapshot completes, whatever order its barriers crossed in, and names a
    # consistent cut: each valid record before its barriers once, in state or replayed.
    check_cuts(sim, Aligner.over(inputs, GEN), GEN, sorted(ids))
    assert sim.abandoned == []
    everything = {
        (c, o)
        for c, items in enumerate(channels)
        for o, it in enumerate(items)
        if it == Item(None, GEN)
    }
    assert sorted(sim.processed) == sorted(everything)


@settings(max_examples=300, deadline=None)
@given(crossing_world(), st.data())
def test_a_subtask_with_sinks_takes_concurrent_snapshots_in_id_order(
    w: tuple[list[Contents], list[int], dict[int, frozenset[Channel]]], data: st.DataObject
) -> None:
    channels, ids, _ = w
    sim = run_concurrent(w, data, ordered=True)
    assert sim.taken == sorted(sim.taken)  # sinks seal their epochs in id order
    # Each snapshot completes or is declined here, never left hanging.
    completed = sorted(n for n, s in sim.snapshots.items() if s.complete)
    assert sorted(completed + sim.abandoned) == sorted(ids)
    inputs = [channel_of(c) for c in range(len(channels))]
    check_cuts(sim, Aligner.over(inputs, GEN), GEN, completed)


def test_crossing_snapshots_are_recorded_side_by_side() -> None:
    a, b = SnapshotId(5, 1).encode(), SnapshotId(5, 2).encode()
    al = Aligner.over([C0, C1], GEN, mode=UNALIGNED, concurrent=True)
    [take_a] = al.handle(barrier(C0, 3, a, {C0: 3, C1: 1}))
    assert take_a == TakeSnapshot(a, {C0: 4, C1: 1}, frozenset({C1}))
    [take_b] = al.handle(barrier(C1, 2, b, {C0: 4, C1: 2}))  # b before a on C1: both go on
    assert take_b == TakeSnapshot(b, {C0: 4, C1: 3}, frozenset({C0}))
    [done_a] = al.handle(barrier(C1, 5, a, {C0: 4, C1: 5}))
    assert isinstance(done_a, ChannelStateComplete)
    assert done_a.checkpoint == a
    [done_b] = al.handle(barrier(C0, 6, b, {C0: 6, C1: 6}))
    assert isinstance(done_b, ChannelStateComplete)
    assert done_b.checkpoint == b
    # Without `concurrent`, the older one is declined where they cross.
    old = Aligner.over([C0, C1], GEN, mode=UNALIGNED)
    old.handle(barrier(C0, 3, a, {C0: 3, C1: 1}))
    assert AbandonAlignment(a) in old.handle(barrier(C1, 2, b, {C0: 4, C1: 2}))


def test_concurrent_needs_unaligned() -> None:
    with pytest.raises(ProtocolError, match="unaligned only"):
        Aligner.over([C0], GEN, concurrent=True)
