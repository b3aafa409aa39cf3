"""The PostgreSQL sink's prepared transactions in a database, by job: listed, rolled back.

A running job's recovery finishes every prepared transaction of its own sink
subtasks; those of a job that was deleted (its checkpoints removed, never to
run again) stay prepared, holding their row locks and the server's WAL, until
somebody rolls them back. ``kstream postgres prepared`` lists them with this
module and, asked to, rolls back one job's.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from kstream.connectors.postgres.gids import Gid
from kstream.connectors.postgres.schema import database_error

__all__ = ["Prepared", "list_prepared", "roll_back"]


@dataclass(frozen=True, slots=True)
class Prepared:
    """One of the sink's prepared transactions, as ``pg_prepared_xacts`` shows it."""

    gid: str
    job: str
    #: The sink (``postgres:<table>``) and its subtask (``s<stage>-<index>``).
    sink: str
    subtask: str
    epoch: int
    generation: int
    database: str
    owner: str
    prepared_at: dt.datetime

    @classmethod
    def of(cls, text: str, database: str, owner: str, at: dt.datetime) -> Prepared | None:
        """The transaction named `text`, or None if it is not the sink's.

        Job names cannot hold ``:`` (`kstream.protocol.names.check_job_name`)
        and subtask names neither, so the head splits without ambiguity; a
        table name may hold one (a quoted identifier): it stays in `sink`.
        """
        gid = Gid.parse(text)
        if gid is None:
            return None
        parts = gid.head.split(":")
        if len(parts) < 4:
            return None
        return cls(
            text,
            parts[1],
            ":".join(parts[2:-1]),
            parts[-1],
            gid.epoch,
            gid.generation,
            database,
            owner,
            at,
        )


def list_prepared(conn: psycopg.Connection[Any], job: str | None = None) -> list[Prepared]:
    """The sink's prepared transactions in every database of `conn`'s server (of `job`
    only, if given), oldest first."""
    try:
        found = conn.execute(
            "SELECT gid, database, owner, prepared FROM pg_prepared_xacts "
            "WHERE starts_with(gid, 'kstream:') ORDER BY prepared, gid"
        ).fetchall()
    except psycopg.Error as exc:
        raise database_error(exc, "listing pg_prepared_xacts") from exc
    listed = [p for p in (Prepared.of(*row) for row in found) if p is not None]
    return [p for p in listed if job is None or p.job == job]


def roll_back(conn: psycopg.Connection[Any], gids: Iterable[str]) -> list[str]:
    """``ROLLBACK PREPARED`` each of `gids` on autocommit `conn` (in its database);
    the gids rolled back (one already finished by somebody else is skipped)."""
    done: list[str] = []
    for gid in gids:
        try:
            conn.execute(sql.SQL("ROLLBACK PREPARED {}").format(sql.Literal(gid)))
        except psycopg.errors.UndefinedObject:
            continue  # finished meanwhile (a recovery of that job, or another cleaner)
        except psycopg.Error as exc:
            raise database_error(exc, f"ROLLBACK PREPARED {gid}") from exc
        done.append(gid)
    return done
