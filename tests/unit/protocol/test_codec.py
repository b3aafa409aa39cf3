"""`kstream.protocol.codec`: types survive exactly; hostile bytes are refused, never run."""

from __future__ import annotations

import math
import os
import pickle
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kstream.errors import DecodeError, UnsupportedTypeError
from kstream.protocol.codec import (
    EXT_RECORD,
    EXT_TUPLE,
    ITEMS,
    MAX_DEPTH,
    PAIRS,
    SAME_PAIRS,
    Codec,
    RecordType,
)

CODEC = Codec()

_hashable = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=6)
    | st.binary(max_size=6),
    lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3),
    max_leaves=6,
)
#: Every type the codec carries, nested; floats with nan and infinities.
values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**64, max_value=2**300)
    | st.integers(min_value=-(2**300), max_value=-(2**63) - 1)
    | st.floats()
    | st.text()
    | st.binary(),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(_hashable, inner, max_size=3)
        | st.sets(_hashable, max_size=3)
        | st.frozensets(_hashable, max_size=3)
    ),
    max_leaves=20,
)


def same(a: Any, b: Any) -> bool:
    """Equal, with the same type at every level (nan equals nan; sets by content)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or repr(a) == repr(b)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return len(a) == len(b) and all(
            any(same(k, k2) and same(v, b[k2]) for k2 in b) for k, v in a.items()
        )
    if isinstance(a, (set, frozenset)):
        return len(a) == len(b) and all(any(same(x, y) for y in b) for x in a)
    return bool(a == b)


@given(values)
def test_every_value_round_trips_with_its_types(value: Any) -> None:
    assert same(CODEC.loads(CODEC.dumps(value)), value)


@given(st.lists(values, max_size=8), st.booleans())
def test_batches_round_trip_in_every_shape(items: list[Any], keyed: bool) -> None:
    if keyed:
        items = [(x, x) if i % 3 else (i, x) for i, x in enumerate(items)]
    shape, data = CODEC.dumps_batch(items, keyed)
    assert same(CODEC.loads_batch(data, shape), items)


def test_the_common_batches_take_their_fast_shapes() -> None:
    words = ["the", "cat", "the"]
    assert CODEC.dumps_batch(words, False)[0] == ITEMS
    assert CODEC.dumps_batch([(w, w) for w in words], True)[0] == SAME_PAIRS
    assert CODEC.dumps_batch([(w, 1) for w in words], True)[0] == PAIRS
    # Values that are all pairs travel as pairs on a rebalance edge too.
    assert CODEC.dumps_batch([(w, 1) for w in words], False)[0] == PAIRS
    assert CODEC.dumps_batch([(1, 2), (3,)], False)[0] == ITEMS
    shape, data = CODEC.dumps_batch([("a", "a"), ("b", "b")], True)
    # Sent once, back as pairs.
    assert msgpack.unpackb(data) == ["a", "b"]
    assert CODEC.loads_batch(data, shape) == [("a", "a"), ("b", "b")]


def test_a_tuple_stays_a_tuple_and_a_list_a_list() -> None:
    value = [(1, [2, (3,)]), {"k": (), "l": []}, {1, 2}, frozenset({(1, 2)})]
    back = CODEC.loads(CODEC.dumps(value))
    assert back == value
    assert [type(back[0]), type(back[0][1]), type(back[0][1][1])] == [tuple, list, tuple]
    assert [type(back[1]["k"]), type(back[1]["l"])] == [tuple, list]
    assert [type(back[2]), type(back[3])] == [set, frozenset]


def test_big_ints_and_special_floats() -> None:
    for n in (2**64, -(2**63) - 1, 10**200, 2**64 - 1, -(2**63)):
        assert CODEC.loads(CODEC.dumps(n)) == n
    assert math.isnan(CODEC.loads(CODEC.dumps(float("nan"))))
    assert CODEC.loads(CODEC.dumps([float("inf"), float("-inf")])) == [math.inf, -math.inf]


@dataclass(frozen=True)
class Point:
    x: int
    y: int


POINT = RecordType(Point, lambda p: (p.x, p.y), lambda t: Point(*t), tag="point")


def test_an_undeclared_type_is_refused_naming_it() -> None:
    with pytest.raises(UnsupportedTypeError, match=r"test_codec\.Point") as caught:
        CODEC.dumps(["fine", (1, Point(1, 2))])
    assert isinstance(caught.value, TypeError)
    assert caught.value.type_name.endswith("test_codec.Point")


def test_a_declared_record_type_round_trips() -> None:
    codec = Codec([POINT])
    value = [Point(1, 2), (Point(3, 4), {"p": Point(5, 6)})]
    assert codec.loads(codec.dumps(value)) == value
    # A reader that did not declare it refuses it by its tag.
    with pytest.raises(DecodeError, match="record type 'point' is not declared by this job"):
        CODEC.loads(codec.dumps(Point(1, 2)))


def test_two_declared_types_may_not_share_a_tag() -> None:
    with pytest.raises(ValueError, match="same tag"):
        Codec([POINT, RecordType(tuple, tuple, tuple, tag="point")])


def test_canonical_sets_encode_equally_whatever_their_order() -> None:
    canonical = Codec(canonical=True)
    a, b = {"x", "y", "z", "w", 1}, set()
    for x in sorted(a, key=str, reverse=True):
        b.add(x)
    assert canonical.dumps(a) == canonical.dumps(b)


# -- hostile input ------------------------------------------------------------------------


def test_a_pickle_that_would_create_a_file_is_refused_and_never_runs(tmp_path: Path) -> None:
    target = tmp_path / "pwned"

    class Exploit:
        def __reduce__(self) -> tuple[Any, ...]:
            return (os.system, (f"touch {target}",))

    payload = pickle.dumps(Exploit())
    # Proof the payload is live: pickle itself runs it.
    pickle.loads(payload)
    assert target.exists()
    target.unlink()
    for data in (payload, pickle.dumps([Exploit()] * 3)):
        with pytest.raises(DecodeError, match="not a kstream-encoded"):
            CODEC.loads(data)
        with pytest.raises(DecodeError, match="not a kstream-encoded batch"):
            CODEC.loads_batch(data, ITEMS)
    assert not target.exists()


@given(values)
def test_every_truncation_is_refused_with_a_decode_error(value: Any) -> None:
    data = CODEC.dumps([value, "end"])
    for cut in range(len(data)):
        with pytest.raises(DecodeError):
            CODEC.loads(data[:cut])


@given(st.binary(max_size=200))
def test_garbage_is_a_value_or_a_decode_error(data: bytes) -> None:
    errors = []
    for decode in (CODEC.loads, lambda d: CODEC.loads_batch(d, PAIRS)):
        try:
            decode(data)
        except DecodeError as exc:
            errors.append(str(exc))
    assert all("\n" not in e and e.startswith("not a kstream-encoded") for e in errors)


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (msgpack.packb(msgpack.ExtType(99, b"x")), "unknown extension type 99"),
        (msgpack.packb(msgpack.ExtType(EXT_TUPLE, msgpack.packb(7))), "not a list"),
        (msgpack.packb(msgpack.ExtType(EXT_RECORD, msgpack.packb([1]))), "malformed"),
        (msgpack.packb({(1,): 2}, use_bin_type=True), "unhashable"),
        (msgpack.packb(msgpack.ExtType(4, b"9" * 6000)), "more than 5000 digits"),
        (msgpack.packb(msgpack.ExtType(4, b"nope")), "invalid literal"),
    ],
)
def test_malformed_extensions_are_refused_with_why(data: bytes, why: str) -> None:
    with pytest.raises(DecodeError, match=why):
        CODEC.loads(data)


def test_a_pairs_batch_of_odd_length_or_not_a_list_is_refused() -> None:
    with pytest.raises(DecodeError, match="odd number"):
        CODEC.loads_batch(msgpack.packb([1, 2, 3]), PAIRS)
    with pytest.raises(DecodeError, match="a dict, not a list"):
        CODEC.loads_batch(msgpack.packb({"a": 1}), ITEMS)


def _nested_tuples(levels: int) -> bytes:
    data = msgpack.packb([1])
    for _ in range(levels):
        # A tuple holding the tuple below.
        data = msgpack.packb(msgpack.ExtType(EXT_TUPLE, b"\x91" + data))
    return data


def test_deep_nesting_is_refused_in_process_instead_of_overflowing_the_c_stack() -> None:
    # Unbounded, 300 nested extension levels overflow CPython's C stack (a
    # segmentation fault: no exception to catch). A child process proves it.
    code = (
        "import msgpack\n"
        "def hook(code, data): return tuple(msgpack.unpackb(data, ext_hook=hook))\n"
        "data = msgpack.packb([1])\n"
        "for _ in range(300): data = msgpack.packb(msgpack.ExtType(1, data))\n"
        "msgpack.unpackb(data, ext_hook=hook)\n"
    )
    unbounded = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    assert unbounded.returncode < 0  # killed by a signal
    with pytest.raises(DecodeError, match=f"nested more than {MAX_DEPTH}"):
        CODEC.loads(_nested_tuples(300))
    assert CODEC.loads(_nested_tuples(MAX_DEPTH - 1)) is not None


def test_encoding_refuses_values_nested_beyond_the_bound() -> None:
    value: Any = 1
    for _ in range(MAX_DEPTH + 1):
        value = (value,)
    with pytest.raises(UnsupportedTypeError, match="nested more than"):
        CODEC.dumps(value)


def test_deep_native_nesting_is_refused() -> None:
    with pytest.raises(DecodeError):
        CODEC.loads(b"\x91" * 100_000 + b"\x01")


def test_a_codec_pickles_after_use_as_what_it_was_made_of() -> None:
    """Its packer pool is C objects; a used codec (a job's state serde, shipped to
    Spark executors) still pickles, and the copy encodes as the original."""

    codec = Codec(canonical=True)
    value = {"b": [1, 2.5, "x"], "a": None}
    first = codec.dumps(value)  # fills the pool
    copy = pickle.loads(pickle.dumps(codec))
    assert copy.dumps(value) == first
    assert copy.loads(first) == value
    assert pickle.loads(pickle.dumps(codec.dumps))(value) == first  # the bound method too
