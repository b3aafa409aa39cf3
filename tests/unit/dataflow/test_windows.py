"""Window assigners, session merging and window phases, against brute force."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kstream.dataflow.operators.windows import (
    Session,
    Sliding,
    TimeWindow,
    Tumbling,
    WindowPhase,
    cleanup_time,
    merge_session,
    window_phase,
)
from kstream.errors import ConfigurationError

ts_values = st.integers(-1000, 1000)
sizes = st.integers(1, 60)


@settings(deadline=None)
@given(ts=ts_values, size=sizes, offset=st.integers(-100, 100))
def test_tumbling_is_the_one_aligned_window_holding_ts(ts: int, size: int, offset: int) -> None:
    (window,) = Tumbling(size, offset).assign(ts)
    assert ts in window
    assert window.end - window.start == size
    assert (window.start - offset) % size == 0


@settings(deadline=None)
@given(ts=ts_values, size=sizes, slide=sizes, offset=st.integers(-100, 100))
def test_sliding_is_every_aligned_window_holding_ts(
    ts: int, size: int, slide: int, offset: int
) -> None:
    slide = min(slide, size)  # longer slides are refused
    brute = [
        TimeWindow(s, s + size)
        for s in range(ts - size - slide, ts + slide + 1)
        if (s - offset) % slide == 0 and s <= ts < s + size
    ]
    assert list(Sliding(size, slide, offset).assign(ts)) == brute


def test_sliding_by_example() -> None:
    assert Sliding(10, 5).assign(12) == (TimeWindow(5, 15), TimeWindow(10, 20))
    assert Sliding(10, 5).assign(-1) == (TimeWindow(-10, 0), TimeWindow(-5, 5))


def test_a_slide_longer_than_the_window_is_refused() -> None:
    """It would leave gaps whose records belong to no window and vanish unseen."""
    with pytest.raises(ConfigurationError) as refused:
        Sliding(1000, 5000)
    assert str(refused.value) == (
        "sliding(1000, 5000): a slide longer than the window leaves 4000 ms of every 5000 "
        "in no window, and records there would be dropped unseen; use a slide <= the size "
        "(tumbling(size) for equal ones)"
    )
    assert Sliding(1000, 1000).assign(1500) == (TimeWindow(1000, 2000),)


def components(stamps: list[int], gap: int) -> set[TimeWindow]:
    """Brute force: sorted, a new session starts where the next record is >= gap later."""
    sessions: list[list[int]] = []
    for ts in sorted(stamps):
        if sessions and ts - sessions[-1][-1] < gap:
            sessions[-1].append(ts)
        else:
            sessions.append([ts])
    return {TimeWindow(s[0], s[-1] + gap) for s in sessions}


@settings(deadline=None)
@given(stamps=st.lists(st.integers(-40, 40), max_size=25), gap=st.integers(1, 12), data=st.data())
def test_session_merging_gives_the_connected_components_in_any_order(
    stamps: list[int], gap: int, data: st.DataObject
) -> None:
    order = data.draw(st.permutations(stamps))
    sessions: frozenset[TimeWindow] = frozenset()
    for ts in order:
        (own,) = Session(gap).assign(ts)
        step = merge_session(sessions, own)
        assert step.merged <= sessions
        assert all(w.overlaps(own) for w in step.merged)
        assert step.window.start <= own.start
        assert own.end <= step.window.end
        assert step.sessions == (sessions - step.merged) | {step.window}
        sessions = step.sessions
    assert sessions == components(stamps, gap)


def test_touching_sessions_stay_apart_and_a_bridge_merges_them() -> None:
    first = merge_session([], TimeWindow(0, 5))
    second = merge_session(first.sessions, TimeWindow(5, 10))
    assert second.merged == frozenset()
    assert second.sessions == {TimeWindow(0, 5), TimeWindow(5, 10)}
    bridge = merge_session(second.sessions, TimeWindow(4, 9))
    assert bridge.window == TimeWindow(0, 10)
    assert bridge.merged == {TimeWindow(0, 5), TimeWindow(5, 10)}


@pytest.mark.parametrize(
    ("watermark", "phase"),
    [
        (19, WindowPhase.OPEN),
        (20, WindowPhase.FIRED),
        (24, WindowPhase.FIRED),
        (25, WindowPhase.CLEANED),
    ],
)
def test_window_phase(watermark: int, phase: WindowPhase) -> None:
    window = TimeWindow(10, 20)
    assert window.max_timestamp == 19
    assert cleanup_time(window, 5) == 25
    assert window_phase(window, watermark, allowed_lateness=5) is phase


def test_without_allowed_lateness_a_window_is_cleaned_as_it_fires() -> None:
    assert window_phase(TimeWindow(10, 20), 20, allowed_lateness=0) is WindowPhase.CLEANED


@pytest.mark.parametrize(
    "make",
    [lambda: Tumbling(0), lambda: Sliding(10, 0), lambda: Session(-1), lambda: TimeWindow(5, 5)],
)
def test_bad_windows_are_refused(make: object) -> None:
    with pytest.raises(ConfigurationError, match="window"):
        make()  # type: ignore[operator]
