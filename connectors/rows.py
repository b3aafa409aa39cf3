"""Results as rows of a table's declared columns: what the table sinks share."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kstream.errors import RecordError

__all__ = ["as_row"]


def as_row(
    table: str,
    columns: Sequence[str],
    required: Sequence[bool],
    value: Any,
    required_word: str = "NOT NULL",
) -> Sequence[Any]:
    """The row of `columns` for result `value` (a tuple or list in column order, or a
    mapping by column), checked against `required` (per column: None refused).

    Raises `RecordError` (the job's error policy takes it) for a result that cannot
    be a row, naming `table` and the column; `required_word` is how the table's
    kind says a column refuses None ("NOT NULL", "required").
    """
    # The common case first, at C speed: a tuple of the right length without None.
    if type(value) is tuple and len(value) == len(columns) and None not in value:
        return value
    if isinstance(value, Mapping):
        missing = [c for c in columns if c not in value]
        if missing:
            raise RecordError(f"{table}: result has no column {', '.join(missing)}")
        row: Sequence[Any] = tuple(value[c] for c in columns)
    elif isinstance(value, tuple | list):
        if len(value) != len(columns):
            raise RecordError(
                f"{table}: result has {len(value)} fields, the sink writes "
                f"{len(columns)} columns ({', '.join(columns)})"
            )
        row = value
    else:
        raise RecordError(
            f"{table}: a result must be a tuple or a mapping of "
            f"{', '.join(columns)}, not {type(value).__name__}"
        )
    for column, v, needed in zip(columns, row, required, strict=True):
        if v is None and needed:
            raise RecordError(f"{table}: column {column} is {required_word}, the result has None")
    return row
