"""`PostgresWriter`: one PostgreSQL transaction per checkpoint epoch, prepared at `pre_commit`.

The two-phase commit of the checkpoint protocol (:ref:`two-phase-commit`) done by
PostgreSQL itself: ``PREPARE TRANSACTION`` makes an epoch durable and invisible,
``COMMIT PREPARED`` publishes it, and either survives a crash of this process or
of the server. A recovery commits the gids the restored checkpoint kept and rolls
back the others (`kstream.connectors.postgres.gids.resolve`): no write-ahead copy
of the rows is needed, unlike the Kafka sink's.

Fencing: every session is named by its subtask and generation
(``application_name``); `recover` terminates older generations' sessions of its
subtask and raises the subtask's row in `FENCE_TABLE`, which every epoch's
transaction reads ``FOR SHARE`` before writing: a zombie cannot write after its
successor recovered, nor hold row locks the successor waits for.

Refused rows: each batch goes under a savepoint; a batch the table refuses for a
row's sake (a constraint, a value of the wrong type) is bisected down to the rows
it refuses (`kstream.connectors.postgres.refusals`), which go to the job's error
policy (`SinkContext.refused`) with PostgreSQL's message; the others are written.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql

from kstream.connectors.postgres.gids import application_name, check_head, head, resolve
from kstream.connectors.postgres.refusals import isolate, refuses_rows
from kstream.connectors.postgres.schema import (
    FENCE_TABLE,
    Table,
    connect,
    database_error,
    refusal,
)
from kstream.dataflow.outputs import SinkContext, SinkSnapshot, SinkWriter
from kstream.errors import DatabaseError, ProducerFencedError, RecordRefusedError

__all__ = ["BATCH_ROWS", "PostgresWriter"]

log = logging.getLogger("kstream.sink.postgres")

#: Rows buffered before they are sent (they are sent at `pre_commit` in any case).
BATCH_ROWS = 10_000
#: How long a recovery waits for a fence lock before it terminates zombies' sessions again.
FENCE_LOCK_TIMEOUT_MS = 2_000
#: How long a recovery tries to raise the fence before it gives up.
FENCE_DEADLINE_S = 60.0


class PostgresWriter(SinkWriter):
    """Writes one sink subtask's rows into `table`, exactly once with `two_phase`.

    With `two_phase` False (at-least-once or at-most-once jobs) an epoch is
    committed at `pre_commit` and nothing is prepared or fenced.
    """

    def __init__(self, table: Table, url: str, ctx: SinkContext, *, two_phase: bool) -> None:
        self._table = table
        self._url = url
        self._ctx = ctx
        self._two_phase = two_phase
        self._head = head(ctx.job, f"postgres:{table.name}", ctx.task)
        check_head(self._head)
        self._app = application_name(self._head, ctx.generation)
        self._conn: psycopg.Connection[Any] | None = None
        self._ctl: psycopg.Connection[Any] | None = None
        #: Rows of the open epoch not yet sent, and whether its transaction is open.
        self._rows: list[Sequence[Any]] = []
        self._sent: list[Sequence[Any]] = []
        self._in_transaction = False
        #: Prepared, uncommitted epochs: gid and rows (kept in memory only, to go
        #: on with the next epoch if the epoch's checkpoint fails).
        self._prepared: dict[int, tuple[str, list[Sequence[Any]]]] = {}
        self.handed: int = 0

    # -- connections --------------------------------------------------------

    def _data(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed:
            self._conn = connect(self._url, self._app)
        return self._conn

    def _control(self) -> psycopg.Connection[Any]:
        if self._ctl is None or self._ctl.closed:
            self._ctl = connect(self._url, self._app, autocommit=True)
        return self._ctl

    # -- the protocol -------------------------------------------------------

    def write(self, value: Any) -> None:
        self.handed += 1
        self._rows.append(self._table.row(value))
        if len(self._rows) >= BATCH_ROWS:
            self._flush()

    def _flush(self) -> None:
        """Send the buffered rows in the open epoch's transaction (opened here if needed)."""
        if not self._rows:
            return
        # Rows of this epoch may touch rows a prepared epoch locked (an upsert of the
        # same key): they would wait for its COMMIT PREPARED, which only this thread
        # runs. Serve completions (or aborts) first.
        while self._prepared:
            self._ctx.pump()
        conn = self._data()
        rows, self._rows = self._rows, []
        try:
            if not self._in_transaction:
                self._in_transaction = True
                if self._two_phase:
                    self._check_fence(conn)
            written = isolate(rows, lambda part: self._attempt(conn, part))
        except psycopg.Error as exc:
            raise database_error(exc, f"{self._table.name}: writing {len(rows)} rows") from exc
        # Refused rows stay out of `_sent`: an aborted epoch's rows are sent again,
        # and must not be dead-lettered twice.
        self._sent.extend(written.accepted)
        for row, why in written.refused:
            self._ctx.refused(row, RecordRefusedError(refusal(self._table.name, row, why)))

    def _attempt(
        self, conn: psycopg.Connection[Any], rows: Sequence[Sequence[Any]]
    ) -> psycopg.Error | None:
        """Send `rows` under a savepoint: None if the table took them all, the error
        if it refused one of them (none is written then); raises any other error."""
        conn.execute("SAVEPOINT kstream_batch")
        try:
            self._table.send(conn, list(rows))
        except psycopg.Error as exc:
            if not refuses_rows(exc.sqlstate, client_data_error=isinstance(exc, psycopg.DataError)):
                raise
            conn.execute("ROLLBACK TO SAVEPOINT kstream_batch")
            conn.execute("RELEASE SAVEPOINT kstream_batch")
            return exc
        conn.execute("RELEASE SAVEPOINT kstream_batch")
        return None

    def _check_fence(self, conn: psycopg.Connection[Any]) -> None:
        row = conn.execute(
            sql.SQL("SELECT generation FROM {} WHERE subtask = %s FOR SHARE").format(
                sql.Identifier(FENCE_TABLE)
            ),
            (self._head,),
        ).fetchone()
        if row is None or int(row[0]) != self._ctx.generation:
            raise ProducerFencedError(
                f"{self._head}: generation {row[0] if row else None} holds the fence, this "
                f"writer is generation {self._ctx.generation}: a newer process took over"
            )

    def pre_commit(self, epoch: int) -> SinkSnapshot:
        self._flush()
        if self._in_transaction:
            conn = self._data()
            rows, self._sent = self._sent, []
            self._in_transaction = False
            try:
                if self._two_phase:
                    gid = f"{self._head}:{epoch}:{self._ctx.generation}"
                    conn.execute(sql.SQL("PREPARE TRANSACTION {}").format(sql.Literal(gid)))
                    self._prepared[epoch] = (gid, rows)
                else:
                    conn.commit()
            except psycopg.Error as exc:
                raise database_error(exc, f"{self._table.name}: epoch {epoch}") from exc
        return SinkSnapshot(meta={"prepared": sorted(g for g, _ in self._prepared.values())})

    def commit(self, epoch: int) -> None:
        for e in sorted(e for e in self._prepared if e <= epoch):
            gid, _ = self._prepared[e]
            self._finish("COMMIT", gid)
            del self._prepared[e]

    def _finish(self, how: str, gid: str) -> None:
        try:
            self._control().execute(sql.SQL(how + " PREPARED {}").format(sql.Literal(gid)))
        except psycopg.errors.UndefinedObject:
            # Only this subtask's recovery finishes its gids: a newer process did.
            raise ProducerFencedError(
                f"{gid}: the prepared transaction is gone: a newer process recovered "
                "this sink subtask"
            ) from None
        except psycopg.Error as exc:
            raise database_error(exc, f"{how} PREPARED {gid}") from exc

    def abort(self, epoch: int) -> None:
        """Checkpoint `epoch` failed: roll its prepared epoch back and send its rows again
        with the open epoch (which is then committed with the next completed checkpoint)."""
        entry = self._prepared.pop(epoch, None)
        if entry is None:
            return
        gid, rows = entry
        self._finish("ROLLBACK", gid)
        self._rows[:0] = rows
        log.info("%s: checkpoint %d failed; its rows go on with the next epoch", gid, epoch)

    def recover(self, epoch: int | None, kept: SinkSnapshot | None) -> None:
        if not self._two_phase:
            return
        listed = kept.meta.get("prepared", []) if kept is not None else []
        deadline = time.monotonic() + FENCE_DEADLINE_S
        ctl = self._control()
        while True:
            self._terminate_older(ctl)
            self._resolve(ctl, listed)
            try:
                self._raise_fence(ctl)
                return
            except psycopg.errors.LockNotAvailable:
                # A zombie's transaction read the fence (its session was just
                # terminated, or it prepared since): resolve again, then retry.
                if time.monotonic() > deadline:
                    raise DatabaseError(
                        f"{self._head}: the fence row stayed locked for {FENCE_DEADLINE_S:.0f}s"
                    ) from None
            except psycopg.Error as exc:
                raise database_error(exc, f"{self._head}: recovery") from exc

    def _terminate_older(self, ctl: psycopg.Connection[Any]) -> None:
        stem = self._app.rsplit("-g", 1)[0] + "-g"
        for pid, name in ctl.execute(
            "SELECT pid, application_name FROM pg_stat_activity "
            "WHERE starts_with(application_name, %s) AND pid <> pg_backend_pid()",
            (stem,),
        ).fetchall():
            generation = name[len(stem) :]
            if generation.isdecimal() and int(generation) < self._ctx.generation:
                ctl.execute("SELECT pg_terminate_backend(%s, 10000)", (pid,))
                log.info("%s: terminated session %d of generation %s", self._head, pid, generation)

    def _resolve(self, ctl: psycopg.Connection[Any], listed: list[str]) -> None:
        prepared = [
            r[0]
            for r in ctl.execute(
                "SELECT gid FROM pg_prepared_xacts WHERE database = current_database() "
                "AND starts_with(gid, %s)",
                (self._head + ":",),
            ).fetchall()
        ]
        plan = resolve(prepared, self._head, listed)
        for gid in plan.commit:
            self._finish("COMMIT", gid)
            log.info("%s: committed after recovery", gid)
        for gid in plan.rollback:
            self._finish("ROLLBACK", gid)
            log.info("%s: rolled back after recovery", gid)

    def _raise_fence(self, ctl: psycopg.Connection[Any]) -> None:
        with ctl.transaction():
            ctl.execute(f"SET LOCAL lock_timeout = {FENCE_LOCK_TIMEOUT_MS}")
            row = ctl.execute(
                sql.SQL(
                    "INSERT INTO {t} (subtask, generation) VALUES (%s, %s) "
                    "ON CONFLICT (subtask) DO UPDATE SET generation = EXCLUDED.generation "
                    "WHERE {t}.generation <= EXCLUDED.generation RETURNING generation"
                ).format(t=sql.Identifier(FENCE_TABLE)),
                (self._head, self._ctx.generation),
            ).fetchone()
        if row is None:
            raise ProducerFencedError(
                f"{self._head}: a newer generation than {self._ctx.generation} holds the fence"
            )

    def close(self) -> None:
        # The open epoch's transaction is rolled back with its session; prepared
        # epochs stay for the next recovery to finish.
        for conn in (self._conn, self._ctl):
            if conn is not None:
                try:
                    conn.close()
                except psycopg.Error as exc:
                    log.info("%s: close failed: %s", self._head, exc)
        self._conn = self._ctl = None
