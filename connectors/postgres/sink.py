"""`PostgresSink`: the description of a PostgreSQL table a job writes, exactly once."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kstream.connectors.postgres.schema import (
    Table,
    check_server,
    connect,
    describe,
    ensure_fence_table,
)
from kstream.connectors.postgres.writer import PostgresWriter
from kstream.dataflow.outputs import Sink, SinkContext, SinkWriter
from kstream.errors import ConfigurationError

__all__ = ["PostgresSink"]


@dataclass(frozen=True)
class PostgresSink(Sink[Any]):
    """Write results as rows of `table` (``"name"`` or ``"schema.name"``) at `url`.

    A result is a tuple (or list) of values in the order of `columns`, or a
    mapping by column name. With `key` (a subset of `columns` the table has a
    unique constraint on) rows are upserted (``ON CONFLICT (key) DO UPDATE``),
    else inserted.

    Exactly-once jobs write each checkpoint epoch in one PostgreSQL transaction,
    prepared (``PREPARE TRANSACTION``) when the checkpoint's barrier passes and
    committed (``COMMIT PREPARED``) once the checkpoint completes; a recovery
    finishes or rolls back what a crash left prepared. The server must allow
    prepared transactions (``max_prepared_transactions`` > 0); the sink keeps one
    row per subtask in the table ``kstream_sink_fences`` (created if missing) to
    fence zombie processes. At-least-once jobs commit each epoch at its barrier.

    `check` refuses, in one line, an unreachable server, one without prepared
    transactions, a missing table, a declared column the table lacks, a NOT NULL
    column without default the sink does not write, and a key without a unique
    constraint.
    """

    url: str
    table: str
    columns: tuple[str, ...]
    key: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.columns:
            raise ConfigurationError(f"PostgresSink({self.table!r}) needs at least one column")
        if len(set(self.columns)) != len(self.columns):
            raise ConfigurationError(f"PostgresSink({self.table!r}): a column is named twice")
        if not set(self.key) <= set(self.columns):
            raise ConfigurationError(
                f"PostgresSink({self.table!r}): key {self.key} is not among columns {self.columns}"
            )

    @property
    def name(self) -> str:
        return f"postgres:{self.table}"

    @property
    def commit_markers(self) -> bool:
        # Its kept epochs are prepared transactions, confirmed by the database
        # itself (`pg_prepared_xacts`), never by commit markers.
        return False

    def check(self, bootstrap: str) -> None:
        with connect(self.url, autocommit=True) as conn:
            check_server(conn)
            describe(conn, self.table, self.columns, self.key)
            ensure_fence_table(conn)

    def describe(self) -> Table:
        """The table as the sink writes it (checked as `check` does)."""
        with connect(self.url, autocommit=True) as conn:
            return describe(conn, self.table, self.columns, self.key)

    def open(self, ctx: SinkContext) -> SinkWriter:
        return PostgresWriter(
            self.describe(), self.url, ctx, two_phase=ctx.guarantee == "exactly-once"
        )
