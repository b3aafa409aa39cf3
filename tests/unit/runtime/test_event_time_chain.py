"""Event time and timers in a compiled chain, driven without Kafka: the element
context, ``ctx.timers``, firing order, outputs' stamps, timers kept in RocksDB
across a checkpoint, and the planner's refusals."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kstream import ConfigurationError, Job, KafkaSink, KafkaSource
from kstream.dataflow.graph import Node
from kstream.dataflow.state.api import KeyedContext
from kstream.dataflow.state.serde import state_serde
from kstream.dataflow.state.timers import TimerDomain
from kstream.errors import StateValueError, TimestampError
from kstream.protocol.watermarks import MIN_WATERMARK
from kstream.runtime.state.element import ElementContext
from kstream.runtime.state.store import StateStore
from kstream.runtime.worker.chain import TimerOperator, compile_chain, fire_due

#: Sums are emitted per key at each multiple of this (ms).
N = 10


def key_of(value: tuple[str, int, int]) -> str:
    return value[0]


def add(key: str, value: tuple[str, int, int], ctx: KeyedContext) -> None:
    """Sum the value into the bucket ending at the next multiple of N; a timer there."""
    ts = ctx.timestamp
    assert ts is not None
    end = (ts // N + 1) * N
    sums = ctx.map("sums")
    sums.put(end, sums.get(end, 0) + value[2])
    ctx.timers.register(end)


def emit(key: str, ts: int, ctx: KeyedContext) -> Iterator[tuple[str, int, int, int]]:
    sums = ctx.map("sums")
    yield (key, ts, sums.get(ts), ctx.watermark)
    sums.remove(ts)


def timed_job(on_timer: Any = emit) -> Job:
    j = Job("et")
    (
        j.source(KafkaSource("in", timestamps=lambda v: v[1]))
        .key_by(key_of)
        .process(add, on_timer=on_timer, name="sum")
        .sink(KafkaSink("out"))
    )
    return j


class Outputs:
    """The sink's values, each with the element context's timestamp and stamp when written."""

    def __init__(self, element: ElementContext) -> None:
        self.element = element
        self.got: list[tuple[Any, int | None, int]] = []

    def open(self, node: Node) -> Any:
        def write(value: Any) -> None:
            self.got.append((value, self.element.timestamp, self.element.stamp))

        return write


class Harness:
    """Stage 1 of `timed_job` on `store`: push stamped records, move the watermark."""

    def __init__(self, store: StateStore, job: Job | None = None) -> None:
        self.job = job or timed_job()
        self.element = ElementContext(timed=True)
        self.out = Outputs(self.element)
        self.ops: list[TimerOperator] = []
        self.push = compile_chain(
            self.job.stages[1].root,
            stage_index=1,
            state=store,
            open_sink=self.out.open,
            open_edge=self.out.open,
            element=self.element,
            timer_operators=self.ops,
        )
        self.errors: list[tuple[Exception, Any, int]] = []

    def record(self, key: str, ts: int, v: int, stamp: int = MIN_WATERMARK) -> None:
        self.element.timestamp, self.element.stamp = ts, stamp
        self.push(key, (key, ts, v))

    def advance(self, watermark: int) -> int:
        self.element.watermark = watermark
        return fire_due(
            self.ops, TimerDomain.EVENT, watermark, lambda e, k, t: self.errors.append((e, k, t))
        )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    s = StateStore(tmp_path / "db")
    yield s
    s.close()


def test_timers_fire_in_timestamp_then_key_order_once_the_watermark_reaches_them(
    store: StateStore,
) -> None:
    h = Harness(store)
    h.record("b", 3, 1)
    h.record("a", 5, 2)
    h.record("a", 12, 4)
    h.record("b", 9, 8)
    assert h.advance(9) == 0  # a timer at 10 is due at W >= 10, not before
    assert h.out.got == []
    assert h.advance(10) == 2
    # Outputs of a timer carry its time as timestamp and stamp.
    assert h.out.got == [(("a", 10, 2, 10), 10, 10), (("b", 10, 9, 10), 10, 10)]
    h.out.got.clear()
    assert h.advance(10) == 0  # fired timers are gone
    assert h.advance(25) == 1
    assert h.out.got == [(("a", 20, 4, 25), 20, 20)]


def test_outputs_of_records_inherit_the_records_stamp(store: StateStore) -> None:
    j = Job("et")
    (
        j.source(KafkaSource("in", timestamps="kafka"))
        .key_by(key_of)
        .process(lambda k, v, ctx: [(ctx.timestamp, ctx.partition_watermark)], name="p")
        .sink(KafkaSink("out"))
    )
    h = Harness(store, j)
    h.record("a", 7, 0, stamp=3)
    assert h.out.got == [((7, 3), 7, 3)]


def test_timers_survive_a_checkpoint_and_fire_after_restore(
    store: StateStore, tmp_path: Path
) -> None:
    h = Harness(store)
    h.record("a", 1, 5)
    h.record("b", 14, 7)
    h.advance(10)  # a's timer fires, b's at 20 is pending
    store.checkpoint(tmp_path / "chk")
    h.record("c", 2, 1)  # after the snapshot: must not survive a restore
    StateStore.restore(tmp_path / "chk", tmp_path / "restored")
    restored = StateStore(tmp_path / "restored")
    try:
        again = Harness(restored)
        assert len(again.ops[0].timers) == 1
        again.element.watermark = 10
        assert again.advance(30) == 1
        assert again.out.got == [(("b", 20, 7, 30), 20, 20)]
    finally:
        restored.close()


def test_a_timer_registered_at_or_below_the_watermark_fires_in_the_same_advance(
    store: StateStore,
) -> None:
    def chain(key: str, ts: int, ctx: KeyedContext) -> Iterator[int]:
        yield ts
        if ts < 30:
            ctx.timers.register(ts + N)  # already due while W is 40

    h = Harness(store, timed_job(chain))
    h.record("a", 0, 1)
    assert h.advance(40) == 3
    assert [v for v, _, _ in h.out.got] == [10, 20, 30]


def test_deleted_timers_do_not_fire(store: StateStore) -> None:
    def maybe(key: str, value: tuple[str, int, int], ctx: KeyedContext) -> None:
        ctx.timers.register(100)
        if value[2] < 0:
            ctx.timers.delete(100)

    j = Job("et")
    (
        j.source(KafkaSource("in", timestamps=lambda v: v[1]))
        .key_by(key_of)
        .process(maybe, on_timer=lambda k, ts, ctx: [k], name="m")
        .sink(KafkaSink("out"))
    )
    h = Harness(store, j)
    h.record("a", 1, 1)
    h.record("b", 1, 1)
    h.record("b", 2, -1)
    h.advance(100)
    assert [v for v, _, _ in h.out.got] == ["a"]


def test_an_error_in_on_timer_goes_to_the_handler_and_the_next_timer_fires(
    store: StateStore,
) -> None:
    def boom(key: str, ts: int, ctx: KeyedContext) -> Iterator[str]:
        if key == "a":
            raise ValueError("no")
        yield key

    h = Harness(store, timed_job(boom))
    h.record("a", 1, 1)
    h.record("b", 1, 1)
    h.advance(10)
    assert [(str(e), k, t) for e, k, t in h.errors] == [("no", "a", 10)]
    assert [v for v, _, _ in h.out.got] == ["b"]


def test_a_timer_outside_64_bits_is_a_timestamp_error(store: StateStore) -> None:
    def far(key: str, value: Any, ctx: KeyedContext) -> None:
        ctx.timers.register(2**63)

    j = Job("et")
    j.source(KafkaSource("in", timestamps="kafka")).key_by(key_of).process(
        far, on_timer=emit, name="f"
    ).sink(KafkaSink("out"))
    with pytest.raises(TimestampError):
        Harness(store, j).record("a", 1, 1)


def test_event_time_timers_need_timestamps_and_on_timer(store: StateStore) -> None:
    untimed = Job("u")
    untimed.source(KafkaSource("in")).key_by(key_of).process(
        lambda k, v, ctx: ctx.timers.register(5), name="p"
    ).sink(KafkaSink("out"))
    element = ElementContext(timed=False)
    push = compile_chain(
        untimed.stages[1].root,
        stage_index=1,
        state=store,
        open_sink=Outputs(element).open,
        open_edge=Outputs(element).open,
        element=element,
    )
    with pytest.raises(ConfigurationError, match="needs a stream with timestamps"):
        push("a", ("a", 1, 1))
    no_on_timer = Job("n")
    no_on_timer.source(KafkaSource("in", timestamps="kafka")).key_by(key_of).process(
        add, name="p"
    ).sink(KafkaSink("out"))
    with pytest.raises(ConfigurationError, match="needs an on_timer"):
        Harness(store, no_on_timer).record("a", 1, 1)


def test_the_planner_refuses_on_timer_without_timestamps_and_mixed_inputs() -> None:
    j = Job("u")
    j.source(KafkaSource("in")).key_by(key_of).process(add, on_timer=emit).sink(KafkaSink("o"))
    with pytest.raises(ConfigurationError, match="has on_timer, but its stream has no timestamps"):
        j.validate()
    mixed = Job("m")
    a = mixed.source(KafkaSource("a", timestamps="kafka")).key_by(key_of)
    b = mixed.source(KafkaSource("b")).key_by(key_of)
    a.union(b).process(add).sink(KafkaSink("o"))
    with pytest.raises(ConfigurationError, match="with and without timestamps"):
        mixed.validate()
    ok = timed_job()
    ok.validate()
    assert [s.timed for s in ok.stages] == [True, True]


def test_the_state_name_timers_is_reserved(store: StateStore) -> None:
    with pytest.raises(ConfigurationError, match="reserved"):
        store.context("s1.p").map("timers")


def test_kafka_source_refuses_bad_timestamps_and_durations() -> None:
    with pytest.raises(ConfigurationError, match="timestamps must be"):
        KafkaSource("in", timestamps="wall")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="idle_timeout"):
        KafkaSource("in", timestamps="kafka", idle_timeout_ms=-1)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from("abc"), st.integers(0, 99), st.integers(-5, 5)),
        max_size=40,
    ),
    st.lists(st.integers(0, 120), max_size=6),
)
def test_each_bucket_is_emitted_once_with_its_sum_whatever_the_watermark_steps(
    tmp_path_factory: pytest.TempPathFactory,
    records: list[tuple[str, int, int]],
    steps: list[int],
) -> None:
    """Records always ahead of the watermark (as on-time records are): every bucket
    fires exactly once, after the watermark reaches it, with the reference sum."""
    store = StateStore(tmp_path_factory.mktemp("db") / "db")
    try:
        h = Harness(store)
        w = 0
        marks = iter(sorted(steps))
        expected: dict[tuple[str, int], int] = {}
        for key, ts, v in records:
            at = w + ts  # never behind the watermark
            h.record(key, at, v)
            end = (at // N + 1) * N
            expected[key, end] = expected.get((key, end), 0) + v
            w = max(w, next(marks, w))
            h.advance(w)
        h.advance(10**6)
        got = [(k, t, s) for (k, t, s, _), _, _ in h.out.got]
        assert sorted((k, t) for k, t, _ in got) == sorted(expected)
        assert {(k, t): s for k, t, s in got} == expected
        assert all(wm >= t for (_, t, _, wm), _, _ in h.out.got)
    finally:
        store.close()


def test_plan_shows_which_stages_have_event_time_and_where_timestamps_come_from() -> None:
    from kstream.dataflow.describe import describe
    from kstream.dataflow.plan import plan

    text = describe(plan(timed_job(), 1))
    assert text[1] == "stage 0 (parallelism 1, event time)"
    assert text[2].endswith(
        "timestamps timed_job.<locals>.<lambda> (out of order 5000 ms, idle after 10000 ms, "
        "future 86400000 ms)"
    )
    assert "  process sum (add, on_timer emit)" in text


def test_processing_time_timers_fire_by_the_clock_even_on_a_stream_without_timestamps(
    store: StateStore,
) -> None:
    def later(key: str, value: Any, ctx: KeyedContext) -> None:
        assert ctx.timestamp is None
        ctx.timers.register_processing(1_000 + len(key))
        if key == "gone":
            ctx.timers.delete_processing(1_000 + len(key))

    j = Job("pt")
    j.source(KafkaSource("in")).key_by(key_of).process(
        later, on_timer=lambda k, ts, ctx: [(k, ts)], name="p"
    ).sink(KafkaSink("out"))
    element = ElementContext(timed=False)
    out, ops = Outputs(element), []
    push = compile_chain(
        j.stages[1].root,
        stage_index=1,
        state=store,
        open_sink=out.open,
        open_edge=out.open,
        element=element,
        timer_operators=ops,
    )
    for key in ("bb", "a", "gone"):
        push(key, (key, 0, 0))
    assert fire_due(ops, TimerDomain.EVENT, 10**9, _raise) == 0  # another domain
    assert fire_due(ops, TimerDomain.PROCESSING, 1_001, _raise) == 1
    assert fire_due(ops, TimerDomain.PROCESSING, 1_010, _raise) == 1
    assert [v for v, _, _ in out.got] == [("a", 1_001), ("bb", 1_002)]


def _raise(exc: Exception, key: Any, ts: int) -> None:
    raise exc


class Opaque:
    """A key pickle can route but msgpack cannot store."""

    def __repr__(self) -> str:
        return "Opaque()"


def test_a_timer_key_the_state_serde_cannot_store_fails_the_flush_naming_it(
    tmp_path: Path,
) -> None:
    # Keys of other types are refused before (`key_bytes`); bytes are a valid key
    # that the JSON state serde cannot hold.
    j = Job("et", state_serde="json")
    j.source(KafkaSource("in", timestamps="kafka")).key_by(key_of).process(
        lambda k, v, ctx: ctx.timers.register(5), on_timer=emit, name="sum"
    ).sink(KafkaSink("out"))
    store = StateStore(tmp_path / "db", state_serde("json"))
    try:
        h = Harness(store, j)
        h.element.timestamp = 1
        h.push(b"\x00", ("x", 1, 1))
        with pytest.raises(StateValueError, match=r"the key b'\\x00' of a timer of s1.sum"):
            store.flush()
    finally:
        store.close()


def test_a_co_process_on_timer_serves_the_timers_of_both_sides(store: StateStore) -> None:
    from kstream.runtime.worker.chain import input_pushes

    def side(name: str) -> Any:
        def fn(key: str, value: Any, ctx: KeyedContext) -> None:
            ctx.map("seen").put(name, ctx.timestamp)
            ctx.timers.register(50)

        return fn

    def both(key: str, ts: int, ctx: KeyedContext) -> Iterator[tuple[str, list[Any]]]:
        yield key, sorted(ctx.map("seen").items())

    j = Job("co")
    a = j.source(KafkaSource("a", timestamps="kafka")).key_by(key_of)
    b = j.source(KafkaSource("b", timestamps="kafka")).key_by(key_of)
    a.connect(b).process(side("a"), side("b"), on_timer=both, name="co").sink(KafkaSink("o"))
    j.validate()
    element = ElementContext(timed=True)
    out, ops = Outputs(element), []
    push = compile_chain(
        j.stages[2].root,
        stage_index=2,
        state=store,
        open_sink=out.open,
        open_edge=out.open,
        element=element,
        timer_operators=ops,
    )
    on_a, on_b = input_pushes(j.stages[2], push)
    element.timestamp = 3
    on_a("k", ("k", 3, 0))
    element.timestamp = 4
    on_b("k", ("k", 4, 0))
    assert fire_due(ops, TimerDomain.EVENT, 50, _raise) == 1  # one timer: (k, 50)
    assert [v for v, _, _ in out.got] == [("k", [("a", 3), ("b", 4)])]
