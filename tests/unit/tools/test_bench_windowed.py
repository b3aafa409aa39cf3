"""The windowed benchmark workload: its timing, its expected output, its check, and the
hand-written loops' windows (pure logic)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.loops import Windows
from benchmarks.suite import WindowedInput
from benchmarks.workloads import (
    LINE_MS,
    EventTime,
    Tally,
    default_t0,
    expected,
    flush_line,
    generate,
    window_value,
)


def _timing(lines: int, window_ms: int, k: int) -> EventTime:
    return EventTime(k * window_ms, lines, window_ms)


def _run_loop_windows(
    lines: list[str], timing: EventTime, partitions: int, seed: int
) -> list[tuple[bytes, bytes]]:
    """What the loops emit when partitions interleave at random (each kept in order)."""
    per: list[list[tuple[int, bytes]]] = [[] for _ in range(partitions)]
    for i, line in enumerate(lines):
        per[i % partitions].append((timing.timestamp(i), line.encode()))
    flush = flush_line(lines).encode()
    for queue in per:
        queue.append((timing.flush_ms, flush))
    windows = Windows(timing.window_ms, partitions)
    rnd = random.Random(seed)
    out: list[tuple[bytes, bytes]] = []
    while any(per):
        p = rnd.choice([q for q in range(partitions) if per[q]])
        for _ in range(rnd.randint(1, 5)):
            if per[p]:
                ts, value = per[p].pop(0)
                windows.add(p, ts, value.split())
        out.extend(windows.closed())
    return out


@given(st.integers(0, 5000), st.integers(1, 50_000), st.integers(0, 10**8))
def test_no_data_is_late_under_grace_and_the_flush_closes_every_data_window(
    lines: int, window_ms: int, k: int
) -> None:
    t = _timing(lines, window_ms, k)
    first_end, last_ts = t.t0 + window_ms, t.timestamp(max(lines - 1, 0))
    # Stream time never passes the last data timestamp before the flush: a data record's
    # window (ending at first_end or later) is still open with the grace.
    assert first_end + t.grace_ms > last_ts
    # The flush closes the last data window even with the grace...
    assert t.flush_ms - t.grace_ms >= t.last_end
    # ... and its own window holds no data and never closes.
    assert t.window_start(t.flush_ms) >= t.last_end
    assert t.window_start(t.flush_ms) > last_ts


@given(st.integers(1, 10**6), st.integers(1, 60_000), st.integers(2 * 10**12, 3 * 10**12))
def test_default_t0_is_aligned_and_the_flush_is_before_the_clock(
    lines: int, window_ms: int, now: int
) -> None:
    t = EventTime(default_t0(lines, now, window_ms), lines, window_ms)
    assert t.t0 % window_ms == 0
    assert t.flush_ms <= now
    assert t.timestamp(1) - t.timestamp(0) == LINE_MS


@given(st.integers(1, 600), st.integers(1, 400), st.integers(1, 4), st.integers(0, 10**6))
@settings(max_examples=60, deadline=None)
def test_loop_windows_output_passes_and_any_single_fault_is_named(
    words: int, window_ms: int, partitions: int, seed: int
) -> None:
    lines = generate(words, seed)
    timing = _timing(len(lines), window_ms, seed % 1000)
    expect = expected(lines, "windowed", timing=timing)
    good = _run_loop_windows(lines, timing, partitions, seed)
    tally = Tally(expect)
    for k, v in good:
        tally.add(k, v)
    assert tally.complete
    assert tally.problems() == []
    assert len(good) == expect.total
    rnd = random.Random(seed)
    i = rnd.randrange(len(good))
    key, value = good[i]
    start, count = map(int, value.split())
    flush_start = timing.window_start(timing.flush_ms)
    faults = {
        "lost": good[:i] + good[i + 1 :],
        "repeated": [*good, good[i]],
        "wrong count": [*good[:i], (key, window_value(start, count + 1)), *good[i + 1 :]],
        "flush window emitted": [*good, (key, window_value(flush_start, 1))],
        "not a window value": [*good[:i], (key, b"7"), *good[i + 1 :]],
        "unknown key": [*good[:i], (b"nosuchword", value), *good[i + 1 :]],
    }
    for name, records in faults.items():
        bad = Tally(expect)
        for k, v in records:
            bad.add(k, v)
        assert bad.problems(), name


def test_expected_windows_are_counts_per_word_and_window() -> None:
    # Lines 0..3 at t0 + 0..3 ms; windows of 2 ms.
    timing = EventTime(1000, 4, 2)
    expect = expected(["a b", "a", "b b", "a"], "windowed", timing=timing)
    assert expect.windows == {b"a": {1000: 2, 1002: 1}, b"b": {1000: 1, 1002: 2}}
    assert expect.per_key == {b"a": 2, b"b": 2}
    assert expect.total == 4


def test_a_window_counted_twice_is_described() -> None:
    expect = expected(["a"], "windowed", timing=EventTime(0, 1, 10))
    tally = Tally(expect)
    tally.add(b"a", window_value(0, 1))
    tally.add(b"a", window_value(0, 1))
    assert tally.problems() == [
        "a: 2 window results, expected 1 (0 missing, 0 unexpected, 1 repeated, 0 wrong counts)"
    ]


@given(st.integers(0, 1000), st.integers(1, 7))
def test_data_ends_are_where_each_partition_s_lines_stop(lines: int, partitions: int) -> None:
    windowed = WindowedInput(["x"] * lines, EventTime(0, lines, 10), partitions)
    ends = windowed.data_ends()
    assert ends == {p: len(range(p, lines, partitions)) for p in range(partitions)}
