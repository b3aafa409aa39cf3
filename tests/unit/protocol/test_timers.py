"""Timers: firing order against a brute-force model, and the RocksDB key encoding."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kstream.dataflow.state.timers import (
    Timer,
    TimerDomain,
    TimerQueue,
    TimerService,
    decode_timer_key,
    encode_timer_key,
)
from kstream.errors import TimestampError

int64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
timers = st.builds(Timer, int64, st.binary(max_size=6))
domains = st.sampled_from(TimerDomain)


# -- encoding -----------------------------------------------------------------


@settings(deadline=None)
@given(domain=domains, timer=timers)
def test_encoding_round_trips(domain: TimerDomain, timer: Timer) -> None:
    assert decode_timer_key(encode_timer_key(domain, timer)) == (domain, timer)


@settings(deadline=None)
@given(domain=domains, a=timers, b=timers)
def test_byte_order_is_firing_order(domain: TimerDomain, a: Timer, b: Timer) -> None:
    """What a RocksDB prefix scan yields is (timestamp, key) order, negative timestamps too."""
    ka, kb = encode_timer_key(domain, a), encode_timer_key(domain, b)
    assert (ka < kb) == (a < b)
    assert (ka == kb) == (a == b)


def test_event_timers_sort_before_processing_timers_whatever_their_time() -> None:
    late_event = encode_timer_key(TimerDomain.EVENT, Timer(2**62, b"k"))
    early_processing = encode_timer_key(TimerDomain.PROCESSING, Timer(-(2**62), b"k"))
    assert late_event < early_processing


@pytest.mark.parametrize("ts", [2**63, -(2**63) - 1, 1.0, True, None])
def test_timestamps_outside_64_bits_or_not_integers_are_refused(ts: object) -> None:
    with pytest.raises(TimestampError, match="timer's timestamp"):
        encode_timer_key(TimerDomain.EVENT, Timer(ts, b"k"))  # type: ignore[arg-type]
    with pytest.raises(TimestampError, match="timer's timestamp"):
        TimerQueue().register(Timer(ts, b"k"))  # type: ignore[arg-type]


@pytest.mark.parametrize("key", [b"", b"e\x00", b"x" + bytes(8)])
def test_keys_that_are_not_timer_keys_are_refused(key: bytes) -> None:
    with pytest.raises(TimestampError, match="not a timer key"):
        decode_timer_key(key)


# -- the queue against a set ---------------------------------------------------

small_timers = st.builds(Timer, st.integers(-20, 20), st.sampled_from([b"", b"a", b"ab", b"b"]))
operations = st.lists(
    st.one_of(
        st.tuples(st.just("register"), small_timers),
        st.tuples(st.just("delete"), small_timers),
        st.tuples(st.just("advance"), st.integers(-25, 25)),
    ),
    max_size=60,
)


@settings(deadline=None)
@given(ops=operations)
def test_queue_behaves_as_a_set_fired_in_order(ops: list[tuple[str, object]]) -> None:
    queue, model = TimerQueue(), set[Timer]()
    for op, arg in ops:
        if op == "register":
            assert isinstance(arg, Timer)
            assert queue.register(arg) == (arg not in model)
            model.add(arg)
        elif op == "delete":
            assert isinstance(arg, Timer)
            assert queue.delete(arg) == (arg in model)
            model.discard(arg)
        else:
            assert isinstance(arg, int)
            due = sorted(t for t in model if t.timestamp <= arg)
            assert queue.advance(arg) == due
            model -= set(due)
        assert list(queue) == sorted(model)
        assert len(queue) == len(model)
        assert queue.peek() == (min(model) if model else None)


def test_a_timer_registered_while_firing_fires_in_the_same_advance_in_order() -> None:
    queue = TimerQueue([Timer(5, b"b"), Timer(9, b"a")])
    fired = []
    while (timer := queue.pop_due(10)) is not None:
        fired.append(timer)
        if timer == Timer(5, b"b"):
            queue.register(Timer(7, b"z"))  # due already: fires before 9
            queue.register(Timer(11, b"z"))  # not due yet
    assert fired == [Timer(5, b"b"), Timer(7, b"z"), Timer(9, b"a")]
    assert list(queue) == [Timer(11, b"z")]


def test_ties_fire_by_key_bytes() -> None:
    queue = TimerQueue()
    for key in (b"b", b"a\xff", b"a", b"\x00"):
        queue.register(Timer(3, key))
    assert [t.key for t in queue.advance(3)] == [b"\x00", b"a", b"a\xff", b"b"]


@settings(deadline=None)
@given(
    event=st.lists(small_timers, max_size=10),
    processing=st.lists(small_timers, max_size=10),
)
def test_service_stores_and_loads_both_domains(event: list[Timer], processing: list[Timer]) -> None:
    service = TimerService()
    for t in event:
        service.event.register(t)
    for t in processing:
        service.processing.register(t)
    stored = list(service.stored())
    assert [k for k, _ in stored] == sorted(k for k, _ in stored)
    loaded = TimerService.load(k for k, _ in stored)
    assert list(loaded.event) == sorted(set(event))
    assert list(loaded.processing) == sorted(set(processing))
