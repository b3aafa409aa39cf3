"""Snapshot ids rank initiators fairly on equal sequences, and stay unique, ordered and decodable.

Properties of `kstream.protocol.snapshot_id` (hypothesis): one integer per
pair and back, integer order = sequence first (Lamport order), unique ids
for initiators that saw the same id, every stored integer restoring as
itself, and ties that no initiator always wins.
"""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from kstream.protocol.snapshot_id import COORDINATOR, INITIATORS, SnapshotId, next_after

sequences = st.integers(0, 10**12)
initiators = st.integers(0, INITIATORS - 1)
#: Two different initiators.
pairs = st.lists(initiators, min_size=2, max_size=2, unique=True)


def winner(sequence: int, a: int, b: int) -> int:
    """Which of initiators `a` and `b` has the larger id at `sequence`."""
    return a if SnapshotId(sequence, a).encode() > SnapshotId(sequence, b).encode() else b


@given(st.integers(0, 10**15))
def test_every_integer_decodes_to_a_pair_that_encodes_back_to_it(n: int) -> None:
    # So an id stored by any earlier version restores as itself, in its old place.
    sid = SnapshotId.decode(n)
    assert sid.encode() == n
    assert sid.sequence == n // INITIATORS


@given(sequences, initiators)
def test_a_pair_decodes_from_its_integer(sequence: int, initiator: int) -> None:
    assert SnapshotId.decode(SnapshotId(sequence, initiator).encode()) == SnapshotId(
        sequence, initiator
    )


@given(sequences)
def test_at_each_sequence_the_initiators_take_every_rank_once(sequence: int) -> None:
    ranks = {SnapshotId(sequence, i).rank for i in range(INITIATORS)}
    assert ranks == set(range(INITIATORS))


@given(sequences, initiators, sequences, initiators)
def test_ids_follow_lamport_order_sequence_first(s: int, i: int, t: int, j: int) -> None:
    a, b = SnapshotId(s, i), SnapshotId(t, j)
    if s < t:
        assert a.encode() < b.encode()
    assert (a < b) == (a.encode() < b.encode())
    assert (a == b) == (a.encode() == b.encode())


@given(st.integers(0, 10**12), st.lists(initiators, min_size=2, unique=True))
def test_initiators_that_saw_the_same_id_name_different_larger_ids(
    seen: int, starters: list[int]
) -> None:
    named = [next_after(seen, i) for i in starters]
    assert len(set(named)) == len(named)
    assert all(n > seen for n in named)
    assert [SnapshotId.decode(n).initiator for n in named] == starters


@given(st.integers(0, 10**9), pairs)
def test_two_initiators_win_ties_equally_often(start: int, pair: list[int]) -> None:
    a, b = pair
    # Their numbers first differ at bit h: each wins exactly half of any 2**(h+1)
    # consecutive sequences, and never more than 2**h in a row.
    period = 2 ** ((a ^ b).bit_length())
    wins = [winner(s, a, b) for s in range(start, start + 2 * period)]
    assert wins[:period].count(a) == period // 2
    assert wins[period:].count(a) == period // 2
    assert max(len(list(run)) for _, run in itertools.groupby(wins)) <= period // 2


@given(st.integers(0, 10**9), st.lists(initiators, min_size=2, max_size=8, unique=True))
def test_no_initiator_of_a_group_starves(start: int, group: list[int]) -> None:
    # In any INITIATORS consecutive sequences each initiator ranks highest of all once,
    # so it wins a tie against any group at least once.
    tops = {
        max(group, key=lambda i: SnapshotId(s, i).encode())
        for s in range(start, start + INITIATORS)
    }
    assert tops == set(group)


def test_the_coordinator_and_the_first_source_alternate_and_p_no_longer_always_loses() -> None:
    # Initiators 1 and 2 are the seed demos' p and q (sources 0 and 1).
    assert [winner(s, COORDINATOR, 1) for s in range(1, 7)] == [0, 1, 0, 1, 0, 1]
    assert {winner(s, 1, 2) for s in range(1, 5)} == {1, 2}
