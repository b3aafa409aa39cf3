"""The Kafka sink's rows: the inlined per-output encoding equals the serdes' own.

`Encoder.row` inlines the `str` serde's common cases; whatever a job
emits, the row (what is produced, and what snapshots keep as the write-ahead
copy) must be exactly what the serdes make of it.
"""

from __future__ import annotations

from typing import Any, cast

import pytest
from confluent_kafka import Producer
from hypothesis import given
from hypothesis import strategies as st

from kstream.connectors.kafka import KafkaSink
from kstream.connectors.kafka.rows import Encoder
from kstream.dataflow.outputs import SinkContext
from kstream.dataflow.serde import JSON, STR, Serde, serde
from kstream.errors import RecordError, RecordTooLargeError

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text()
    | st.binary(max_size=8)
)
#: What a job may hand a Kafka sink: a pair (key, value), another tuple, or a bare value.
results = (
    st.tuples(scalars, scalars)
    | st.tuples(scalars)
    | st.tuples(scalars, scalars, scalars)
    | scalars
    | st.lists(scalars, max_size=3)
)


def _context(event_time: Any = None) -> SinkContext:
    producer = cast(Producer, None)  # never used: rows are made before any producer
    return SinkContext("nowhere:9092", "job", "s1.0", 1, producer, event_time=event_time)


def _expected(value: Any, key_serde: Serde, value_serde: Serde, ts: int) -> tuple[Any, ...]:
    """What the serdes make of `value`, written out the long way."""
    if isinstance(value, tuple) and len(value) == 2:
        key, val = value
        kdata = None if key is None else key_serde.dumps(key)
    else:
        kdata, val = None, value
    return (kdata, value_serde.dumps(val), None, ts)


@given(results)
def test_a_row_is_what_the_str_serdes_make_of_the_result(value: Any) -> None:
    row = Encoder(KafkaSink("out"), _context(), 1_000_000).row
    try:
        expected: Any = _expected(value, STR, STR, 0)
    except RecordError as refused:  # no text form (a tuple, a list): refused the same way
        expected = str(refused)
    if isinstance(expected, str):
        with pytest.raises(RecordError) as caught:
            row(value)
        assert str(caught.value) == expected
    else:
        assert row(value) == expected


@given(st.tuples(st.text() | st.integers(), st.integers() | st.text()))
def test_a_row_with_other_serdes_uses_them(value: tuple[Any, Any]) -> None:
    row = Encoder(KafkaSink("out", key_serde="json", value_serde="json"), _context(), 10**6).row
    assert row(value) == _expected(value, JSON, JSON, 0)


def test_a_subclass_of_the_str_serde_is_called_not_inlined() -> None:
    class Shouting(type(serde("str"))):  # type: ignore[misc]
        def dumps(self, value: Any) -> bytes | None:
            return str(value).upper().encode()

    row = Encoder(KafkaSink("out", value_serde=Shouting()), _context(), 10**6).row
    assert row(("k", "v")) == (b"k", b"V", None, 0)
    assert row(("k", 7)) == (b"k", b"7", None, 0)


def test_a_row_carries_the_event_time_as_its_timestamp() -> None:
    times = iter([17, None])
    row = Encoder(KafkaSink("out"), _context(lambda: next(times)), 10**6).row
    assert row(("w", 1)) == (b"w", b"1", None, 17)
    assert row(("w", 2)) == (b"w", b"2", None, 0)


@pytest.mark.parametrize("value", [("k", "x" * 2000), "x" * 2000, ("k" * 2000, 1)])
def test_a_row_larger_than_the_limit_is_refused(value: Any) -> None:
    row = Encoder(KafkaSink("out"), _context(), 1500).row
    with pytest.raises(RecordTooLargeError, match="at most 1500 bytes"):
        row(value)


def test_a_row_just_within_the_limit_passes() -> None:
    # A record's size counts its framing too (`record_bytes`): find the largest that fits.
    row = Encoder(KafkaSink("out"), _context(), 1500).row
    fits = [n for n in range(1300, 1500) if _fits(row, n)]
    assert fits
    assert fits == list(range(1300, max(fits) + 1))
    assert row(("k", "x" * max(fits)))[1] == b"x" * max(fits)


def _fits(row: Any, n: int) -> bool:
    try:
        row(("k", "x" * n))
    except RecordTooLargeError:
        return False
    return True
