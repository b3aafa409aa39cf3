"""`kstream.connectors.arrow_rows`: rows as Arrow, the rows Arrow refuses singled out
by a search in halves of the columns that fail."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pytest

from kstream.connectors.arrow_rows import misfits, to_arrow

SCHEMA = pa.schema([("word", pa.string()), ("count", pa.int64())])


def test_rows_that_fit_convert_whole() -> None:
    data, refused = to_arrow("t", SCHEMA, [("a", 1), ("b", 2)])
    assert refused == []
    assert data.schema == SCHEMA
    assert data.to_pylist() == [{"word": "a", "count": 1}, {"word": "b", "count": 2}]
    empty, none = to_arrow("t", SCHEMA, [])
    assert (empty.num_rows, empty.schema, none) == (0, SCHEMA, [])


def test_each_refused_row_is_left_out_once_with_its_first_column_s_reason() -> None:
    rows = [("a", 1), ("b", "x"), (7, 2**70), ("c", 3), (8, 4)]
    data, refused = to_arrow("db.t", SCHEMA, rows, ["text", "bigint"])
    assert data.to_pylist() == [{"word": "a", "count": 1}, {"word": "c", "count": 3}]
    assert [r.row for r in refused] == [("b", "x"), (7, 2**70), (8, 4)]
    why = [r.why for r in refused]
    assert why[0].startswith("db.t refused row ('b', 'x'): column count (bigint): Could not "), why
    # A row refused by two columns is named by the first.
    assert why[1].startswith(f"db.t refused row (7, {2**70}): column word (text): "), why
    assert why[2].startswith("db.t refused row (8, 4): column word (text): "), why
    assert all("\n" not in w for w in why)
    # Without the table's own type names, a column's kind is its Arrow type.
    _, plain = to_arrow("db.t", SCHEMA, [("b", "x")])
    assert ": column count (int64): " in plain[0].why


def test_the_search_converts_only_the_halves_that_fail() -> None:
    calls: list[int] = []

    def converts(values: Sequence[Any]) -> str | None:
        calls.append(len(values))
        return "no" if "bad" in values else None

    values: list[Any] = ["ok"] * 1024
    values[300] = values[901] = "bad"
    assert misfits(values, converts, "no") == [(300, "no"), (901, "no")]
    # Not the whole again (the caller tried it), then two paths of halves down to a
    # single value, 10 levels: at most 2 * 2 * 10 calls, not one per value.
    assert 1024 not in calls
    assert len(calls) <= 40, len(calls)
    assert misfits(["bad"], converts, "alone") == [(0, "alone")]


def test_values_that_fail_only_together_are_not_misfits() -> None:
    def converts(values: Sequence[Any]) -> str | None:
        return "x beside y" if "x" in values and "y" in values else None

    assert misfits(["a", "x", "b", "y"], converts, "x beside y") == []


def test_the_columns_that_convert_are_cut_around_the_refused_rows() -> None:
    schema = pa.schema([("n", pa.int64()), ("m", pa.int8()), ("s", pa.string())])
    rows = [(i, i % 100, f"s{i}") for i in range(5_000)]
    bad = {17: (17, 300, "s17"), 18: (18, 1, 18), 2_500: ("x", 0, "s"), 4_999: (1, 1, b"\xff")}
    for i, row in bad.items():
        rows[i] = row
    data, refused = to_arrow("t", schema, rows)
    assert [r.row for r in refused] == list(bad.values())
    kept = [r for i, r in enumerate(rows) if i not in bad]
    assert data.to_pylist() == [{"n": n, "m": m, "s": s} for n, m, s in kept]


@pytest.mark.parametrize("rows", [[("a", "n/a")], [("a", "n/a"), ("b", "1")]])
def test_a_batch_of_only_refused_rows_leaves_an_empty_table(rows: list[tuple[Any, ...]]) -> None:
    data, refused = to_arrow("t", SCHEMA, rows)
    assert data.num_rows == 0
    assert data.schema == SCHEMA
    assert [r.row for r in refused] == rows


def test_a_number_with_a_fraction_is_refused_where_arrow_would_drop_it() -> None:
    import datetime as dt
    from decimal import Decimal
    from fractions import Fraction

    import numpy as np

    schema = pa.schema(
        [
            ("n", pa.int32()),
            ("at", pa.timestamp("us")),
            ("x", pa.float64()),
            ("ns", pa.list_(pa.int64())),
            ("s", pa.struct([("k", pa.int8())])),
        ]
    )
    ok = (2.0, dt.datetime(2026, 1, 1), 1.5, [1, 3.0], {"k": 1})
    rows = [
        ok,
        (1.5, 0, 0.0, [], {"k": 1}),
        (np.float32(2.5), 0, 0.0, [], {"k": 1}),
        (Decimal("7.25"), 0, 0.0, [], {"k": 1}),
        (Fraction(1, 3), 0, 0.0, [], {"k": 1}),
        (1, 1.5, 0.0, [], {"k": 1}),
        (1, 0, 0.0, [2, 0.5], {"k": 1}),
        (1, 0, 0.0, [], {"k": 0.25}),
        (np.int64(4), 3.0, 2, [], None),
    ]
    data, refused = to_arrow("t", schema, rows)
    # Whole numbers of any kind fit; a float column keeps its fraction.
    assert data.column("n").to_pylist() == [2, 4]
    assert data.column("x").to_pylist() == [1.5, 2.0]
    assert data.column("ns").to_pylist() == [[1, 3], []]
    assert [r.row for r in refused] == rows[1:8]
    whys = [r.why for r in refused]
    assert ": column n (int32): 1.5 is not a whole number" in whys[0], whys
    assert "2.5) is not a whole number" in whys[1], whys
    assert "Decimal('7.25')" in whys[2], whys
    assert ": column at (timestamp[us]): 1.5 " in whys[4], whys
    assert ": column ns (list<item: int64>): 0.5 " in whys[5], whys
    assert ": column s (struct<k: int8>): 0.25 " in whys[6], whys
    assert all("\n" not in w for w in whys)


def test_whole_names_only_fractions_arrow_would_drop_silently() -> None:
    from kstream.connectors.arrow_rows import whole

    assert whole([*range(10_000), None, True], pa.int64()) is None
    assert whole([1.5, "a"], pa.string()) is None  # Arrow itself refuses what does not fit
    assert whole([float("nan"), float("inf")], pa.int64()) is None  # so does Arrow here
    assert whole([[[1], [2, 2.5]]], pa.list_(pa.list_(pa.int16()))) == 2.5
    pair = pa.struct([("a", pa.string()), ("b", pa.int64())])
    assert whole([("x", 1), ("y", 0.5)], pair) == 0.5  # a struct given by position
    assert whole([{"b": 1}, ("y", 2)], pair) is None
    scores = pa.map_(pa.string(), pa.int64())
    assert whole([{"a": 1}, [("b", 2), ("c", 3.5)]], scores) == 3.5
    assert whole([{1.5: "x"}], pa.map_(pa.int32(), pa.string())) == 1.5
    assert whole([{"a": 1}, [("b", 2)]], scores) is None
