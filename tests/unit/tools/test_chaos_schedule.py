"""`kstream.tools.chaos.schedule`: seeded fault schedules and fault windows."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kstream.errors import ConfigurationError
from kstream.tools.chaos.schedule import (
    KINDS,
    Fault,
    LastFault,
    may_strike,
    parse_kinds,
    schedule,
    window_of,
)

seeds = st.integers(min_value=0, max_value=2**32)
durations = st.floats(min_value=1.0, max_value=4000.0)
gaps = st.floats(min_value=0.5, max_value=60.0)
kind_sets = st.lists(st.sampled_from(KINDS), min_size=1, unique=True)


@settings(deadline=None)  # a shared machine: no test depends on timing
@given(seeds, durations, gaps, kind_sets)
def test_a_seed_gives_one_schedule_sorted_inside_the_run_and_of_the_kinds_asked(
    seed: int, duration: float, gap: float, kinds: list[str]
) -> None:
    faults = schedule(seed, duration, gap, kinds, warmup=0.5)
    assert faults == schedule(seed, duration, gap, kinds, warmup=0.5)
    times = [f.at for f in faults]
    assert times == sorted(times)
    assert all(0.5 <= t < duration + 0.001 for t in times)
    assert {f.kind for f in faults} <= set(kinds)


def test_other_seeds_give_other_schedules_and_a_long_run_reaches_its_fault_count() -> None:
    one, two = schedule(1, 3600, 15, KINDS), schedule(2, 3600, 15, KINDS)
    assert one != two
    # 3600 s at a mean gap of 15 s: about 240 moments, some of them with two faults.
    assert 200 <= len(one) <= 320
    assert {f.kind for f in one} == set(KINDS)
    assert any(a.at == b.at for a, b in itertools.pairwise(one))  # combined faults


@settings(deadline=None)  # a shared machine: no test depends on timing
@given(st.lists(st.floats(min_value=0, max_value=1e4), max_size=30), st.floats(0, 1e4))
def test_a_time_falls_in_the_window_of_the_last_fault_at_or_before_it(
    starts: list[float], t: float
) -> None:
    starts.sort()
    w = window_of(starts, t)
    assert -1 <= w < len(starts)
    if w == -1:
        assert not starts or t < starts[0]
    else:
        assert starts[w] <= t
        assert w == len(starts) - 1 or t < starts[w + 1]


def test_kinds_are_all_or_a_list_of_known_kinds() -> None:
    assert parse_kinds("all") == KINDS
    assert parse_kinds("broker-kill, worker-kill") == ("broker-kill", "worker-kill")
    for bad in ("", "worker-kill,meteor", " , "):
        with pytest.raises(ConfigurationError, match="--kinds"):
            parse_kinds(bad)


def test_after_a_fault_the_next_waits_for_a_completed_checkpoint() -> None:
    last = LastFault(scheduled=30.0, struck=31.0, completed=4)
    assert may_strike(Fault(30.0, "broker-kill", 1), last, 4, 31.5, 180)  # its pair
    assert not may_strike(Fault(40.0, "worker-kill", 2), last, 4, 60.0, 180)
    assert may_strike(Fault(40.0, "worker-kill", 2), last, 5, 60.0, 180)
    assert may_strike(Fault(40.0, "worker-kill", 2), last, 4, 211.0, 180)
