"""The PostgreSQL sink's view of its database: connecting, checking the server and
the table, turning results into rows and sending a batch of them.

Batches: inserts go by ``COPY`` (measured ~25x ``executemany`` of INSERTs here),
upserts by one ``INSERT ... SELECT FROM unnest(arrays) ON CONFLICT`` per batch
(~2x ``executemany``; a temporary table for ``COPY`` is not allowed in a
transaction that is prepared). A batch's upserts are deduplicated by key first,
the last row winning, as the statements one by one would: one statement may not
update a row twice.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from kstream.connectors.rows import as_row
from kstream.errors import ConfigurationError, DatabaseError

__all__ = [
    "FENCE_TABLE",
    "Table",
    "check_server",
    "connect",
    "database_error",
    "describe",
    "ensure_fence_table",
    "refusal",
]

#: One row per sink subtask: the generation that may write (`PostgresWriter`).
FENCE_TABLE = "kstream_sink_fences"
#: Seconds to wait for a connection.
CONNECT_TIMEOUT_S = 10


def connect(url: str, app: str = "kstream", *, autocommit: bool = False) -> psycopg.Connection[Any]:
    """A session on `url` named `app`; `DatabaseError` in one line if it cannot be opened."""
    try:
        return psycopg.connect(
            url, autocommit=autocommit, application_name=app, connect_timeout=CONNECT_TIMEOUT_S
        )
    except psycopg.Error as exc:
        raise DatabaseError(
            f"cannot reach PostgreSQL at {redact(url)}: {first_line(exc)}"
        ) from None


def redact(url: str) -> str:
    """`url` without its password."""
    scheme, sep, rest = url.partition("://")
    creds, at, host = rest.rpartition("@")
    if not (sep and at) or ":" not in creds:
        return url
    return f"{scheme}://{creds.split(':', 1)[0]}:***@{host}"


def first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def database_error(exc: psycopg.Error, what: str) -> DatabaseError:
    """A `DatabaseError` carrying PostgreSQL's message (and detail) for `what`."""
    diag = getattr(exc, "diag", None)
    detail = getattr(diag, "message_detail", None) if diag is not None else None
    return DatabaseError(f"{what}: {first_line(exc)}" + (f" ({detail})" if detail else ""))


def refusal(table: str, row: Sequence[Any], exc: psycopg.Error) -> str:
    """One line: `table` refused `row`, with PostgreSQL's message (and detail)."""
    diag = getattr(exc, "diag", None)
    detail = getattr(diag, "message_detail", None) if diag is not None else None
    return f"{table} refused row {tuple(row)!r}: {first_line(exc)}" + (
        f" ({first_line(Exception(detail))})" if detail else ""
    )


def check_server(conn: psycopg.Connection[Any]) -> None:
    """`ConfigurationError` if the server cannot prepare transactions."""
    row = conn.execute("SHOW max_prepared_transactions").fetchone()
    if row is None or int(row[0]) == 0:
        raise ConfigurationError(
            "PostgreSQL has max_prepared_transactions = 0, so the sink cannot prepare "
            "its epochs: set it above 0 in postgresql.conf (e.g. 64) and restart the server"
        )


@dataclass(frozen=True, slots=True)
class Table:
    """A table as the sink writes it: declared columns, their types, the upsert key."""

    name: str
    columns: tuple[str, ...]
    types: tuple[str, ...]
    not_null: tuple[bool, ...]
    key: tuple[str, ...] = ()

    def ident(self) -> sql.Composable:
        return sql.Identifier(*self.name.split("."))

    def row(self, value: Any) -> Sequence[Any]:
        """The row for result `value` (`kstream.connectors.rows.as_row`)."""
        return as_row(self.name, self.columns, self.not_null, value)

    def send(self, conn: psycopg.Connection[Any], rows: list[Sequence[Any]]) -> None:
        """Insert (or upsert) `rows` in `conn`'s open transaction."""
        cols = sql.SQL(", ").join(map(sql.Identifier, self.columns))
        if not self.key:
            with (
                conn.cursor() as cur,
                cur.copy(sql.SQL("COPY {} ({}) FROM STDIN").format(self.ident(), cols)) as copy,
            ):
                for r in rows:
                    copy.write_row(r)
            return
        at = [self.columns.index(k) for k in self.key]
        latest = {tuple(r[i] for i in at): r for r in rows}
        arrays = list(zip(*latest.values(), strict=True))
        others = [c for c in self.columns if c not in self.key]
        action = (
            sql.SQL("DO UPDATE SET ")
            + sql.SQL(", ").join(
                sql.SQL("{c} = EXCLUDED.{c}").format(c=sql.Identifier(c)) for c in others
            )
            if others
            else sql.SQL("DO NOTHING")
        )
        unnest = sql.SQL(", ").join(
            sql.SQL("%s::{}[]").format(sql.SQL(t)) for t in self.types
        )  # types come from format_type(), the server's own spelling
        conn.execute(
            sql.SQL(
                "INSERT INTO {t} ({cols}) SELECT * FROM unnest({un}) ON CONFLICT ({k}) "
            ).format(
                t=self.ident(),
                cols=cols,
                un=unnest,
                k=sql.SQL(", ").join(map(sql.Identifier, self.key)),
            )
            + action,
            [list(a) for a in arrays],
        )


def describe(
    conn: psycopg.Connection[Any], name: str, columns: tuple[str, ...], key: tuple[str, ...]
) -> Table:
    """Table `name` as the sink will write it; `ConfigurationError` (one line) if it does not exist,
    lacks a declared column, has a NOT NULL column without default that is not declared,
    or (upserts) has no unique constraint on exactly the key columns."""
    found = conn.execute("SELECT to_regclass(%s)::oid", (name,)).fetchone()
    if found is None or found[0] is None:
        raise ConfigurationError(f"table {name!r} does not exist; create it first")
    oid = found[0]
    cols = {
        r[0]: (r[1], r[2], r[3])
        for r in conn.execute(
            "SELECT attname, format_type(atttypid, atttypmod), attnotnull, atthasdef "
            "FROM pg_attribute WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped",
            (oid,),
        ).fetchall()
    }
    missing = [c for c in columns if c not in cols]
    if missing:
        raise ConfigurationError(
            f"table {name!r} has no column {', '.join(missing)} (it has {', '.join(cols)}); "
            "the sink's columns must be the table's"
        )
    required = [c for c, (_, nn, hasdef) in cols.items() if nn and not hasdef and c not in columns]
    if required:
        raise ConfigurationError(
            f"table {name!r} needs a value for {', '.join(required)} (NOT NULL, no default), "
            "which the sink does not write"
        )
    if key:
        uniques = conn.execute(
            "SELECT array_agg(a.attname::text) FROM pg_index i "
            "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
            "WHERE i.indrelid = %s AND i.indisunique GROUP BY i.indexrelid",
            (oid,),
        ).fetchall()
        if not any(set(u[0]) == set(key) for u in uniques):
            raise ConfigurationError(
                f"table {name!r} has no unique constraint on ({', '.join(key)}), "
                "which an upsert by that key needs"
            )
    return Table(
        name,
        columns,
        tuple(cols[c][0] for c in columns),
        tuple(cols[c][1] for c in columns),
        key,
    )


def ensure_fence_table(conn: psycopg.Connection[Any]) -> None:
    """Create `FENCE_TABLE` unless it exists (autocommit `conn`)."""
    # Two processes creating it at the same moment: one of them fails, and it exists.
    with contextlib.suppress(psycopg.errors.UniqueViolation):
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} "
                "(subtask text PRIMARY KEY, generation bigint NOT NULL)"
            ).format(sql.Identifier(FENCE_TABLE))
        )
