"""The window operator and the joins against the examples' references, under random interleavings.

`MemoryContext` is a test double of the callback context only (named state
kept encoded by the msgpack state serde, timers in a `TimerQueue`), never of
Kafka. `drive` plays what the runtime does: it reads the partitions of each
side in a random interleaving (each partition in its order), stamps every
record with its partition's watermark before it, lets the operator's input
watermark trail the minimum over partitions by a random amount (the channels'
delay), fires due timers in order when it moves, and may crash and roll back
to a snapshot, then go on with another interleaving. Whatever happens, the
final results, pairs, rows and late sets must be the references'.
"""

from __future__ import annotations

import copy
import random
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kstream import Job, KafkaSink, KafkaSource, Tagged
from kstream.dataflow.operators.joins import enrichment_functions, interval_join_functions
from kstream.dataflow.operators.window import Aggregation, Apply, counting, window_functions
from kstream.dataflow.operators.windows import (
    Assigner,
    Session,
    Sliding,
    TimeWindow,
    Tumbling,
    session,
    sliding,
    tumbling,
)
from kstream.dataflow.state.serde import state_serde
from kstream.dataflow.state.timers import Timer, TimerQueue
from kstream.dataflow.types import LATE
from kstream.errors import ConfigurationError
from kstream.examples import inputs, references
from kstream.examples.references import Record
from kstream.protocol.watermarks import MIN_WATERMARK

SERDE = state_serde("msgpack")
#: The watermark of "end of input, every partition idle for good": fires everything.
FLUSH = 2**62


# -- the callback context double ------------------------------------------------


class _Map:
    def __init__(self, entries: dict[bytes, bytes]) -> None:
        self._entries = entries

    def get(self, entry: Any, default: Any = None) -> Any:
        raw = self._entries.get(SERDE.dumps(entry))
        return default if raw is None else SERDE.loads(raw)

    def put(self, entry: Any, value: Any) -> None:
        self._entries[SERDE.dumps(entry)] = SERDE.dumps(value)

    def remove(self, entry: Any) -> None:
        self._entries.pop(SERDE.dumps(entry), None)

    def contains(self, entry: Any) -> bool:
        return SERDE.dumps(entry) in self._entries

    def items(self) -> Iterator[tuple[Any, Any]]:
        return iter([(SERDE.loads(e), SERDE.loads(v)) for e, v in sorted(self._entries.items())])

    def keys(self) -> Iterator[Any]:
        return (e for e, _ in self.items())

    def values(self) -> Iterator[Any]:
        return (v for _, v in self.items())

    def clear(self) -> None:
        self._entries.clear()


class _Timers:
    def __init__(self, ctx: MemoryContext) -> None:
        self._ctx = ctx

    def register(self, timestamp: int) -> None:
        self._ctx.timer_queue.register(Timer(timestamp, self._ctx.key_bytes))

    def delete(self, timestamp: int) -> None:
        self._ctx.timer_queue.delete(Timer(timestamp, self._ctx.key_bytes))


@dataclass
class MemoryContext:
    """The runtime's keyed callback context, in memory (only what the operators use)."""

    maps: dict[tuple[str, bytes], dict[bytes, bytes]] = field(default_factory=dict)
    timer_queue: TimerQueue = field(default_factory=TimerQueue)
    key_bytes: bytes = b""
    timestamp: int = 0
    partition_watermark: int = MIN_WATERMARK
    watermark: int = MIN_WATERMARK

    @property
    def timers(self) -> _Timers:
        return _Timers(self)

    def map(self, name: str) -> _Map:
        return _Map(self.maps.setdefault((name, self.key_bytes), {}))


Fn = Callable[[Any, Any, Any], Iterable[Any] | None]
TimerFn = Callable[[Any, int, Any], Iterable[Any] | None]


@dataclass
class Outputs:
    main: list[Any] = field(default_factory=list)
    late: list[Any] = field(default_factory=list)
    #: After the flush: the state entries and timers still kept.
    state_left: int = 0


def _collect(out: Outputs, produced: Iterable[Any] | None) -> None:
    for value in produced or ():
        if isinstance(value, Tagged):
            assert value.tag == LATE, value
            out.late.append(value.value)
        else:
            out.main.append(value)


def _key(key: str) -> bytes:
    return key.encode()


def drive(
    sides: list[list[Record]],
    fns: list[Fn],
    on_timer: TimerFn,
    rng: random.Random,
    out_of_orderness: int,
    crash: bool = True,
) -> tuple[Outputs, Outputs]:
    """Outputs at the end of input (watermark at every partition's final one) and after a flush."""
    queues = {
        (s, p): [r for r in side if r[0] == p]
        for s, side in enumerate(sides)
        for p in {r[0] for r in side}
    }
    position = dict.fromkeys(queues, 0)
    top: dict[tuple[int, int], int] = {}
    ctx, out = MemoryContext(), Outputs()
    total = sum(len(q) for q in queues.values())
    snapshot_at = rng.randrange(total) if crash and total else -1
    crash_at = rng.randrange(snapshot_at, total) if snapshot_at >= 0 else -1
    saved: Any = None
    done = 0

    def input_watermark() -> int:
        # Every partition of every side feeds the operator: its input watermark is
        # at most the minimum of theirs (a partition that sent nothing holds it).
        return min(
            (top[q] - out_of_orderness if q in top else MIN_WATERMARK for q in queues),
            default=MIN_WATERMARK,
        )

    def advance(to: int) -> None:
        if to <= ctx.watermark:
            return
        ctx.watermark = to
        while (timer := ctx.timer_queue.pop_due(to)) is not None:
            ctx.key_bytes, ctx.timestamp, ctx.partition_watermark = (
                timer.key,
                timer.timestamp,
                timer.timestamp,
            )
            _collect(out, on_timer(timer.key.decode(), timer.timestamp, ctx))

    while done < total:
        if done == snapshot_at and saved is None:
            saved = copy.deepcopy((ctx, position, top, len(out.main), len(out.late)))
        if done == crash_at and saved is not None and crash:
            crash = False  # one crash per run
            ctx, position, top, n_main, n_late = copy.deepcopy(saved)
            del out.main[n_main:], out.late[n_late:]
            done = sum(position.values())
            continue
        q = rng.choice([q for q in queues if position[q] < len(queues[q])])
        _partition, ts, key, value = queues[q][position[q]]
        position[q] += 1
        done += 1
        stamp = top[q] - out_of_orderness if q in top else MIN_WATERMARK
        top[q] = max(ts, top.get(q, ts))
        ctx.key_bytes, ctx.timestamp, ctx.partition_watermark = _key(key), ts, stamp
        _collect(out, fns[q[0]](key, value, ctx))
        # The channels deliver the watermark late by a random amount, never early.
        target = input_watermark()
        if target > ctx.watermark and rng.random() < 0.5:
            advance(rng.choice((target, ctx.watermark + (target - ctx.watermark) // 2)))
    advance(input_watermark())
    at_end = Outputs(list(out.main), list(out.late))
    advance(FLUSH)
    out.state_left = sum(len(m) for m in ctx.maps.values()) + len(ctx.timer_queue)
    return at_end, out


def _late_set(late: Iterable[Any]) -> Counter[tuple[int, str, Any]]:
    return Counter((d["timestamp"], d["key"], d["value"]) for d in late)


def _ref_late(records: Iterable[Record]) -> Counter[tuple[int, str, Any]]:
    return Counter((ts, key, value) for _, ts, key, value in records)


def _check_update_flags(main: list[dict[str, Any]]) -> None:
    """A window's first result is not an update; every later one is."""
    seen: set[tuple[str, int, int]] = set()
    for out in main:
        kw = (out["key"], out["start"], out["end"])
        assert out["update"] is (kw in seen), out
        seen.add(kw)


# -- windows against the references ------------------------------------------------

#: Sliding windows whose size is a multiple of the slide are kept as slices when
#: nothing late is allowed (`window._sliced_functions`); 3,000 every 2,000 are not.
ASSIGNERS: list[Tumbling | Sliding] = [
    Tumbling(2_000),
    Sliding(3_000, 1_000),
    Sliding(4_000, 2_000, 500),
    Sliding(3_000, 2_000),
]


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    rng=st.randoms(use_true_random=False),
    assigner=st.sampled_from(ASSIGNERS),
    allowed=st.sampled_from([0, 1_500]),
    ooo=st.sampled_from([1_000, 300]),
    keys=st.sampled_from([5, 60]),
)
def test_windowed_counts_match_the_reference(
    seed: int, rng: random.Random, assigner: Tumbling | Sliding, allowed: int, ooo: int, keys: int
) -> None:
    # The input is out of order by up to 1 s; a job bound of 300 ms makes many
    # records late: within the allowed lateness (updates) or beyond it. With many
    # keys, a late record is often the first of its key in a window that fired.
    records = inputs.keyed_events(seed, keys=keys, out_of_orderness=1_000, allowed_lateness=allowed)
    process, on_timer = window_functions(assigner, allowed, counting())
    at_end, flushed = drive([records], [process], on_timer, rng, ooo)
    ref = references.windowed_counts(records, assigner, ooo, allowed)
    assert references.final_results(at_end.main) == ref.certainly_fired()
    assert references.final_results(flushed.main) == ref.results
    assert _late_set(flushed.late) == _ref_late(ref.late)
    _check_update_flags(flushed.main)
    if allowed == 0:
        assert not any(o["update"] for o in flushed.main)
    assert flushed.state_left == 0, "a window kept state or timers after its cleanup"


def _count_and_top(acc: list[Any], value: Any) -> list[Any]:
    acc[0] += 1
    acc[1] = max(acc[1], value)
    return acc


def _merge_count_and_top(acc: list[Any], other: list[Any]) -> list[Any]:
    acc[0] += other[0]
    acc[1] = max(acc[1], other[1])
    return acc


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    rng=st.randoms(use_true_random=False),
    assigner=st.sampled_from([Sliding(3_000, 1_000), Sliding(4_000, 2_000, 500)]),
    ooo=st.sampled_from([1_000, 300]),
)
def test_sliced_sliding_windows_give_the_per_window_results(
    seed: int, rng: random.Random, assigner: Sliding, ooo: int
) -> None:
    # A mutable accumulator that merges: slices merged at the timer must give what
    # adding every record to each of its windows gives (no merge: per window).
    events = inputs.keyed_events(seed, keys=20)
    records = [(p, ts, key, seed + i) for i, (p, ts, key, _) in enumerate(events)]
    outputs = []
    for merge in (_merge_count_and_top, None):
        function = Aggregation([0, -1], _count_and_top, merge=merge)
        process, on_timer = window_functions(assigner, 0, function)
        replay = random.Random(rng.random())
        at_end, flushed = drive([records], [process], on_timer, replay, ooo)
        assert flushed.state_left == 0
        outputs.append((at_end.main, flushed.main, _late_set(flushed.late)))
    (sliced_end, sliced, sliced_late), (whole_end, whole, whole_late) = outputs
    assert Counter(map(repr, sliced_end)) == Counter(map(repr, whole_end))
    assert Counter(map(repr, sliced)) == Counter(map(repr, whole))
    assert sliced_late == whole_late


def test_windows_kept_whole_by_an_earlier_version_still_fire_when_kept_as_slices() -> None:
    # State written per window (a job run before slices) is restored into the
    # sliced operator: a window's result merges its whole entry and its slices.
    per_window = window_functions(Sliding(10, 5), 0, Aggregation(0, lambda a, _: a + 1))
    sliced = window_functions(Sliding(10, 5), 0, counting())
    ctx = MemoryContext()
    _feed(ctx, per_window[0], "a", 7, 0)  # [0, 10) and [5, 15), whole
    assert sorted(tuple(e) for e, _ in ctx.map("windows").items()) == [(0, 10), (5, 15)]
    _feed(ctx, sliced[0], "a", 8, 0)  # slice [5, 10): in [0, 10) and [5, 15)
    _feed(ctx, sliced[0], "a", 12, 0)  # slice [10, 15): in [5, 15) and [10, 20)
    fired = _fire(ctx, sliced[1], 100)
    assert [(o["start"], o["end"], o["value"]) for o in fired] == [
        (0, 10, 2),
        (5, 15, 3),
        (10, 20, 1),
    ]
    assert not any(ctx.maps.values())
    assert len(ctx.timer_queue) == 0


def test_slices_restored_into_a_job_given_allowed_lateness_fire_in_their_windows() -> None:
    # Kept as slices (no allowed lateness), then restored with lateness 5: each
    # window absorbs its slices when it fires, updates after that, is cleaned.
    sliced = window_functions(Sliding(10, 5), 0, counting())
    per_window = window_functions(Sliding(10, 5), 5, counting())
    ctx = MemoryContext()
    _feed(ctx, sliced[0], "a", 7, 0)  # slice [5, 10): in [0, 10) and [5, 15)
    _feed(ctx, per_window[0], "a", 8, 0)  # whole [0, 10) and [5, 15)
    assert [(o["start"], o["value"], o["update"]) for o in _fire(ctx, per_window[1], 10)] == [
        (0, 2, False)
    ]
    # Allowed late into the fired [0, 10): an update of the absorbed count.
    assert [
        (o["start"], o["value"], o["update"]) for o in _feed(ctx, per_window[0], "a", 9, 9)
    ] == [(0, 3, True)]
    assert [(o["start"], o["value"]) for o in _fire(ctx, per_window[1], 100)] == [(5, 3)]
    assert not any(ctx.maps.values())
    assert len(ctx.timer_queue) == 0


def test_a_sliced_record_writes_one_entry_and_registers_its_windows_ends() -> None:
    process, on_timer = window_functions(Sliding(30, 10), 0, counting())
    ctx = MemoryContext()
    for ts in (21, 25, 29):
        assert _feed(ctx, process, "a", ts, 0) == []
    assert len(ctx.maps[("windows", b"a")]) == 1  # the slice [20, 30)
    assert {t.timestamp for t in ctx.timer_queue} == {30, 40, 50}
    assert [(o["start"], o["value"]) for o in _fire(ctx, on_timer, 40)] == [(0, 3), (10, 3)]
    assert len(ctx.maps[("windows", b"a")]) == 1  # still in [20, 50)
    assert [(o["start"], o["value"]) for o in _fire(ctx, on_timer, 50)] == [(20, 3)]
    assert not any(ctx.maps.values())


def _clicks_result(key: str, window: TimeWindow, values: tuple[Any, ...]) -> Any:
    return (len(values), tuple(sorted(values)))


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    rng=st.randoms(use_true_random=False),
    allowed=st.sampled_from([0, 20_000, 70_000]),
    apply=st.booleans(),
    ooo=st.sampled_from([5_000, 1_000]),
)
def test_sessions_match_the_reference(
    seed: int, rng: random.Random, allowed: int, apply: bool, ooo: int
) -> None:
    gap = 30_000
    # Out of order by up to 5 s; a job bound of 1 s makes some clicks late.
    records = inputs.clicks(seed, out_of_orderness=5_000, allowed_lateness=allowed)
    function: Apply | Aggregation = (
        Apply(_clicks_result)
        if apply
        else Aggregation(
            (0, ()),
            lambda acc, v: (acc[0] + 1, (*acc[1], v)),
            result=lambda acc: (acc[0], tuple(sorted(acc[1]))),
            merge=lambda a, b: (a[0] + b[0], (*a[1], *b[1])),
        )
    )
    process, on_timer = window_functions(Session(gap), allowed, function)
    at_end, flushed = drive([records], [process], on_timer, rng, ooo)
    ref = references.sessions(records, gap, ooo, allowed)

    def normal(results: dict[Any, Any]) -> dict[Any, Any]:
        # msgpack gives tuples back as tuples; the reference's values are tuples too.
        return {kw: (n, tuple(vs)) for kw, (n, vs) in results.items()}

    assert normal(references.final_results(flushed.main, merging=True)) == ref.results
    fired = normal(references.final_results(at_end.main, merging=True))
    assert {kw: r for kw, r in fired.items() if kw in ref.certainly_fired()} == (
        ref.certainly_fired()
    )
    assert _late_set(flushed.late) == _ref_late(ref.late)
    assert flushed.state_left == 0, "a session kept state or timers after its cleanup"
    # A session's result is an update iff an earlier result of the key overlapped it
    # (the same session, or one it absorbed).
    emitted: list[tuple[str, TimeWindow]] = []
    for o in flushed.main:
        window = TimeWindow(o["start"], o["end"])
        earlier = any(k == o["key"] and w.overlaps(window) for k, w in emitted)
        assert o["update"] is earlier, o
        emitted.append((o["key"], window))


# -- joins against the references ------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    rng=st.randoms(use_true_random=False),
    bounds=st.sampled_from([(0, 60_000), (10_000, 20_000), (-5_000, 30_000)]),
)
def test_interval_join_matches_the_reference(
    seed: int, rng: random.Random, bounds: tuple[int, int]
) -> None:
    lower, upper = bounds
    ooo = 5_000
    orders, payments = inputs.orders_and_payments(
        seed, lower_ms=max(lower, 0), upper_ms=upper, out_of_orderness=ooo
    )
    left, right, on_timer = interval_join_functions(lower, upper)
    at_end, flushed = drive([orders, payments], [left, right], on_timer, rng, ooo)
    ref = references.interval_join(orders, payments, lower, upper, ooo)
    emitted = Counter((o["key"], o["left"], o["right"], o["timestamp"]) for o in at_end.main)
    assert set(emitted) == ref.pairs
    assert all(n == 1 for n in emitted.values()), "a pair emitted twice"
    assert flushed.main == at_end.main  # a join emits on arrival, never at a flush
    late = Counter((d["side"], d["timestamp"], d["key"], d["value"]) for d in flushed.late)
    assert late == Counter(
        [("left", ts, k, v) for _, ts, k, v in ref.late_left]
        + [("right", ts, k, v) for _, ts, k, v in ref.late_right]
    )
    # Buffers are dropped once the watermark passes their bound: nothing is kept for ever.
    assert ctx_empty_after(orders, payments, left, right, on_timer)


def ctx_empty_after(
    orders: list[Record], payments: list[Record], left: Fn, right: Fn, on_timer: TimerFn
) -> bool:
    """Run in order and flush: every buffer entry and timer is gone."""
    ctx = MemoryContext()
    out = Outputs()
    for side, records in ((0, orders), (1, payments)):
        tops: dict[int, int] = {}
        for p, ts, key, value in records:
            stamp = tops[p] - 5_000 if p in tops else MIN_WATERMARK
            tops[p] = max(ts, tops.get(p, ts))
            ctx.key_bytes, ctx.timestamp, ctx.partition_watermark = _key(key), ts, stamp
            _collect(out, (left, right)[side](key, value, ctx))
    while (timer := ctx.timer_queue.pop_due(FLUSH)) is not None:
        ctx.key_bytes = timer.key
        _collect(out, on_timer(timer.key.decode(), timer.timestamp, ctx))
    return not any(ctx.maps.values()) and len(ctx.timer_queue) == 0


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), rng=st.randoms(use_true_random=False))
def test_enrichment_matches_the_reference(seed: int, rng: random.Random) -> None:
    ooo = 2_000
    table, visits = inputs.profiles_and_visits(seed, out_of_orderness=ooo)
    stream_fn, table_fn, on_timer = enrichment_functions()
    at_end, flushed = drive([visits, table], [stream_fn, table_fn], on_timer, rng, ooo)
    ref = references.enrichment(visits, table, ooo)
    rows = Counter((o["key"], o["value"], o["table"], o["timestamp"]) for o in flushed.main)
    assert set(rows) == ref.rows
    assert all(n == 1 for n in rows.values()), "a row emitted twice"
    late = Counter((d["side"], d["timestamp"], d["key"], d["value"]) for d in flushed.late)
    assert late == Counter(
        [("stream", ts, k, v) for _, ts, k, v in ref.late_stream]
        + [("table", ts, k, v) for _, ts, k, v in ref.late_table]
    )
    # A row is out once the watermark passed its timestamp, not before.
    final = min(
        max(ts for p2, ts, _, _ in side if p2 == p) - ooo
        for side in (visits, table)
        for p in {r[0] for r in side}
    )
    assert {r for r in rows if r[3] < final} <= {
        (o["key"], o["value"], o["table"], o["timestamp"]) for o in at_end.main
    }
    assert all(o["timestamp"] < final for o in at_end.main)


# -- by hand ------------------------------------------------------------------


def _feed(ctx: MemoryContext, fn: Fn, key: str, ts: int, stamp: int, value: Any = "v") -> list[Any]:
    ctx.key_bytes, ctx.timestamp, ctx.partition_watermark = _key(key), ts, stamp
    return list(fn(key, value, ctx) or ())


def _fire(ctx: MemoryContext, on_timer: TimerFn, watermark: int) -> list[Any]:
    ctx.watermark = watermark
    out: list[Any] = []
    while (timer := ctx.timer_queue.pop_due(watermark)) is not None:
        ctx.key_bytes, ctx.timestamp = timer.key, timer.timestamp
        out.extend(on_timer(timer.key.decode(), timer.timestamp, ctx) or ())
    return out


def test_a_window_fires_at_its_end_updates_while_allowed_and_is_cleaned_after() -> None:
    process, on_timer = window_functions(Tumbling(10), 5, counting())
    ctx = MemoryContext()
    assert _feed(ctx, process, "a", 3, 0) == []
    assert _feed(ctx, process, "a", 7, 0) == []
    assert _fire(ctx, on_timer, 9) == []
    assert _fire(ctx, on_timer, 10) == [
        {"key": "a", "start": 0, "end": 10, "value": 2, "update": False}
    ]
    # Behind its partition (stamp 12) by 4 <= 5: allowed, an update at once.
    assert _feed(ctx, process, "a", 8, 12) == [
        {"key": "a", "start": 0, "end": 10, "value": 3, "update": True}
    ]
    assert _fire(ctx, on_timer, 15) == []
    assert ctx.maps[("windows", b"a")] == {}
    (late,) = _feed(ctx, process, "a", 6, 12)
    assert late == Tagged(
        LATE, {"key": "a", "timestamp": 6, "value": "v", "reason": late.value["reason"]}
    )
    assert "too late" in late.value["reason"]


def test_an_allowed_record_first_in_a_fired_window_emits_it_and_has_it_cleaned() -> None:
    process, on_timer = window_functions(Tumbling(10), 5, counting())
    ctx = MemoryContext()
    _feed(ctx, process, "a", 3, 0)
    assert len(_fire(ctx, on_timer, 10)) == 1
    # Key b had nothing in [0, 10), which fired: its first result is not an update.
    assert _feed(ctx, process, "b", 8, 12) == [
        {"key": "b", "start": 0, "end": 10, "value": 1, "update": False}
    ]
    assert _fire(ctx, on_timer, 15) == []
    assert not any(ctx.maps.values())
    assert len(ctx.timer_queue) == 0


def test_a_record_for_a_cleaned_window_goes_to_late_output_whole() -> None:
    # Only after an idle partition resumed: on time at its partition, behind the watermark.
    process, _on_timer = window_functions(Sliding(10, 5), 0, counting())
    ctx = MemoryContext()
    ctx.watermark = 12  # [0, 10) cleaned, [5, 15) open: the record goes into neither
    (out,) = _feed(ctx, process, "a", 7, 7)
    assert isinstance(out, Tagged)
    assert out.tag == LATE
    assert "cleaned" in out.value["reason"]
    assert not ctx.maps.get(("windows", b"a"))
    assert len(ctx.timer_queue) == 0


def test_merging_sessions_moves_their_timers_and_keeps_a_shared_one() -> None:
    process, on_timer = window_functions(Session(10), 15, counting())
    ctx = MemoryContext()
    _feed(ctx, process, "a", 0, 0)  # [0, 10): result at 10, cleanup at 25
    _feed(ctx, process, "a", 15, 0)  # [15, 25): result at 25 (shared), cleanup at 40
    assert {t.timestamp for t in ctx.timer_queue} == {10, 25, 40}
    _feed(ctx, process, "a", 2, 0)  # [2, 12) merges [0, 10) into [0, 12): 12, 27
    # 10 is moved to 12; 25 stays, [15, 25) still needs it.
    assert {t.timestamp for t in ctx.timer_queue} == {12, 25, 27, 40}
    assert _fire(ctx, on_timer, 25) == [
        {"key": "a", "start": 0, "end": 12, "value": 2, "update": False},
        {"key": "a", "start": 15, "end": 25, "value": 1, "update": False},
    ]


def test_a_fired_session_merged_by_an_allowed_record_emits_again_as_an_update() -> None:
    process, on_timer = window_functions(Session(10), 20, counting())
    ctx = MemoryContext()
    _feed(ctx, process, "a", 0, 0)
    assert _fire(ctx, on_timer, 10) == [
        {"key": "a", "start": 0, "end": 10, "value": 1, "update": False}
    ]
    # Allowed (stamp 20, lateness 20); [5, 15) overlaps the fired [0, 10): [0, 15) is
    # already past the watermark, so it is emitted at once.
    ctx.watermark = 16
    assert _feed(ctx, process, "a", 5, 20) == [
        {"key": "a", "start": 0, "end": 15, "value": 2, "update": True}
    ]


def test_the_interval_join_emits_each_pair_once_whichever_side_comes_first() -> None:
    left, right, on_timer = interval_join_functions(2, 3)
    ctx = MemoryContext()
    assert _feed(ctx, left, "k", 10, 0, "L") == []
    assert _feed(ctx, right, "k", 13, 0, "R1") == [
        {"key": "k", "left": "L", "right": "R1", "timestamp": 13}
    ]
    assert _feed(ctx, right, "k", 14, 0, "R2") == []  # 14 > 10 + 3
    assert _feed(ctx, left, "k", 12, 0, "L2") == [
        {"key": "k", "left": "L2", "right": "R1", "timestamp": 13},
        {"key": "k", "left": "L2", "right": "R2", "timestamp": 14},
    ]
    _fire(ctx, on_timer, 14)  # left 10 is dropped at 10 + 3 + 1
    assert _feed(ctx, right, "k", 9, 14, "R3")[0].tag == LATE


def test_enrichment_takes_the_latest_version_at_or_before_the_record() -> None:
    stream, table, on_timer = enrichment_functions()
    ctx = MemoryContext()
    _feed(ctx, table, "u", 5, 0, "gold")
    _feed(ctx, table, "u", 6, 0, "bronze")
    _feed(ctx, stream, "u", 7, 0, "visit")
    # At watermark 7 a version at 7 may still come: the visit waits.
    assert _fire(ctx, on_timer, 7) == []
    _feed(ctx, table, "u", 7, 7, "silver")  # same timestamp: counts (<= t)
    _feed(ctx, table, "u", 8, 7, None)  # a tombstone after: does not count
    assert _fire(ctx, on_timer, 8) == [
        {"key": "u", "value": "visit", "table": "silver", "timestamp": 7}
    ]
    _feed(ctx, stream, "u", 9, 8, "visit2")
    assert _fire(ctx, on_timer, 10) == [
        {"key": "u", "value": "visit2", "table": None, "timestamp": 9}
    ]
    # Versions below the watermark but the newest were pruned.
    assert [SERDE.loads(e) for e in ctx.maps[("enrich.versions", b"u")]] == [8]


# -- the job API ------------------------------------------------------------------


def _keyed(job: Job, topic: str) -> Any:
    return job.source(KafkaSource(topic, timestamps="kafka")).key_by(lambda v: v)


def test_window_builds_a_process_node_with_a_timer_callback() -> None:
    job = Job("w")
    out = _keyed(job, "in").window(tumbling(1_000), allowed_lateness_ms=10).count()
    out.sink(KafkaSink("counts"))
    out.side_output(LATE).sink(KafkaSink("late"))
    node = job.stages[1].root.children[0]
    assert node.kind == "process"
    assert node.on_timer is not None
    job.validate()


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda k: k.window(session(5)).aggregate(0, lambda a, v: a + 1), "merge"),
        (lambda k: k.window(tumbling(5), allowed_lateness_ms=-1).count(), ">= 0"),
        (lambda k: k.window(3).count(), "tumbling"),
        (lambda k: k.window(sliding(5, 0)).count(), "slide"),
    ],
)
def test_window_refusals(build: Callable[[Any], Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        build(_keyed(Job("w"), "in"))


def test_interval_join_and_enrich_build_co_processes() -> None:
    job = Job("j")
    pairs = _keyed(job, "orders").interval_join(_keyed(job, "payments"), 0, 60_000)
    assert pairs._node.kind == "co_process"
    assert pairs._node.on_timer is not None
    with pytest.raises(ConfigurationError, match="lower_ms \\+ upper_ms"):
        _keyed(job, "a").interval_join(_keyed(job, "b"), -10, 5)
    job2 = Job("e")
    rows = _keyed(job2, "visits").enrich(_keyed(job2, "profiles"), compacted=False)
    assert rows._node.kind == "co_process"
    assert job2.tables == {"profiles": False}


def test_enrich_needs_its_table_straight_from_a_source() -> None:
    job = Job("e")
    derived = _keyed(job, "raw").process(lambda k, v, c: [v]).key_by(lambda v: v)
    with pytest.raises(ConfigurationError, match="straight from a source"):
        _keyed(job, "visits").enrich(derived)


def test_assigner_spellings() -> None:
    assert tumbling(5) == Tumbling(5)
    assert sliding(5, 1) == Sliding(5, 1)
    assert session(5) == Session(5)
    assert isinstance(tumbling(5), Assigner)
