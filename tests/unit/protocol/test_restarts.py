"""`kstream.protocol.restarts`: the restart budget over a sliding window."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kstream.protocol.restarts import MAX_RESTARTS, RESTART_WINDOW_S, RestartBudget


def test_restarts_beyond_the_budget_within_the_window_are_refused() -> None:
    budget = RestartBudget()
    assert all(budget.allow(float(t)) for t in range(MAX_RESTARTS))
    assert not budget.allow(float(MAX_RESTARTS))
    # Restarts older than the window no longer count.
    assert budget.allow(MAX_RESTARTS + RESTART_WINDOW_S)


@given(st.lists(st.floats(0, 10, allow_nan=False), max_size=30).map(sorted))
def test_a_restart_is_allowed_exactly_when_the_window_holds_few_enough(
    gaps: list[float],
) -> None:
    budget = RestartBudget(max_restarts=3, window_s=5.0)
    times: list[float] = []
    for t in gaps:
        times.append(t)
        recent = [s for s in times if t - s < 5.0]
        assert budget.allow(t) == (len(recent) <= 3)
