"""Rows as Arrow columns, with the rows Arrow refuses singled out: what the sinks
that write Parquet files (Delta Lake, Iceberg) share.

A value that does not fit its column's type (text in a 64-bit integer column, an
integer past 64 bits) is its row's fault, not its batch's: `to_arrow` converts each
column whole, searches only a column that fails for the values that fail alone
(`misfits`, by halves), and returns the other rows as an Arrow table with a
`Refusal` per row left out, which the sink hands to the job's error policy.

Arrow converts a number with a fraction (1.5, as a float, a NumPy float, a
`Decimal`) to an integer, date, time, timestamp or duration column by dropping
the fraction, without a word. That would write a value the job never produced,
so such a number is refused here like any value that does not fit (`whole`).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import pyarrow as pa

from kstream.errors import DatabaseError

__all__ = ["CONVERSION_ERRORS", "Refusal", "misfits", "to_arrow", "whole"]

_T = TypeVar("_T")

#: What Arrow raises for a value that does not fit a type.
CONVERSION_ERRORS = (pa.ArrowException, TypeError, ValueError, OverflowError)


@dataclass(frozen=True, slots=True)
class Refusal:
    """A row Arrow refused, and why in one line (the table, the row, the column and
    Arrow's message)."""

    row: Sequence[Any]
    why: str


def first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def to_arrow(
    table: str,
    schema: pa.Schema,
    rows: Sequence[Sequence[Any]],
    kinds: Sequence[str] | None = None,
) -> tuple[pa.Table, list[Refusal]]:
    """`rows` (in `schema`'s column order) as an Arrow table of `schema`, without the
    rows Arrow refuses, which come second, in the order of `rows`, each as `Refusal`
    with ``<table> refused row <row>: column <name> (<kind>): <Arrow's message>``
    (a row refused by several columns is named by the first); a column's kind is
    its entry in `kinds` (the table's own type names), else its Arrow type.

    Each column converts whole first; only a column that fails is searched for its
    refused values, by halves (`misfits`), and converted again without the
    refused rows; the columns that converted are sliced around them. So a batch
    without misfits costs one conversion per column. Raises `DatabaseError` (one
    line) if rows fail together but none fails alone: nothing is left out without
    a reason.
    """
    kinds = kinds if kinds is not None else [str(f.type) for f in schema]
    values: list[list[Any] | None] = (
        [list(c) for c in zip(*rows, strict=True)] if rows else [[] for _ in schema]
    )
    arrays: list[pa.Array | pa.ChunkedArray | None] = [None] * len(schema)
    at = list(range(len(rows)))  # each row's position in `rows`
    why: dict[int, str] = {}  # by position in `rows`: the refused rows
    while True:
        failed: str | None = None
        found: dict[int, str] = {}  # by position in `at`: this round's refusals
        for j, f in enumerate(schema):
            column = values[j]
            if column is None:
                continue
            try:
                arrays[j] = _array(column, f.type)
                values[j] = None
            except CONVERSION_ERRORS as exc:
                failed = failed or first_line(exc)
                for i, message in misfits(column, _converter(f.type), first_line(exc)):
                    found.setdefault(i, f"column {f.name} ({kinds[j]}): {message}")
        if failed is None:
            break
        if not found:
            raise DatabaseError(f"{table}: {len(at)} rows do not fit the table's types: {failed}")
        why.update((at[i], message) for i, message in found.items())
        runs = _runs(len(at), found)
        at = _kept(at, runs)
        arrays = [None if a is None else _cut(a, runs) for a in arrays]
        values = [None if c is None else _kept(c, runs) for c in values]
    refused = [
        Refusal(rows[i], f"{table} refused row {tuple(rows[i])!r}: {why[i]}") for i in sorted(why)
    ]
    return pa.Table.from_arrays(arrays, schema=schema), refused


def _runs(n: int, left_out: Collection[int]) -> list[tuple[int, int]]:
    """The spans [lo, hi) of range(n) without the positions in `left_out`."""
    runs: list[tuple[int, int]] = []
    lo = 0
    for i in sorted(left_out):
        if i > lo:
            runs.append((lo, i))
        lo = i + 1
    if lo < n:
        runs.append((lo, n))
    return runs


def _kept(items: list[_T], runs: Sequence[tuple[int, int]]) -> list[_T]:
    """The `items` in `runs`."""
    return [x for lo, hi in runs for x in items[lo:hi]]


def _cut(a: pa.Array | pa.ChunkedArray, runs: Sequence[tuple[int, int]]) -> pa.ChunkedArray:
    """`a` with only the values in `runs`, as slices of it (no copy): cheaper than
    converting the Python values again. (`pa.array` gives a chunked array for
    values past an array's capacity, so `a` may be one.)"""
    parts = [a.slice(lo, hi - lo) for lo, hi in runs]
    chunks = [c for p in parts for c in (p.chunks if isinstance(p, pa.ChunkedArray) else [p])]
    return pa.chunked_array(chunks, type=a.type)


def _array(values: list[Any], t: pa.DataType) -> pa.Array | pa.ChunkedArray:
    """`values` as an Arrow array of type `t`; raises `ValueError` (one line) for a
    number whose fraction the conversion would drop (`whole`)."""
    dropped = whole(values, t)
    if dropped is not None:
        raise ValueError(
            f"{dropped!r} is not a whole number: converting it to {t} would drop its fraction"
        )
    return pa.array(values, type=t)


def _drops_fractions(t: pa.DataType) -> bool:
    """Whether Arrow converts a number to `t` by dropping its fraction."""
    return bool(pa.types.is_integer(t) or pa.types.is_temporal(t))


def whole(values: Sequence[Any], t: pa.DataType) -> Any | None:
    """The first number among `values` (or inside them, for list, map and struct types)
    that has a fraction where `t` holds only whole numbers (integers, dates, times,
    timestamps, durations); None if there is none.

    Only values that are not Python ints are looked at: a column of ints costs one
    pass in C to find that out. NaN and infinities are not returned: Arrow
    refuses them itself.
    """
    if _drops_fractions(t):
        if set(map(type, values)) <= _WHOLE:
            return None
        for v in values:
            if type(v) not in _WHOLE and isinstance(v, numbers.Number) and _has_fraction(v):
                return v
        return None
    if _is_list(t):
        if not _nests(t.value_type):
            return None
        lists = [v for v in values if isinstance(v, Sequence) and not isinstance(v, str | bytes)]
        return whole([x for v in lists for x in v], t.value_type)
    if pa.types.is_map(t):
        pairs = [kv for v in values for kv in _pairs(v)]
        for i, part in enumerate((t.key_type, t.item_type)):
            if _nests(part):
                dropped = whole([kv[i] for kv in pairs], part)
                if dropped is not None:
                    return dropped
        return None
    if pa.types.is_struct(t):
        for i, field in enumerate(t):
            if _nests(field.type):
                # Arrow takes a struct as a mapping or as a tuple, by position.
                inner = [
                    v.get(field.name) if isinstance(v, Mapping) else v[i]
                    for v in values
                    if isinstance(v, Mapping) or (isinstance(v, tuple) and len(v) > i)
                ]
                dropped = whole(inner, field.type)
                if dropped is not None:
                    return dropped
    return None


def _pairs(value: Any) -> list[tuple[Any, Any]]:
    """A map value's (key, item) pairs, as Arrow takes them: a mapping, or pairs."""
    if isinstance(value, Mapping):
        return list(value.items())
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [tuple(kv) for kv in value if isinstance(kv, Sequence) and len(kv) == 2]
    return []


def _is_list(t: pa.DataType) -> bool:
    """Whether `t` is one of Arrow's list types."""
    return bool(pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t))


def _nests(t: pa.DataType) -> bool:
    """Whether `t` is, or holds, a type that drops fractions."""
    if _drops_fractions(t):
        return True
    if _is_list(t):
        return _nests(t.value_type)
    if pa.types.is_map(t):
        return _nests(t.key_type) or _nests(t.item_type)
    if pa.types.is_struct(t):
        return any(_nests(f.type) for f in t)
    return False


def _has_fraction(v: Any) -> bool:
    """Whether number `v` (a NumPy float, a `Decimal`, a `Fraction` too) is not whole."""
    try:
        return bool(v != int(v))
    except (ValueError, OverflowError, TypeError):
        return False  # NaN, infinities: Arrow refuses them with its own message


#: Types whose values are whole (or absent) as they are.
_WHOLE: frozenset[type] = frozenset({int, bool, type(None)})


def _converter(t: pa.DataType) -> Callable[[Sequence[Any]], str | None]:
    """The test `misfits` searches with for Arrow type `t`."""

    def converts(values: Sequence[Any]) -> str | None:
        """None if `values` convert to `t`; otherwise Arrow's message, one line."""
        try:
            _array(list(values), t)
        except CONVERSION_ERRORS as exc:
            return first_line(exc)
        return None

    return converts


def misfits(
    values: Sequence[Any], converts: Callable[[Sequence[Any]], str | None], why: str
) -> list[tuple[int, str]]:
    """The positions of the `values` that fail alone, ascending, each with the message
    of `converts` (None: the values it is given convert; else why not, one line).

    `values` are known to fail together, with `why` (the caller's conversion of
    them all): the search starts from their halves, and halves that convert are
    dropped whole, so k misfits among n values cost about 2·k·log2(n) conversions
    of parts, not one per value. Values that fail only together are not found.
    """
    out: list[tuple[int, str]] = []
    spans: list[tuple[int, int, str | None]] = [(0, len(values), why)]
    while spans:
        lo, hi, known = spans.pop()
        message = known if known is not None else converts(values[lo:hi])
        if message is None:
            continue
        if hi - lo == 1:
            out.append((lo, message))
        else:
            mid = (lo + hi) // 2
            spans += [(mid, hi, None), (lo, mid, None)]
    return sorted(out)
