"""The Collatz example's operators against its plain-loop reference (no Kafka)."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kstream.examples.collatz import above_one, at_one, reference, result, start, step, steps


def test_known_step_counts() -> None:
    assert [steps(n) for n in (1, 2, 3, 6, 7, 27, 97)] == [0, 1, 7, 8, 16, 111, 118]
    assert reference([27, 1, 27]) == Counter({("27", "111"): 2, ("1", "0"): 1})


@given(st.integers(1, 100_000))
def test_going_around_the_loop_gives_the_reference(n: int) -> None:
    v = start(str(n))
    rounds = 0
    while not at_one(v):  # the head: at 1 to the sink, the rest to the body and back
        assert above_one(v)
        v = step(v)
        rounds += 1
    assert result(v) == (str(n), str(steps(n)))
    assert rounds == steps(n)


@pytest.mark.parametrize(
    ("line", "why"),
    [("0", "start at 1, got 0"), ("-3", "start at 1, got -3"), ("seven", "invalid literal")],
)
def test_what_is_not_a_number_from_one_is_refused(line: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        start(line)
