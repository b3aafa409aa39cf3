"""Which rows of a refused batch the table refuses: bisection under savepoints.

The writer sends each batch under a savepoint. When the server refuses it for a
row's sake (`refuses_rows`: a constraint or a value of the wrong type), the
savepoint is rolled back and the batch is split in two halves, sent in order,
each under its own savepoint, recursively, down to the single rows the table
refuses; every other row is written, in its order. k refused rows among n cost
about 2·k·log2(n) statements, and nothing when no row is refused.

Pure: `isolate` takes the sending as a function, so the splitting is unit-tested
apart from PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["ROW_SQLSTATE_CLASSES", "Isolated", "isolate", "refuses_rows"]

#: SQLSTATE classes of errors a row causes by itself: 22 data exception (a value
#: the column's type cannot hold), 23 integrity constraint violation (CHECK, NOT
#: NULL, UNIQUE, FOREIGN KEY, EXCLUSION). Any other error (a lost connection, a
#: deadlock, a permission) is not the row's and fails the epoch.
ROW_SQLSTATE_CLASSES = ("22", "23")

R = TypeVar("R")
E = TypeVar("E")


def refuses_rows(sqlstate: str | None, *, client_data_error: bool = False) -> bool:
    """Whether an error with `sqlstate` is one a row of the batch may cause by itself.

    `client_data_error`: the error is psycopg's own ``DataError`` (no SQLSTATE: it
    could not send a value as its column's type, e.g. a str among the ints of a
    bigint column), which the row causes too.
    """
    if sqlstate is None:
        return client_data_error
    return sqlstate[:2] in ROW_SQLSTATE_CLASSES


@dataclass(frozen=True, slots=True)
class Isolated(Generic[R, E]):
    """What `isolate` found: the rows written, in order, and those refused with why."""

    accepted: tuple[R, ...]
    refused: tuple[tuple[R, E], ...]


def isolate(rows: Sequence[R], attempt: Callable[[Sequence[R]], E | None]) -> Isolated[R, E]:
    """Write `rows` by `attempt`, bisecting every refused part down to single rows.

    `attempt(part)` writes `part` whole and returns None, or writes none of it
    and returns the refusal (it must leave the transaction as it found it:
    rollback to its savepoint); it raises for an error that is not a row's.
    Parts are attempted left to right, so accepted rows are written in their
    order (which matters to upserts of the same key and to UNIQUE constraints:
    of two rows that clash, the later one is refused). A row refused alone is
    refused with the error of its own attempt.
    """
    accepted: list[R] = []
    refused: list[tuple[R, E]] = []
    todo: list[Sequence[R]] = [rows] if rows else []
    while todo:
        part = todo.pop()
        error = attempt(part)
        if error is None:
            accepted.extend(part)
        elif len(part) == 1:
            refused.append((part[0], error))
        else:
            mid = len(part) // 2
            todo.append(part[mid:])
            todo.append(part[:mid])
    return Isolated(tuple(accepted), tuple(refused))
