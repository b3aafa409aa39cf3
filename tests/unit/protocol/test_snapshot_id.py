"""Snapshot ids (`kstream.protocol.snapshot_id`): one integer, a pair's order, a Lamport clock."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kstream.errors import ConfigurationError, ProtocolError
from kstream.protocol.snapshot_id import (
    COORDINATOR,
    INITIATORS,
    LamportClock,
    SnapshotId,
    next_after,
    source_initiator,
)

ids = st.builds(SnapshotId, st.integers(0, 10**12), st.integers(0, INITIATORS - 1))


@given(ids)
def test_an_id_round_trips_through_its_integer(sid: SnapshotId) -> None:
    assert SnapshotId.decode(sid.encode()) == sid


@given(ids, ids)
def test_the_integer_order_is_the_pairs_order(a: SnapshotId, b: SnapshotId) -> None:
    assert (a < b) == (a.encode() < b.encode())
    assert (a == b) == (a.encode() == b.encode())


@given(st.integers(0, 10**12), st.integers(0, INITIATORS - 1))
def test_the_next_id_is_larger_than_anything_seen_and_names_its_initiator(
    seen: int, initiator: int
) -> None:
    n = next_after(seen, initiator)
    assert n > seen
    assert SnapshotId.decode(n).initiator == initiator
    # Never more than one sequence ahead: clocks stay close together.
    assert SnapshotId.decode(n).sequence == SnapshotId.decode(seen).sequence + 1


@given(st.integers(0, 10**9), st.lists(st.integers(0, INITIATORS - 1), unique=True, min_size=2))
def test_initiators_that_saw_the_same_id_never_collide(seen: int, initiators: list[int]) -> None:
    named = [next_after(seen, i) for i in initiators]
    assert len(set(named)) == len(named)


def test_ids_of_earlier_versions_read_as_plain_integers_below_every_new_one() -> None:
    # Checkpoints 1, 2, 3 stored by earlier versions: ordered as before...
    old = [SnapshotId.decode(n) for n in (1, 2, 3)]
    assert old == sorted(old)
    assert [s.encode() for s in old] == [1, 2, 3]
    # ...and the first Lamport id after them is above them all.
    assert next_after(3, COORDINATOR) == SnapshotId(1, COORDINATOR).encode() > 3
    assert next_after(3, 2) == SnapshotId(1, 2).encode() > 3
    # A long-running old job (past 1023) continues above its largest id too.
    assert next_after(5000, COORDINATOR) > 5000


def test_out_of_range_parts_are_refused() -> None:
    for bad in ((-1, 0), (0, -1), (0, INITIATORS)):
        with pytest.raises(ProtocolError):
            SnapshotId(*bad)
    with pytest.raises(ProtocolError):
        SnapshotId.decode(-1)


def test_source_initiators_follow_the_coordinator_up_to_the_limit() -> None:
    assert source_initiator(0) == 1
    assert source_initiator(INITIATORS - 2) == INITIATORS - 1
    with pytest.raises(ConfigurationError, match="at most 1023 source subtasks"):
        source_initiator(INITIATORS - 1)


def test_the_clock_keeps_the_largest_id_seen_and_ticks_past_it() -> None:
    clock = LamportClock()
    clock.observe(None)
    clock.observe(3 * INITIATORS + 2)
    clock.observe(INITIATORS)  # older: changes nothing
    assert clock.seen == 3 * INITIATORS + 2
    assert clock.tick(5) == SnapshotId(4, 5).encode()
    assert clock.seen == SnapshotId(4, 5).encode()
    assert str(SnapshotId.decode(clock.seen)) == f"{clock.seen} (sequence 4, source 4)"
    coordinator = SnapshotId(4, COORDINATOR)
    assert str(coordinator) == f"{coordinator.encode()} (sequence 4, coordinator)"
