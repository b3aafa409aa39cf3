"""Two initiators' snapshots at one subtask (`Aligner` with Lamport ids, not n and n+1).

The coordinator starts A = (5, coordinator); source 1 starts B = (5, source 1)
at the same Lamport time, so A < B. Source 0 takes A, then B (relayed); source
1 took B first and declines A (`kstream.protocol.initiation`). The channels
into the subtask then hold ``c0: A B`` and ``c1: B`` (crossing), or, when
source 1 starts B after it saw A, ``c0: A B`` and ``c1: A B`` (overlapping).
"""

from __future__ import annotations

from kstream.protocol.barrier import (
    AbandonAlignment,
    Aligner,
    Alignment,
    BarrierArrived,
    Block,
    Channel,
    ChannelStateComplete,
    Drop,
    TakeSnapshot,
    Unblock,
)
from kstream.protocol.snapshot_id import SnapshotId

GEN = 3
C0 = Channel("kstream.j.s1", 0)
C1 = Channel("kstream.j.s1", 1)
A = SnapshotId(5, 0).encode()
B = SnapshotId(5, 2).encode()
LATER_B = SnapshotId(6, 2).encode()


def aligner(mode: Alignment) -> Aligner:
    return Aligner.over([C0, C1], GEN, SnapshotId(4, 0).encode(), mode)


def barrier(channel: Channel, offset: int, n: int, c0: int = 0, c1: int = 0) -> BarrierArrived:
    return BarrierArrived(channel, offset, n, GEN, {C0: c0, C1: c1})


def test_aligned_crossing_barriers_end_the_older_alignment_and_take_the_newer() -> None:
    a = aligner(Alignment.ALIGNED)
    assert a.handle(barrier(C0, 10, A)) == [Block(C0, 11)]
    # B on c1, which never carried A: A can be no cut here. Declined, never waited for.
    assert a.handle(barrier(C1, 20, B)) == [AbandonAlignment(A), Unblock(C0), Block(C1, 21)]
    # c0 is re-read after A: its B completes the alignment of B.
    [snapshot, unblock] = a.handle(barrier(C0, 11, B))
    assert snapshot == TakeSnapshot(B, {C0: 12, C1: 21})
    assert unblock == Unblock(C1)


def test_aligned_overlapping_barriers_complete_both_in_id_order() -> None:
    a = aligner(Alignment.ALIGNED)
    assert a.handle(barrier(C0, 10, A)) == [Block(C0, 11)]
    assert a.handle(barrier(C1, 20, A)) == [TakeSnapshot(A, {C0: 11, C1: 21}), Unblock(C0)]
    assert a.handle(barrier(C0, 11, LATER_B)) == [Block(C0, 12)]
    assert a.handle(barrier(C1, 21, LATER_B)) == [
        TakeSnapshot(LATER_B, {C0: 12, C1: 22}),
        Unblock(C0),
    ]


def test_unaligned_crossing_barriers_abandon_the_older_recording() -> None:
    a = aligner(Alignment.UNALIGNED)
    # A first on c0: snapshot A, record c1 from its position 18.
    assert a.handle(barrier(C0, 10, A, c0=10, c1=18)) == [
        TakeSnapshot(A, {C0: 11, C1: 18}, frozenset({C1}))
    ]
    # c1 delivers B without A: A's channel state can never be complete.
    [abandon, take_b] = a.handle(barrier(C1, 20, B, c0=11, c1=20))
    assert abandon == AbandonAlignment(A)
    assert take_b == TakeSnapshot(B, {C0: 11, C1: 21}, frozenset({C0}))
    [done] = a.handle(barrier(C0, 11, B, c0=11, c1=21))
    assert isinstance(done, ChannelStateComplete)
    assert done.checkpoint == B


def test_unaligned_crossing_barriers_newer_first_drop_the_older() -> None:
    a = aligner(Alignment.UNALIGNED)
    assert a.handle(barrier(C1, 20, B, c0=10, c1=20)) == [
        TakeSnapshot(B, {C0: 10, C1: 21}, frozenset({C0}))
    ]
    # A arrives on c0 while c0 is recorded for B: stale (source 1 declined A).
    [drop] = a.handle(barrier(C0, 10, A, c0=10, c1=21))
    assert isinstance(drop, Drop)
    [done] = a.handle(barrier(C0, 11, B, c0=11, c1=21))
    assert done == ChannelStateComplete(B, {C0: 10, C1: 21}, done.replay)
    assert a.recording == {}


def test_unaligned_overlapping_snapshots_record_their_own_ranges_and_both_complete() -> None:
    a = aligner(Alignment.UNALIGNED)
    assert a.handle(barrier(C0, 10, A, c0=10, c1=15)) == [
        TakeSnapshot(A, {C0: 11, C1: 15}, frozenset({C1}))
    ]
    # B on c0 while A is still recorded on c1: B snapshots too and records c1 from 17.
    assert a.handle(barrier(C0, 12, LATER_B, c0=12, c1=17)) == [
        TakeSnapshot(LATER_B, {C0: 13, C1: 17}, frozenset({C1}))
    ]
    assert a.recording == {A: frozenset({C1}), LATER_B: frozenset({C1})}
    [done_a] = a.handle(barrier(C1, 20, A, c0=13, c1=20))
    assert isinstance(done_a, ChannelStateComplete)
    assert (done_a.checkpoint, dict(done_a.channel_offsets)) == (A, {C0: 11, C1: 15})
    [done_b] = a.handle(barrier(C1, 25, LATER_B, c0=13, c1=25))
    assert isinstance(done_b, ChannelStateComplete)
    assert (done_b.checkpoint, dict(done_b.channel_offsets)) == (LATER_B, {C0: 13, C1: 17})
    # Each range ends at its own barrier.
    assert [w.end for w in done_a.replay[C1]] == [20]
    assert [w.end for w in done_b.replay[C1]] == [25]
