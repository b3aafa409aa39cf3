"""`kstream.dataflow.state.serde`: round trips, determinism, and loading never running code."""

from __future__ import annotations

import contextlib
import pickle
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kstream.dataflow.job import Job
from kstream.dataflow.state.serde import (
    JSON,
    MSGPACK,
    STATE_SERDES,
    TRUSTED_PICKLE,
    StateSerde,
    state_serde,
)
from kstream.errors import ConfigurationError, DecodeError

HASHABLE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text() | st.binary(),
    lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3),
    max_leaves=8,
)
VALUES = st.recursive(
    HASHABLE | st.floats(allow_nan=False),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.sets(HASHABLE, max_size=4)
        | st.frozensets(HASHABLE, max_size=4)
        | st.dictionaries(HASHABLE, inner, max_size=4)
    ),
    max_leaves=20,
)
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.text()
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def same(a: Any, b: Any) -> bool:
    """Equal with the same types all the way down (True == 1 and (1,) != [1] matter here)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(v, b[k]) for k, v in a.items())
    return bool(a == b)


@given(VALUES)
def test_msgpack_round_trips_tuples_sets_and_big_ints_with_their_types(value: Any) -> None:
    assert same(MSGPACK.loads(MSGPACK.dumps(value)), value)


@given(JSON_VALUES)
def test_json_round_trips_json_values(value: Any) -> None:
    assert JSON.loads(JSON.dumps(value)) == value


@given(VALUES)
def test_trusted_pickle_round_trips(value: Any) -> None:
    assert same(TRUSTED_PICKLE.loads(TRUSTED_PICKLE.dumps(value)), value)


@given(st.lists(st.text(), max_size=8, unique=True), st.randoms())
def test_equal_sets_encode_equally_whatever_their_insertion_order(
    items: list[str], rnd: Any
) -> None:
    # Map entry keys are stored under their encoding: {a, b} built in two
    # orders must be one entry.
    shuffled = list(items)
    rnd.shuffle(shuffled)
    assert MSGPACK.dumps(frozenset(items)) == MSGPACK.dumps(frozenset(shuffled))
    assert MSGPACK.dumps(set(items)) == MSGPACK.dumps(set(shuffled))


def test_msgpack_refuses_what_it_cannot_store() -> None:
    with pytest.raises(TypeError, match="cannot store object"):
        MSGPACK.dumps(object())


def test_msgpack_loads_never_runs_pickled_code() -> None:
    # A pickle that would call a function on load is just bytes (or an error)
    # to msgpack: never an executed call.
    calls: list[object] = []
    evil = pickle.dumps(calls.append) + pickle.dumps((calls.append, ("ran",)))
    with contextlib.suppress(DecodeError):
        # Refusing is fine; returning plain data is fine; calling is not.
        assert not callable(MSGPACK.loads(evil))
    assert calls == []


def test_msgpack_refuses_unknown_extension_types() -> None:
    import msgpack

    with pytest.raises(DecodeError, match="unknown extension type 99"):
        MSGPACK.loads(msgpack.packb(msgpack.ExtType(99, b"x")))


def test_a_job_names_its_state_serde() -> None:
    assert Job("j").state_serde is MSGPACK
    assert Job("j", state_serde="json").state_serde is JSON
    assert Job("j", state_serde="trusted-pickle").state_serde is TRUSTED_PICKLE
    custom = StateSerde("mine", repr.__call__, bytes.decode)  # type: ignore[arg-type]
    assert Job("j", state_serde=custom).state_serde is custom
    assert sorted(STATE_SERDES) == ["json", "msgpack", "trusted-pickle"]


def test_an_unknown_state_serde_is_one_clear_line() -> None:
    with pytest.raises(ConfigurationError, match="unknown state serde 'pickle': choose one of"):
        Job("j", state_serde="pickle")
    with pytest.raises(ConfigurationError):
        state_serde("yaml")
