"""Watermarks: the formulas, idleness, monotonicity, lateness under any interleaving, snapshots."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kstream.dataflow.operators.windows import Tumbling, WindowPhase, window_phase
from kstream.errors import CheckpointError, ConfigurationError
from kstream.protocol.watermarks import (
    MIN_WATERMARK,
    InputWatermarks,
    Lateness,
    SourceWatermarks,
    Stamped,
    Unusable,
    UnusableKind,
    WatermarkConfig,
    lateness,
)

NO_IDLE = 10**12  # an idle timeout no test clock reaches


def stamped(decision: Stamped | Unusable) -> Stamped:
    assert isinstance(decision, Stamped), decision
    return decision


# -- the formulas, by example -------------------------------------------------


def test_partition_watermark_is_max_minus_out_of_orderness() -> None:
    w = SourceWatermarks(WatermarkConfig(out_of_orderness=5, idle_timeout=NO_IDLE), [0], now=0)
    assert w.watermark == MIN_WATERMARK
    first = stamped(w.observe(0, 100, now=0))
    assert (first.partition_watermark, first.advanced_to) == (MIN_WATERMARK, 95)
    # Out of order within the bound: no advance, the stamp is the watermark before it.
    second = stamped(w.observe(0, 97, now=1))
    assert (second.partition_watermark, second.advanced_to) == (95, None)
    assert stamped(w.observe(0, 110, now=2)).advanced_to == 105
    assert w.partition_watermark(0) == 105


def test_subtask_watermark_is_min_over_active_partitions() -> None:
    w = SourceWatermarks(WatermarkConfig(out_of_orderness=0, idle_timeout=NO_IDLE), [0, 1], now=0)
    # Partition 1 has delivered nothing: it holds the subtask back.
    assert stamped(w.observe(0, 50, now=0)).advanced_to is None
    assert stamped(w.observe(1, 20, now=0)).advanced_to == 20
    assert stamped(w.observe(1, 70, now=0)).advanced_to == 50
    assert w.watermark == 50


def test_an_idle_partition_stops_holding_back_until_it_delivers() -> None:
    w = SourceWatermarks(WatermarkConfig(out_of_orderness=0, idle_timeout=10), [0, 1], now=0)
    stamped(w.observe(0, 100, now=5))
    assert w.tick(now=9) is None  # partition 1 silent for 9 < 10
    assert w.tick(now=10) == 100  # silent for 10: idle
    assert not w.idle
    # It delivers again, behind the subtask's watermark: the subtask does not go back,
    # and the record's stamp is its own partition's watermark (the non-reproducible case).
    again = stamped(w.observe(1, 40, now=11))
    assert (again.partition_watermark, again.advanced_to, w.watermark) == (MIN_WATERMARK, None, 100)
    assert w.tick(now=30) is None
    assert w.idle  # both silent: the subtask is idle, its watermark stays
    assert w.watermark == 100


def test_unusable_timestamps_are_values_and_move_nothing() -> None:
    w = SourceWatermarks(WatermarkConfig(out_of_orderness=0, max_future=1000), [0], now=0)
    for bad in (None, "12", 1.5, True, 2**63):
        decision = w.observe(0, bad, now=0)
        assert isinstance(decision, Unusable)
        assert decision.kind is UnusableKind.MISSING
    # Without a wall clock a partition's first record is judged by nothing.
    stamped(w.observe(0, 5000, now=0))
    far = w.observe(0, 6001, now=0)
    assert isinstance(far, Unusable)
    assert far.kind is UnusableKind.FAR_FUTURE
    assert far.reason.startswith("timestamp 6001 is more than 1000 ms ahead")
    assert stamped(w.observe(0, 6000, now=0)).advanced_to == 6000
    assert w.watermark == 6000


def test_unusable_reasons_say_an_int_of_milliseconds_is_needed() -> None:
    w = SourceWatermarks(WatermarkConfig(), [0], now=0)
    reasons = [w.observe(0, bad, now=0) for bad in (None, 1.5e12, "soon", 2**63)]
    assert [r.reason for r in reasons if isinstance(r, Unusable)] == [
        "no usable timestamp: None",
        "no usable timestamp: 1500000000000.0 is a float: timestamps= must return an int "
        "of milliseconds (e.g. int(ms))",
        "no usable timestamp: 'soon': timestamps= must return an int of milliseconds",
        f"no usable timestamp: {2**63} does not fit in 64 signed bits of milliseconds",
    ]


def test_a_partitions_first_record_is_judged_against_the_wall_clock() -> None:
    w = SourceWatermarks(WatermarkConfig(out_of_orderness=0, max_future=1000), [0, 1], now=0)
    wall = 1_000_000
    first = w.observe(0, wall + 1001, now=0, wall_clock=wall)
    assert isinstance(first, Unusable)
    assert first.kind is UnusableKind.FAR_FUTURE
    assert first.reason.startswith(
        f"timestamp {wall + 1001} of partition 0's first record is more than 1000 ms ahead "
        f"of the wall clock ({wall})"
    )
    # It moved nothing: the next record is the partition's first still, and old
    # data (a backfill) is never too far ahead of the wall clock.
    assert w.partition_watermark(0) == MIN_WATERMARK
    assert stamped(w.observe(0, 5, now=0, wall_clock=wall)).partition_watermark == MIN_WATERMARK
    assert stamped(w.observe(1, wall + 1000, now=0, wall_clock=wall)).timestamp == wall + 1000
    # Later records are judged against their partition's watermark, not the clock.
    assert stamped(w.observe(1, wall + 2000, now=0, wall_clock=wall)).timestamp == wall + 2000


def test_bad_configuration_and_partitions_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="out_of_orderness"):
        WatermarkConfig(out_of_orderness=-1)
    with pytest.raises(ConfigurationError, match="partition"):
        SourceWatermarks(WatermarkConfig(), [], now=0)
    with pytest.raises(ConfigurationError, match="partition 3"):
        SourceWatermarks(WatermarkConfig(), [0], now=0).observe(3, 1, now=0)
    with pytest.raises(ConfigurationError, match="input channel"):
        InputWatermarks(["a"]).observe("b", 1)


@pytest.mark.parametrize(
    ("ts", "expected"),
    [
        (100, Lateness.ON_TIME),
        (99, Lateness.ALLOWED),
        (90, Lateness.ALLOWED),
        (89, Lateness.TOO_LATE),
    ],
)
def test_lateness_against_the_partition_watermark(ts: int, expected: Lateness) -> None:
    assert lateness(ts, partition_watermark=100, allowed_lateness=10) is expected


def test_input_watermark_is_min_over_channels_without_idle_ones() -> None:
    w = InputWatermarks(["a", "b"])
    assert w.observe("a", 10) is None
    assert w.observe("b", 5) == 5
    assert w.observe("b", 3) is None  # a writer's watermark never moves back
    assert w.observe("b", 20) == 10
    assert w.observe("a", 30, idle=True) == 20
    assert w.observe("b", 25, idle=True) is None  # all idle: it stays
    assert w.idle
    assert w.watermark == 20
    assert w.observe("b", 40) == 40


# -- properties ---------------------------------------------------------------

timestamps = st.integers(min_value=-10_000, max_value=10_000)


@st.composite
def partition_logs(draw: st.DrawFn) -> list[list[int]]:
    """Per partition, its records' timestamps in offset order."""
    return draw(st.lists(st.lists(timestamps, max_size=12), min_size=1, max_size=4))


@settings(deadline=None)
@given(
    logs=partition_logs(),
    ooo=st.integers(0, 50),
    idle_timeout=st.integers(1, 30),
    data=st.data(),
)
def test_source_watermark_is_monotone_and_below_active_partitions(
    logs: list[list[int]], ooo: int, idle_timeout: int, data: st.DataObject
) -> None:
    config = WatermarkConfig(out_of_orderness=ooo, idle_timeout=idle_timeout, max_future=10**9)
    w = SourceWatermarks(config, range(len(logs)), now=0)
    cursor, now, last = [0] * len(logs), 0, MIN_WATERMARK
    while True:
        pending = [p for p, log in enumerate(logs) if cursor[p] < len(log)]
        now += data.draw(st.integers(0, 15))
        if pending and data.draw(st.booleans()):
            p = data.draw(st.sampled_from(pending))
            advanced = stamped(w.observe(p, logs[p][cursor[p]], now)).advanced_to
            cursor[p] += 1
        else:
            advanced = w.tick(now)
        assert w.watermark >= last
        assert (advanced is not None) == (w.watermark > last)
        last = w.watermark
        if not pending:
            break


@dataclass(frozen=True)
class Item:
    """What a source subtask writes to its channel: a record or its watermark."""

    ts: int | None = None
    partition_watermark: int = MIN_WATERMARK
    watermark: int | None = None


@settings(max_examples=300, deadline=None)
@given(
    subtasks=st.lists(partition_logs(), min_size=1, max_size=3),
    ooo=st.integers(0, 50),
    allowed=st.integers(0, 50),
    data=st.data(),
)
def test_a_record_not_too_late_at_its_partition_is_never_late_downstream(
    subtasks: list[list[list[int]]], ooo: int, allowed: int, data: st.DataObject
) -> None:
    """Any interleaving of partitions at the sources and of channels downstream.

    Source subtasks read their partitions in some order and write records, then
    their watermark, to their channel (FIFO); the downstream subtask reads the
    channels in some order. No partition goes idle (idleness is the documented
    exception). An on-time record is behind no downstream watermark; a record
    within the allowed lateness is behind it by at most that, so its window is
    never cleaned before it arrives.
    """
    config = WatermarkConfig(out_of_orderness=ooo, idle_timeout=10**12, max_future=10**9)
    sources = [SourceWatermarks(config, range(len(logs)), now=0) for logs in subtasks]
    cursors = [[0] * len(logs) for logs in subtasks]
    channels: list[list[Item]] = [[] for _ in subtasks]
    downstream = InputWatermarks(range(len(subtasks)))
    while True:
        readable = [
            (s, p)
            for s, logs in enumerate(subtasks)
            for p, log in enumerate(logs)
            if cursors[s][p] < len(log)
        ]
        deliverable = [c for c, queue in enumerate(channels) if queue]
        if not readable and not deliverable:
            break
        if readable and (not deliverable or data.draw(st.booleans())):
            s, p = data.draw(st.sampled_from(readable))
            decision = stamped(sources[s].observe(p, subtasks[s][p][cursors[s][p]], now=0))
            cursors[s][p] += 1
            channels[s].append(
                Item(ts=decision.timestamp, partition_watermark=decision.partition_watermark)
            )
            channels[s].append(Item(watermark=sources[s].watermark))
            continue
        c = data.draw(st.sampled_from(deliverable))
        item = channels[c].pop(0)
        if item.watermark is not None:
            downstream.observe(c, item.watermark)
            continue
        assert item.ts is not None
        verdict = lateness(item.ts, item.partition_watermark, allowed)
        if verdict is Lateness.ON_TIME:
            assert item.ts >= downstream.watermark
            window = Tumbling(7).assign(item.ts)[0]
            assert window_phase(window, downstream.watermark, allowed) is WindowPhase.OPEN
        if verdict is not Lateness.TOO_LATE:
            assert item.ts + allowed >= downstream.watermark
            window = Tumbling(7).assign(item.ts)[0]
            assert window_phase(window, downstream.watermark, allowed) is not WindowPhase.CLEANED


def test_an_idle_partition_resuming_behind_is_the_exception() -> None:
    """The one case the property excludes, shown so it stays documented."""
    w = SourceWatermarks(WatermarkConfig(out_of_orderness=0, idle_timeout=10), [0, 1], now=0)
    stamped(w.observe(0, 100, now=5))
    assert w.tick(now=10) == 100
    late_resume = stamped(w.observe(1, 40, now=11))
    assert lateness(late_resume.timestamp, late_resume.partition_watermark, 0) is Lateness.ON_TIME
    assert late_resume.timestamp < w.watermark


@settings(deadline=None)
@given(
    logs=partition_logs(),
    ooo=st.integers(0, 50),
    data=st.data(),
)
def test_restore_from_a_snapshot_replays_identically(
    logs: list[list[int]], ooo: int, data: st.DataObject
) -> None:
    config = WatermarkConfig(out_of_orderness=ooo, idle_timeout=NO_IDLE, max_future=5_000)
    order = [p for p, log in enumerate(logs) for _ in log]
    order = data.draw(st.permutations(order))
    events: list[tuple[int, int]] = []
    cursor = [0] * len(logs)
    for p in order:
        events.append((p, logs[p][cursor[p]]))
        cursor[p] += 1
    cut = data.draw(st.integers(0, len(events)))

    straight = SourceWatermarks(config, range(len(logs)), now=0)
    expected = [straight.observe(p, ts, now=0) for p, ts in events]

    before = SourceWatermarks(config, range(len(logs)), now=0)
    for p, ts in events[:cut]:
        before.observe(p, ts, now=0)
    # Through JSON, as a checkpoint stores it.
    snapshot = json.loads(json.dumps(before.snapshot()))
    after = SourceWatermarks.restore(config, range(len(logs)), snapshot, now=0)
    assert after.watermark == before.watermark
    assert [after.observe(p, ts, now=0) for p, ts in events[cut:]] == expected[cut:]


@settings(deadline=None)
@given(
    marks=st.lists(
        st.tuples(st.integers(0, 3), st.integers(-100, 100), st.booleans()), max_size=40
    ),
    cut=st.integers(0, 40),
)
def test_input_watermark_is_the_monotone_min_and_restores(
    marks: list[tuple[int, int, bool]], cut: int
) -> None:
    channels = ["a", "b", "c", "d"]
    straight = InputWatermarks(channels)
    outputs: list[int | None] = []
    best, idle, expected = [MIN_WATERMARK] * 4, [False] * 4, MIN_WATERMARK
    for c, mark, is_idle in marks:
        outputs.append(straight.observe(channels[c], mark, is_idle))
        # Brute force: each channel's highest mark, the min over the active ones, never back.
        best[c], idle[c] = max(best[c], mark), is_idle
        active = [best[k] for k in range(4) if not idle[k]]
        moved = bool(active) and min(active) > expected
        expected = min(active) if moved else expected
        assert straight.watermark == expected
        assert outputs[-1] == (expected if moved else None)
    before = InputWatermarks(channels)
    for c, mark, is_idle in marks[:cut]:
        before.observe(channels[c], mark, is_idle)
    after = InputWatermarks.restore(channels, json.loads(json.dumps(before.snapshot())))
    assert [after.observe(channels[c], m, i) for c, m, i in marks[cut:]] == outputs[cut:]


def test_a_damaged_snapshot_is_refused() -> None:
    with pytest.raises(CheckpointError, match="source watermark"):
        SourceWatermarks.restore(WatermarkConfig(), [0], {"max": {"0": "x"}}, now=0)
    with pytest.raises(CheckpointError, match="input watermark"):
        InputWatermarks.restore(["a"], {"channels": [1, 2], "idle": [], "watermark": 1})
