"""`kstream.dataflow.serde`: each named serde, and what bad input becomes."""

from __future__ import annotations

import pickle
from datetime import date
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kstream.dataflow.serde import BYTES, JSON, PICKLE, STR, DecodeError, Serde, serde
from kstream.errors import ConfigurationError, KStreamError, RecordError

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@pytest.mark.parametrize(("name", "expected"), [("bytes", BYTES), ("str", STR), ("json", JSON)])
def test_a_serde_is_found_by_name(name: str, expected: Serde) -> None:
    assert serde(name) is expected
    assert expected.name == name


def test_the_pickle_serde_is_found_by_name() -> None:
    assert serde("pickle") is PICKLE


def test_a_serde_object_is_used_as_it_is() -> None:
    class Upper:
        name = "upper"

        def dumps(self, value: Any) -> bytes | None:
            return str(value).upper().encode()

        def loads(self, data: bytes | None) -> Any:
            return data

    mine = Upper()
    assert serde(mine) is mine


def test_an_unknown_serde_name_lists_the_known_ones() -> None:
    with pytest.raises(ConfigurationError) as caught:
        serde("xml")
    assert str(caught.value) == "unknown serde 'xml'; choose one of bytes, str, json, pickle"


@pytest.mark.parametrize(
    ("s", "value"), [(BYTES, b"x"), (STR, "x"), (JSON, {"x": [1]}), (PICKLE, ("x", 1))]
)
def test_every_serde_survives_pickling(s: Serde, value: object) -> None:
    # Serdes travel with the job description to worker processes.
    copy = pickle.loads(pickle.dumps(s))
    assert copy.name == s.name
    assert copy.loads(s.dumps(value)) == value


def test_a_decode_error_is_a_record_error_under_the_one_root() -> None:
    # The error policy (dead letter, skip, fail) handles exactly the record errors.
    assert issubclass(DecodeError, RecordError)
    assert issubclass(DecodeError, KStreamError)


# -- bytes --------------------------------------------------------------------------


def test_bytes_pass_unchanged() -> None:
    assert BYTES.dumps(b"\x00\xff") == b"\x00\xff"
    assert BYTES.loads(b"\x00\xff") == b"\x00\xff"
    assert BYTES.dumps(None) is None
    assert BYTES.loads(None) is None


@pytest.mark.parametrize(("value", "kind"), [("text", "str"), (3, "int"), ([b"a"], "list")])
def test_the_bytes_serde_refuses_anything_but_bytes(value: object, kind: str) -> None:
    with pytest.raises(RecordError) as caught:
        BYTES.dumps(value)
    assert str(caught.value) == f"bytes serde got {kind}, expected bytes"


# -- str ------------------------------------------------------------------------------


def test_str_is_utf8_and_other_values_are_their_text() -> None:
    assert STR.dumps("grüße") == "grüße".encode()
    assert STR.dumps(42) == b"42"
    assert STR.dumps(2.5) == b"2.5"
    assert STR.dumps(Decimal("1.50")) == b"1.50"
    assert STR.dumps(date(2026, 1, 2)) == b"2026-01-02"
    assert STR.dumps(b"raw") == b"raw"
    assert STR.dumps(None) is None
    assert STR.loads(None) is None


@pytest.mark.parametrize(
    ("value", "advice"),
    [
        ({"a": 1}, 'give the sink value_serde="json"'),
        (("a", 1, 2), 'give the sink value_serde="json"'),
        ([1], 'give the sink value_serde="json"'),
        ({1, 2}, "turn it into text in the job"),
        (object(), "turn it into text in the job"),
    ],
)
def test_str_refuses_values_whose_text_would_be_their_repr(value: object, advice: str) -> None:
    with pytest.raises(RecordError) as caught:
        STR.dumps(value)
    message = str(caught.value)
    assert message.startswith(
        f"the str serde cannot write a value of type {type(value).__name__} as text"
    )
    assert advice in message


def test_str_refuses_bytes_that_are_not_utf8() -> None:
    with pytest.raises(DecodeError, match=r"^not UTF-8: 'utf-8' codec can't decode byte 0xff"):
        STR.loads(b"ok\xff")


@given(st.text())
def test_str_round_trips_any_text(text: str) -> None:
    assert STR.loads(STR.dumps(text)) == text


# -- json -----------------------------------------------------------------------------


def test_json_is_compact() -> None:
    assert JSON.dumps({"a": [1, 2]}) == b'{"a":[1,2]}'
    assert JSON.loads(None) is None


@pytest.mark.parametrize("data", [b"{", b"not json", b"\xff\xfe{}", b""])
def test_json_refuses_what_is_not_json(data: bytes) -> None:
    with pytest.raises(DecodeError, match=r"^not JSON: "):
        JSON.loads(data)


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ({1, 2}, "Object of type set is not JSON serializable"),
        ({"k": b"raw"}, "Object of type bytes is not JSON serializable"),
        (float("nan"), "Out of range float values are not JSON compliant"),
        ([1, float("inf")], "Out of range float values are not JSON compliant"),
        ({(1, 2): "tuple key"}, "keys must be str, int, float, bool or None"),
    ],
)
def test_json_refuses_what_json_cannot_hold_as_a_record_error(value: Any, why: str) -> None:
    with pytest.raises(
        RecordError, match=rf"^cannot encode {type(value).__name__} as JSON: .*{why}"
    ):
        JSON.dumps(value)


@given(json_values)
def test_json_round_trips_json_values(value: Any) -> None:
    assert JSON.loads(JSON.dumps(value)) == value


# -- pickle ---------------------------------------------------------------------------


@given(st.one_of(json_values, st.tuples(st.integers(), st.binary()), st.frozensets(st.text())))
def test_pickle_round_trips_python_values(value: Any) -> None:
    assert PICKLE.loads(PICKLE.dumps(value)) == value


def test_pickle_keeps_none_as_no_value() -> None:
    assert PICKLE.loads(None) is None
