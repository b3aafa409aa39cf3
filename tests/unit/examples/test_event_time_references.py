"""The examples' references and inputs: by hand, against interleavings, against the pure parts."""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Protocol

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kstream.dataflow.operators.windows import (
    Session,
    Sliding,
    TimeWindow,
    Tumbling,
    WindowPhase,
    merge_session,
    window_phase,
)
from kstream.dataflow.state.timers import Timer, TimerQueue
from kstream.examples import inputs, references
from kstream.examples.references import Record
from kstream.protocol.watermarks import (
    InputWatermarks,
    Lateness,
    SourceWatermarks,
    Stamped,
    WatermarkConfig,
    lateness,
)

# -- by hand ------------------------------------------------------------------


def test_too_late_is_judged_against_the_own_partition_only() -> None:
    records: list[Record] = [
        (0, 100, "a", "x"),
        (1, 10, "a", "y"),  # far behind partition 0, but partition 1 has seen nothing
        (0, 95, "a", "z"),  # within the bound of 5
        (0, 94, "a", "w"),  # behind 100 - 5
    ]
    assert references.too_late(records, out_of_orderness=5, allowed_lateness=0) == [
        False,
        False,
        False,
        True,
    ]
    assert references.too_late(records, out_of_orderness=5, allowed_lateness=1) == [False] * 4


def test_windowed_counts_by_hand() -> None:
    records: list[Record] = [
        (0, 3, "a", ""),
        (0, 12, "a", ""),
        (1, 9, "b", ""),
        (0, 1, "a", ""),  # 12 - 2 = 10 > 1: too late
        (1, 25, "a", ""),
    ]
    tumbling = references.windowed_counts(records, Tumbling(10), out_of_orderness=2)
    assert tumbling.results == {
        ("a", TimeWindow(0, 10)): 1,
        ("a", TimeWindow(10, 20)): 1,
        ("b", TimeWindow(0, 10)): 1,
        ("a", TimeWindow(20, 30)): 1,
    }
    assert tumbling.late == [(0, 1, "a", "")]
    # Final watermarks: partition 0 at 12 - 2, partition 1 at 25 - 2.
    assert tumbling.watermark == 10
    assert set(tumbling.certainly_fired()) == {("a", TimeWindow(0, 10)), ("b", TimeWindow(0, 10))}
    sliding = references.windowed_counts(records, Sliding(10, 5), out_of_orderness=2)
    assert sliding.results[("a", TimeWindow(5, 15))] == 1
    assert sliding.results[("a", TimeWindow(-5, 5))] == 1
    assert ("a", TimeWindow(0, 10)) in sliding.results


def test_sessions_by_hand() -> None:
    records: list[Record] = [
        (0, 0, "u", "/a"),
        (0, 9, "u", "/b"),  # 9 - 0 < gap: same session
        (0, 19, "u", "/c"),  # 19 - 9 = gap: a new session (touching windows stay apart)
        (0, 28, "u", "/d"),  # 28 - 19 < gap
        (0, 12, "u", "/e"),  # 28 - 15 = 13 > 12: too late, so it bridges nothing
    ]
    result = references.sessions(records, gap=10, out_of_orderness=15)
    assert result.results == {
        ("u", TimeWindow(0, 19)): (2, ("/a", "/b")),
        ("u", TimeWindow(19, 38)): (2, ("/c", "/d")),
    }
    assert result.late == [(0, 12, "u", "/e")]
    bridged = references.sessions(records, gap=10, out_of_orderness=16)
    assert bridged.results == {("u", TimeWindow(0, 38)): (5, ("/a", "/b", "/c", "/d", "/e"))}


def test_interval_join_by_hand() -> None:
    orders: list[Record] = [(0, 100, "o1", "A"), (0, 200, "o2", "B"), (0, 50, "o3", "late")]
    payments: list[Record] = [
        (0, 99, "o1", "p-before"),
        (0, 100, "o1", "p-same"),
        (0, 160, "o1", "p-upper"),
        (0, 161, "o1", "p-too-far"),
        (0, 210, "o2", "p2"),
    ]
    joined = references.interval_join(orders, payments, lower=1, upper=60, out_of_orderness=10)
    assert joined.pairs == {
        ("o1", "A", "p-before", 100),
        ("o1", "A", "p-same", 100),
        ("o1", "A", "p-upper", 160),
        ("o2", "B", "p2", 210),
    }
    assert joined.late_left == [(0, 50, "o3", "late")]
    assert joined.late_right == []


def test_enrichment_by_hand() -> None:
    table: list[Record] = [
        (0, 10, "u", "gold"),
        (0, 20, "u", None),  # tombstone
        (0, 20, "v", "silver"),
        (0, 30, "u", "bronze"),
        (0, 5, "u", "stale"),  # 30 - 3 > 5: too late, never applied
    ]
    stream: list[Record] = [
        (0, 9, "u", "s0"),
        (1, 10, "u", "s1"),
        (1, 25, "u", "s2"),
        (1, 29, "v", "s3"),
        (0, 31, "u", "s4"),
    ]
    enriched = references.enrichment(stream, table, out_of_orderness=3)
    assert enriched.rows == {
        ("u", "s0", None, 9),
        ("u", "s1", "gold", 10),
        ("u", "s2", None, 25),
        ("v", "s3", "silver", 29),
        ("u", "s4", "bronze", 31),
    }
    assert enriched.late_table == [(0, 5, "u", "stale")]


# -- the generated inputs ---------------------------------------------------------


def generated() -> list[tuple[str, list[Record], int]]:
    orders, payments = inputs.orders_and_payments(7)
    table, visits = inputs.profiles_and_visits(7)
    return [
        ("events", inputs.keyed_events(7), 1_000),
        ("clicks", inputs.clicks(7), 5_000),
        ("orders", orders, 5_000),
        ("payments", payments, 5_000),
        ("table", table, 2_000),
        ("visits", visits, 2_000),
    ]


@pytest.mark.parametrize(("name", "records", "ooo"), generated())
def test_exactly_the_planted_records_are_too_late(
    name: str, records: list[Record], ooo: int
) -> None:
    planted = [r[3] is not None and r[3].startswith("late-") for r in records]
    assert any(planted), name
    assert references.too_late(records, ooo, 0) == planted
    # The others are not even behind their partition's watermark.
    top: dict[int, int] = {}
    for (p, ts, _, _), late in zip(records, planted, strict=True):
        if not late:
            assert ts >= top.get(p, ts) - ooo
        top[p] = max(ts, top.get(p, ts))


def test_inputs_are_deterministic_and_have_an_idle_stretch() -> None:
    assert inputs.keyed_events(3) == inputs.keyed_events(3)
    assert inputs.keyed_events(3) != inputs.keyed_events(4)
    assert inputs.clicks(3) == inputs.clicks(3)
    events = inputs.keyed_events(3)
    idle = sorted(
        ts for p, ts, _, v in events if p == inputs.IDLE_PARTITION and v and "late" not in v
    )
    busy = sorted(ts for p, ts, _, v in events if p != inputs.IDLE_PARTITION)
    # The idle partition's widest silence: the other partitions write dozens of records in it.
    a, b = max(itertools.pairwise(idle), key=lambda ab: ab[1] - ab[0])
    assert sum(1 for ts in busy if a < ts < b) >= 30


# -- interleavings ---------------------------------------------------------------


def reinterleave(records: list[Record], data: st.DataObject) -> list[Record]:
    """Another write order with each partition's order kept."""
    queues: dict[int, list[Record]] = {}
    for r in records:
        queues.setdefault(r[0], []).append(r)
    order = data.draw(st.permutations([p for p, q in queues.items() for _ in q]))
    cursor = dict.fromkeys(queues, 0)
    out = []
    for p in order:
        out.append(queues[p][cursor[p]])
        cursor[p] += 1
    return out


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_references_do_not_depend_on_the_interleaving(data: st.DataObject) -> None:
    events, clicks = inputs.keyed_events(11, count=120), inputs.clicks(11)
    orders, payments = inputs.orders_and_payments(11)
    table, visits = inputs.profiles_and_visits(11, visits=80)
    counts = references.windowed_counts(events, Sliding(5_000, 1_000), 1_000)
    again = references.windowed_counts(reinterleave(events, data), Sliding(5_000, 1_000), 1_000)
    assert (again.results, Counter(again.late)) == (counts.results, Counter(counts.late))
    s1 = references.sessions(clicks, 30_000, 5_000)
    s2 = references.sessions(reinterleave(clicks, data), 30_000, 5_000)
    assert (s1.results, Counter(s1.late)) == (s2.results, Counter(s2.late))
    j1 = references.interval_join(orders, payments, 0, 60_000, 5_000)
    j2 = references.interval_join(
        reinterleave(orders, data), reinterleave(payments, data), 0, 60_000, 5_000
    )
    assert j1.pairs == j2.pairs
    e1 = references.enrichment(visits, table, 2_000)
    e2 = references.enrichment(reinterleave(visits, data), reinterleave(table, data), 2_000)
    assert e1.rows == e2.rows


# -- the pure parts composed, under any interleaving, give the reference ------------


class Operator(Protocol):
    """A keyed event-time operator fed by `drive`."""

    def on_record(self, record: Record, partition_watermark: int, watermark: int) -> None: ...

    def on_watermark(self, watermark: int) -> None: ...


def drive(
    records: list[Record], ooo: int, subtasks: int, operator: Operator, data: st.DataObject
) -> None:
    """Source subtasks -> FIFO channels -> one operator subtask, in an interleaving `data` picks.

    As §10 describes it: each source subtask stamps records with their
    partition's watermark and writes its own watermark after each record; the
    operator's input watermark is the minimum over the channels. Nothing idles.
    """
    partitions = sorted({r[0] for r in records})
    queues = {p: [r for r in records if r[0] == p] for p in partitions}
    # Every subtask reads at least one partition that has records (an empty one
    # would hold the watermark back until it went idle).
    subtasks = max(1, min(subtasks, len(partitions)))
    owner = {p: i % subtasks for i, p in enumerate(partitions)}
    config = WatermarkConfig(out_of_orderness=ooo, idle_timeout=10**12, max_future=10**12)
    sources = [
        SourceWatermarks(config, [p for p in partitions if owner[p] == s] or [0], now=0)
        for s in range(subtasks)
    ]
    channels: list[list[tuple[Record, int] | int]] = [[] for _ in range(subtasks)]
    input_watermarks = InputWatermarks(range(subtasks))
    while True:
        readable = [p for p in partitions if queues[p]]
        deliverable = [c for c in range(subtasks) if channels[c]]
        if not readable and not deliverable:
            return
        if readable and (not deliverable or data.draw(st.booleans())):
            p = data.draw(st.sampled_from(readable))
            record = queues[p].pop(0)
            s = owner[p]
            decision = sources[s].observe(p, record[1], now=0)
            assert isinstance(decision, Stamped)
            channels[s] += [(record, decision.partition_watermark), sources[s].watermark]
            continue
        c = data.draw(st.sampled_from(deliverable))
        item = channels[c].pop(0)
        if isinstance(item, int):
            if input_watermarks.observe(c, item) is not None:
                operator.on_watermark(input_watermarks.watermark)
        else:
            operator.on_record(item[0], item[1], input_watermarks.watermark)


def timer_name(key: str, window: TimeWindow) -> bytes:
    return f"{key}\0{window.start}\0{window.end}".encode()


def timer_owner(raw: bytes) -> tuple[str, TimeWindow]:
    key, start, end = raw.decode().split("\0")
    return key, TimeWindow(int(start), int(end))


class WindowCounts:
    """Tumbling or sliding counts: timers at `end` emit, at `end + allowed` clean."""

    def __init__(self, assigner: Tumbling | Sliding, allowed: int) -> None:
        self.assigner, self.allowed = assigner, allowed
        self.state: dict[tuple[str, TimeWindow], int] = {}
        self.fire, self.clean = TimerQueue(), TimerQueue()
        #: The last emission per (key, window): what a reader ends with.
        self.emitted: dict[tuple[str, TimeWindow], int] = {}
        self.late: list[Record] = []

    def on_record(self, record: Record, partition_watermark: int, watermark: int) -> None:
        _, ts, key, _ = record
        if lateness(ts, partition_watermark, self.allowed) is Lateness.TOO_LATE:
            self.late.append(record)
            return
        for window in self.assigner.assign(ts):
            phase = window_phase(window, watermark, self.allowed)
            assert phase is not WindowPhase.CLEANED  # proved in §10 when nothing is idle
            self.state[key, window] = self.state.get((key, window), 0) + 1
            if phase is WindowPhase.FIRED:
                self.emitted[key, window] = self.state[key, window]  # an update
            else:
                self.fire.register(Timer(window.end, timer_name(key, window)))
            self.clean.register(Timer(window.end + self.allowed, timer_name(key, window)))

    def on_watermark(self, watermark: int) -> None:
        for timer in self.fire.advance(watermark):
            self.emitted[timer_owner(timer.key)] = self.state[timer_owner(timer.key)]
        for timer in self.clean.advance(watermark):
            del self.state[timer_owner(timer.key)]


class Sessions:
    """Session windows merged on insert; a merged-away session's emission is superseded."""

    def __init__(self, gap: int, allowed: int) -> None:
        self.gap, self.allowed = gap, allowed
        self.state: dict[str, dict[TimeWindow, list[str]]] = {}
        self.fire, self.clean = TimerQueue(), TimerQueue()
        self.emitted: dict[tuple[str, TimeWindow], object] = {}
        self.late: list[Record] = []

    def result(self, key: str, window: TimeWindow) -> object:
        values = self.state[key][window]
        return len(values), tuple(sorted(values))

    def on_record(self, record: Record, partition_watermark: int, watermark: int) -> None:
        _, ts, key, value = record
        if lateness(ts, partition_watermark, self.allowed) is Lateness.TOO_LATE:
            self.late.append(record)
            return
        sessions = self.state.setdefault(key, {})
        (own,) = Session(self.gap).assign(ts)
        step = merge_session(sessions, own)
        contents = [value or ""]
        for old in step.merged:
            assert window_phase(old, watermark, self.allowed) is not WindowPhase.CLEANED
            contents += sessions.pop(old)
            self.fire.delete(Timer(old.end, timer_name(key, old)))
            self.clean.delete(Timer(old.end + self.allowed, timer_name(key, old)))
            self.emitted.pop((key, old), None)  # superseded by the merged session
        sessions[step.window] = contents
        phase = window_phase(step.window, watermark, self.allowed)
        assert phase is not WindowPhase.CLEANED
        if phase is WindowPhase.FIRED:
            self.emitted[key, step.window] = self.result(key, step.window)
        else:
            self.fire.register(Timer(step.window.end, timer_name(key, step.window)))
        self.clean.register(Timer(step.window.end + self.allowed, timer_name(key, step.window)))

    def on_watermark(self, watermark: int) -> None:
        for timer in self.fire.advance(watermark):
            self.emitted[timer_owner(timer.key)] = self.result(*timer_owner(timer.key))
        for timer in self.clean.advance(watermark):
            key, window = timer_owner(timer.key)
            del self.state[key][window]


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    allowed=st.sampled_from([0, 500, 3_000]),
    subtasks=st.integers(1, 3),
    sliding=st.booleans(),
    data=st.data(),
)
def test_windows_built_from_the_pure_parts_give_the_reference_under_any_interleaving(
    seed: int, allowed: int, subtasks: int, sliding: bool, data: st.DataObject
) -> None:
    records = inputs.keyed_events(seed, count=80, step_ms=300, late=3, allowed_lateness=allowed)
    assigner: Tumbling | Sliding = Sliding(4_000, 1_000) if sliding else Tumbling(3_000)
    expected = references.windowed_counts(records, assigner, 1_000, allowed)
    operator = WindowCounts(assigner, allowed)
    drive(records, 1_000, subtasks, operator, data)
    assert Counter(operator.late) == Counter(expected.late)
    # Every window that fired shows its final count last; every certain one fired.
    assert operator.emitted == {kw: expected.results[kw] for kw in operator.emitted}
    assert set(expected.certainly_fired()) <= set(operator.emitted)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    allowed=st.sampled_from([0, 2_000, 20_000]),
    subtasks=st.integers(1, 3),
    data=st.data(),
)
def test_sessions_built_from_the_pure_parts_give_the_reference_under_any_interleaving(
    seed: int, allowed: int, subtasks: int, data: st.DataObject
) -> None:
    records = inputs.clicks(
        seed,
        users=4,
        gap_ms=3_000,
        sessions_per_user=3,
        out_of_orderness=2_000,
        late=3,
        allowed_lateness=allowed,
    )
    expected = references.sessions(records, 3_000, 2_000, allowed)
    operator = Sessions(3_000, allowed)
    drive(records, 2_000, subtasks, operator, data)
    assert Counter(operator.late) == Counter(expected.late)
    assert operator.emitted == {kw: expected.results[kw] for kw in operator.emitted}
    assert set(expected.certainly_fired()) <= set(operator.emitted)


#: Raw records, any disorder: dense timestamps so touching windows, allowed-late
#: updates and merges of fired sessions all happen.
raw_records = st.lists(
    st.tuples(
        st.integers(0, 2), st.integers(0, 80), st.sampled_from(["a", "b"]), st.sampled_from("xyz")
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(
    records=raw_records,
    ooo=st.integers(0, 15),
    allowed=st.integers(0, 15),
    size=st.integers(1, 12),
    slide=st.integers(1, 12),
    gap=st.integers(1, 12),
    subtasks=st.integers(1, 3),
    data=st.data(),
)
def test_any_input_gives_the_reference_under_any_interleaving(
    records: list[Record],
    ooo: int,
    allowed: int,
    size: int,
    slide: int,
    gap: int,
    subtasks: int,
    data: st.DataObject,
) -> None:
    for assigner in (Tumbling(size), Sliding(size, min(slide, size))):
        expected = references.windowed_counts(records, assigner, ooo, allowed)
        counts = WindowCounts(assigner, allowed)
        drive(records, ooo, subtasks, counts, data)
        assert Counter(counts.late) == Counter(expected.late)
        assert counts.emitted == {kw: expected.results[kw] for kw in counts.emitted}
        assert set(expected.certainly_fired()) <= set(counts.emitted)
    expected = references.sessions(records, gap, ooo, allowed)
    sessions = Sessions(gap, allowed)
    drive(records, ooo, subtasks, sessions, data)
    assert Counter(sessions.late) == Counter(expected.late)
    assert sessions.emitted == {kw: expected.results[kw] for kw in sessions.emitted}
    assert set(expected.certainly_fired()) <= set(sessions.emitted)


#: Right-side partitions are shifted by this in `drive`, which reads both sides.
RIGHT = 100


#: Denser still for the join: two partitions a side, one key mostly, so that
#: watermarks advance, entries expire and pairs form near their bounds.
join_records = st.lists(
    st.tuples(
        st.integers(0, 1),
        st.integers(0, 40),
        st.sampled_from(["a", "a", "b"]),
        st.sampled_from("xyz"),
    ),
    min_size=5,
    max_size=30,
)


class IntervalJoin:
    """Both sides buffered per key; an entry is dropped by a timer once nothing can match it."""

    def __init__(self, lower: int, upper: int) -> None:
        self.lower, self.upper = lower, upper
        self.buffers: dict[tuple[bool, str], list[tuple[int, str | None]]] = {}
        self.expiry = TimerQueue()
        self.pairs: set[tuple[str, str | None, str | None, int]] = set()
        self.late: list[Record] = []

    def on_record(self, record: Record, partition_watermark: int, watermark: int) -> None:
        partition, ts, key, value = record
        right = partition >= RIGHT
        if lateness(ts, partition_watermark, 0) is Lateness.TOO_LATE:
            self.late.append(record)
            return
        for other_ts, other in self.buffers.get((not right, key), []):
            lt, lv, rt, rv = (other_ts, other, ts, value) if right else (ts, value, other_ts, other)
            if lt - self.lower <= rt <= lt + self.upper:
                self.pairs.add((key, lv, rv, max(lt, rt)))
        self.buffers.setdefault((right, key), []).append((ts, value))
        # No later admissible record of the other side (all at or after the
        # watermark) can match once the watermark passes this bound.
        bound = ts + (self.lower if right else self.upper) + 1
        self.expiry.register(Timer(bound, f"{int(right)}\0{key}\0{ts}".encode()))

    def on_watermark(self, watermark: int) -> None:
        for timer in self.expiry.advance(watermark):
            side, key, ts = timer.key.decode().split("\0")
            entries = self.buffers[side == "1", key]
            entries[:] = [e for e in entries if e[0] != int(ts)]


@settings(max_examples=600, deadline=None)
@given(
    left=join_records,
    right=join_records,
    ooo=st.integers(0, 6),
    lower=st.integers(0, 8),
    upper=st.integers(0, 8),
    subtasks=st.integers(1, 3),
    data=st.data(),
)
def test_an_interval_join_from_the_pure_parts_gives_the_reference(
    left: list[Record],
    right: list[Record],
    ooo: int,
    lower: int,
    upper: int,
    subtasks: int,
    data: st.DataObject,
) -> None:
    expected = references.interval_join(left, right, lower, upper, ooo)
    join = IntervalJoin(lower, upper)
    shifted = [(p + RIGHT, ts, k, v) for p, ts, k, v in right]
    drive(left + shifted, ooo, subtasks, join, data)
    assert join.pairs == expected.pairs
    unshifted = [
        (p - RIGHT, ts, k, v) if p >= RIGHT else (p, ts, k, v) for p, ts, k, v in join.late
    ]
    late_right = [r for r, orig in zip(unshifted, join.late, strict=True) if orig[0] >= RIGHT]
    late_left = [r for r, orig in zip(unshifted, join.late, strict=True) if orig[0] < RIGHT]
    assert Counter(late_left) == Counter(expected.late_left)
    assert Counter(late_right) == Counter(expected.late_right)
