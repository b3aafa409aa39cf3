"""The Delta Lake sink's view of its table: declared columns as Arrow and Delta types,
results as rows, batches of rows as Arrow (the rows Arrow refuses singled out), the
statistics of a written file, and the check of an existing table's schema against
the declared columns."""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from kstream.connectors.arrow_rows import Refusal, to_arrow
from kstream.connectors.rows import as_row
from kstream.errors import ConfigurationError

__all__ = ["DELTA_TYPES", "Columns", "file_stats", "schema_mismatch"]

#: The Delta primitive types a column may be declared as, with the Arrow type written.
DELTA_TYPES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "long": pa.int64(),
    "integer": pa.int32(),
    "short": pa.int16(),
    "byte": pa.int8(),
    "double": pa.float64(),
    "float": pa.float32(),
    "boolean": pa.bool_(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
}
#: Strings longer than this get no min/max statistics (Delta truncates longer ones;
#: omitting them is always correct, a wrong bound would hide rows from readers).
STATS_STRING_CHARS = 32


@dataclass(frozen=True, slots=True)
class Columns:
    """The declared columns (name, Delta type) of a table, and which refuse None."""

    table: str
    names: tuple[str, ...]
    types: tuple[str, ...]
    not_null: tuple[bool, ...]

    @property
    def arrow_schema(self) -> pa.Schema:
        return pa.schema(
            [
                pa.field(n, DELTA_TYPES[t], nullable=not nn)
                for n, t, nn in zip(self.names, self.types, self.not_null, strict=True)
            ]
        )

    def row(self, value: Any) -> Sequence[Any]:
        """The row for result `value` (`kstream.connectors.rows.as_row`)."""
        return as_row(self.table, self.names, self.not_null, value)

    def arrow(self, rows: Sequence[Sequence[Any]]) -> tuple[pa.Table, list[Refusal]]:
        """`rows` as an Arrow table, without the rows Arrow refuses (a value that does
        not fit its column's type), which come second, each with why in one line
        naming the table, the row, the column with its Delta type and Arrow's message
        (`kstream.connectors.arrow_rows.to_arrow`)."""
        return to_arrow(f"Delta table {self.table}", self.arrow_schema, rows, self.types)


def _stat(value: Any) -> Any:
    """A min/max value as Delta's JSON statistics write it (None: leave it out)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return value if len(value) <= STATS_STRING_CHARS else None
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return value.isoformat()
    return None


def file_stats(table: pa.Table) -> str:
    """Delta's statistics of a file holding `table`: ``numRecords``, ``nullCount`` per
    column, and ``minValues``/``maxValues`` where they are exact (numbers without NaN,
    dates, short strings)."""
    nulls: dict[str, int] = {}
    lows: dict[str, Any] = {}
    highs: dict[str, Any] = {}
    for name in table.column_names:
        column = table.column(name)
        nulls[name] = column.null_count
        t = column.type
        if not (
            pa.types.is_integer(t)
            or pa.types.is_floating(t)
            or pa.types.is_string(t)
            or pa.types.is_date32(t)
        ):
            continue
        if pa.types.is_floating(t) and pc.any(pc.is_nan(column)).as_py():
            continue
        mm = pc.min_max(column).as_py()
        low, high = _stat(mm["min"]), _stat(mm["max"])
        if low is not None and high is not None:
            lows[name], highs[name] = low, high
    return json.dumps(
        {"numRecords": table.num_rows, "minValues": lows, "maxValues": highs, "nullCount": nulls},
        separators=(",", ":"),
    )


def schema_mismatch(
    table: str, declared: Sequence[tuple[str, str]], existing: Sequence[tuple[str, str, bool]]
) -> str | None:
    """Why a table of columns `existing` (name, Delta type, nullable) cannot take the
    `declared` columns (name, Delta type), in one line; None if it can.

    Refused: a declared column the table lacks, one of another type, and a table
    column the sink does not write that is NOT NULL.
    """
    have = {n: (t, nullable) for n, t, nullable in existing}
    for name, typ in declared:
        if name not in have:
            cols = ", ".join(f"{n} {t}" for n, t, _ in existing)
            return f"Delta table {table} has no column {name!r} (it has {cols})"
        if have[name][0] != typ:
            return (
                f"Delta table {table}: column {name!r} is {have[name][0]}, the sink declares {typ}"
            )
    names = {n for n, _ in declared}
    for name, _typ, nullable in existing:
        if name not in names and not nullable:
            return (
                f"Delta table {table}: column {name!r} is NOT NULL and the sink does not write it"
            )
    return None


def check_types(table: str, declared: Sequence[tuple[str, str]]) -> None:
    """`ConfigurationError` (one line) for a declared type Delta's primitives lack."""
    for name, typ in declared:
        if typ not in DELTA_TYPES:
            raise ConfigurationError(
                f"DeltaSink({table!r}): column {name!r} has type {typ!r}, not one of "
                f"{', '.join(DELTA_TYPES)}"
            )
