"""Rows as Arrow columns, with the rows Arrow refuses singled out: what the sinks
that write Parquet files (Delta Lake, Iceberg) share.

A value that does not fit its column's type (text in a 64-bit integer column, an
integer past 64 bits) is its row's fault, not its batch's: `to_arrow` converts each
column whole, searches only a column that fails for the values that fail alone
(`misfits`, by halves), and returns the other rows as an Arrow table with a
`Refusal` per row left out, which the sink hands to the job's error policy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from kstream.errors import DatabaseError

__all__ = ["CONVERSION_ERRORS", "Refusal", "misfits", "to_arrow"]

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
    rows Arrow refuses, which come second, oldest first, each as `Refusal` with
    ``<table> refused row <row>: column <name> (<kind>): <Arrow's message>``; a
    column's kind is its entry in `kinds` (the table's own type names), else its
    Arrow type.

    Each column converts whole first; only a column that fails is searched for its
    refused values, by halves, so a batch without misfits costs one conversion per
    column. Raises `DatabaseError` (one line) if rows fail together but none fails
    alone: nothing is left out without a reason.
    """
    names = kinds if kinds is not None else [str(f.type) for f in schema]
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in schema]
    arrays: list[pa.Array] = []
    why: dict[int, str] = {}
    failed: str | None = None
    for values, f, kind in zip(columns, schema, names, strict=True):
        try:
            arrays.append(pa.array(list(values), type=f.type))
        except CONVERSION_ERRORS as exc:
            failed = failed or first_line(exc)
            for at, message in misfits(values, _converter(f.type)):
                why.setdefault(at, f"column {f.name} ({kind}): {message}")
    if failed is None:
        return pa.Table.from_arrays(arrays, schema=schema), []
    if not why:
        raise DatabaseError(f"{table}: {len(rows)} rows do not fit the table's types: {failed}")
    kept = [r for i, r in enumerate(rows) if i not in why]
    refused = [
        Refusal(rows[i], f"{table} refused row {tuple(rows[i])!r}: {why[i]}") for i in sorted(why)
    ]
    # The rest converts now unless its values failed only beside the refused ones.
    data, more = to_arrow(table, schema, kept, kinds)
    return data, refused + more


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
    values: Sequence[Any], converts: Callable[[Sequence[Any]], str | None]
) -> list[tuple[int, str]]:
    """The positions of the `values` that fail alone, ascending, each with the message
    of `converts` (None: the values it is given convert; else why not, one line).

    Halves that convert are dropped whole, so few misfits cost a few conversions of
    the column, not one per value. Values that fail only together are not found.
    """
    out: list[tuple[int, str]] = []
    spans = [(0, len(values))]
    while spans:
        lo, hi = spans.pop()
        message = converts(values[lo:hi])
        if message is None:
            continue
        if hi - lo == 1:
            out.append((lo, message))
        else:
            mid = (lo + hi) // 2
            spans += [(mid, hi), (lo, mid)]
    return sorted(out)
