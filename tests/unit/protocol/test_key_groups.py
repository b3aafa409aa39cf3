"""Key groups: ownership, ranges and the restore plan at another parallelism."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from kstream.protocol.key_groups import (
    group_of,
    group_prefixes,
    group_range,
    overlapping,
    owner,
    owner_table,
    restore_plan,
)


@st.composite
def layouts(draw: st.DrawFn) -> tuple[int, int, int]:
    k = draw(st.integers(1, 2048))
    return k, draw(st.integers(1, k)), draw(st.integers(1, k))


@settings(max_examples=300, deadline=None)
@given(layouts(), st.lists(st.binary(max_size=12), max_size=60))
def test_every_key_has_exactly_one_owner_and_the_restore_plan_covers_it_once(
    layout: tuple[int, int, int], keys: list[bytes]
) -> None:
    k, p_old, p_new = layout
    plan = restore_plan(k, p_old, p_new)
    assert len(plan) == p_new
    for key in keys:
        g = group_of(key, k)
        assert 0 <= g < k
        for p in (p_old, p_new):
            holders = [i for i in range(p) if g in group_range(i, k, p)]
            assert holders == [owner(g, k, p)]
            assert owner_table(k, p)[g] == holders[0]
        # The new owner reads the group from exactly one old subtask: its old owner.
        reads = [(j, groups) for j, groups in plan[owner(g, k, p_new)] if g in groups]
        assert [j for j, _ in reads] == [owner(g, k, p_old)]
        # No other new subtask takes it.
        takers = [i for i, r in enumerate(plan) for _, groups in r if g in groups]
        assert takers == [owner(g, k, p_new)]


@settings(max_examples=300, deadline=None)
@given(layouts())
def test_ranges_are_contiguous_non_empty_and_partition_all_groups(
    layout: tuple[int, int, int],
) -> None:
    k, p, _ = layout
    ranges = [group_range(i, k, p) for i in range(p)]
    assert ranges[0].start == 0
    assert ranges[-1].stop == k
    for a, b in itertools.pairwise(ranges):
        assert a.stop == b.start
    assert all(len(r) > 0 and r.step == 1 for r in ranges)
    # Sizes differ by at most one: the groups are spread evenly.
    assert max(map(len, ranges)) - min(map(len, ranges)) <= 1


@settings(max_examples=300, deadline=None)
@given(layouts())
def test_restore_plan_partitions_each_new_range_among_the_overlapping_old_subtasks(
    layout: tuple[int, int, int],
) -> None:
    k, p_old, p_new = layout
    for i, reads in enumerate(restore_plan(k, p_old, p_new)):
        assert [j for j, _ in reads] == overlapping(i, k, p_new, p_old)
        taken = [g for _, groups in reads for g in groups]
        assert taken == list(group_range(i, k, p_new))
        for j, groups in reads:
            assert set(groups) <= set(group_range(j, k, p_old))


def test_unchanged_parallelism_reads_its_own_subtask_only() -> None:
    assert restore_plan(128, 3, 3) == [[(i, group_range(i, 128, 3))] for i in range(3)]


def test_known_values() -> None:
    # Flink's rule on a small case: K=10, P=3 gives [0,4), [4,7), [7,10).
    assert [group_range(i, 10, 3) for i in range(3)] == [range(4), range(4, 7), range(7, 10)]
    assert [owner(g, 10, 3) for g in range(10)] == [0, 0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert group_prefixes(300)[258] == b"\x01\x02"
    assert group_of(b"hello", 128) == 0x3610A686 % 128
