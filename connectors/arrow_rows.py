"""Rows as Arrow columns, with the rows Arrow refuses singled out: what the sinks
that write Parquet files (Delta Lake, Iceberg) share.

A value that does not fit its column's type (text in a 64-bit integer column, an
integer past 64 bits) is its row's fault, not its batch's: `to_arrow` converts each
column whole, searches only a column that fails for the values that fail alone
(`misfits`, by halves), and returns the other rows as an Arrow table with a
`Refusal` per row left out, which the sink hands to the job's error policy.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import pyarrow as pa

from kstream.errors import DatabaseError

__all__ = ["CONVERSION_ERRORS", "Refusal", "misfits", "to_arrow"]

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
                arrays[j] = pa.array(column, type=f.type)
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


def _converter(t: pa.DataType) -> Callable[[Sequence[Any]], str | None]:
    """The test `misfits` searches with for Arrow type `t`."""

    def converts(values: Sequence[Any]) -> str | None:
        """None if `values` convert to `t`; otherwise Arrow's message, one line."""
        try:
            pa.array(list(values), type=t)
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
