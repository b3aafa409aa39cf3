"""`DeltaWriter`: one sink subtask's epochs as Parquet files, added to the table's log
by one Delta commit per completed checkpoint.

`pre_commit(n)` writes epoch n's rows as a Parquet file in the table directory
(no log entry names it yet, so readers do not see it) and returns the add actions
of every uncommitted epoch for the checkpoint to keep. `commit(n)` adds the files
of the pending epochs <= n in one Delta commit carrying two application
transactions: the subtask's newest epoch (`data_app_id`) and the writer's
generation (`generation_app_id`). A recovery re-commits the epochs the restored
checkpoint kept unless the table's transaction version shows they are in already
(`kstream.connectors.delta.plan.epochs_to_commit`). A row whose value Arrow
refuses for its column's type goes to the job's error policy
(`SinkContext.refused`) and the epoch's other rows are written; an epoch with no
row left commits nothing.

Fencing: every commit first checks, on the snapshot it commits on, that no newer
generation holds the subtask's generation transaction; since every commit carries
that transaction, delta-rs's conflict checker fails a commit that raced another
one of the same subtask (``Concurrent transaction``), and the writer checks again
on the newer snapshot. `recover` commits its generation first, so a zombie of an
older generation commits nothing afterwards.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable, Transaction
from deltalake._internal import DeltaFileSystemHandler
from deltalake.exceptions import CommitFailedError, DeltaError
from deltalake.transaction import AddAction, RemoveAction

from kstream.connectors.delta.plan import (
    PendingEpoch,
    PendingFile,
    check_generation,
    data_app_id,
    epochs_to_commit,
    file_name,
    generation_app_id,
)
from kstream.connectors.delta.schema import Columns, file_stats
from kstream.dataflow.outputs import SinkContext, SinkSnapshot, SinkWriter
from kstream.errors import DatabaseError, RecordRefusedError

__all__ = ["BATCH_ROWS", "COMMIT_ATTEMPTS", "DeltaWriter"]

log = logging.getLogger("kstream.sink.delta")

#: Rows buffered as Python tuples before they become an Arrow table.
BATCH_ROWS = 10_000
#: Commits that lost a race to a commit of the same subtask are tried again this often.
COMMIT_ATTEMPTS = 10


def stamp_ms() -> int:
    """The wall-clock time in ms for Delta's stamps (a file's modification time, a
    transaction's ``lastUpdated``): readers compare them with other hosts' clocks."""
    return int(time.time() * 1000)


def first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


class DeltaWriter(SinkWriter):
    """Writes one sink subtask's rows into the Delta table at `uri`, exactly once with
    `exactly_once` (else each epoch is committed at its `pre_commit`)."""

    def __init__(
        self,
        uri: str,
        storage_options: dict[str, str] | None,
        sink_name: str,
        columns: Columns,
        ctx: SinkContext,
        *,
        exactly_once: bool,
    ) -> None:
        self._uri = uri
        self._options = storage_options
        self._columns = columns
        self._ctx = ctx
        self._exactly_once = exactly_once
        self._data_app = data_app_id(ctx.job, sink_name, ctx.task)
        self._generation_app = generation_app_id(ctx.job, sink_name, ctx.task)
        self._table: DeltaTable | None = None
        # The Rust handler itself: pyarrow's PyFileSystem over deltalake's handler
        # hands it Buffers, which its output stream does not take.
        self._files = DeltaFileSystemHandler(uri, storage_options, None)
        self._rows: list[Sequence[Any]] = []
        #: The epoch's converted rows, each table non-empty.
        self._batches: list[pa.Table] = []
        #: Written, uncommitted epochs, oldest first.
        self._pending: list[PendingEpoch] = []
        self.handed: int = 0

    # -- the protocol -------------------------------------------------------

    def write(self, value: Any) -> None:
        self.handed += 1
        self._rows.append(self._columns.row(value))
        if len(self._rows) >= BATCH_ROWS:
            self._convert()

    def _convert(self) -> None:
        """The buffered rows as an Arrow table for the epoch's file."""
        rows, self._rows = self._rows, []
        data, refused = self._columns.arrow(rows)
        # A row Arrow refuses is the result's fault, not the epoch's: it goes to the
        # error policy and the others are written. Failing the epoch instead would
        # roll the job back onto the same row, for ever.
        for r in refused:
            self._ctx.refused(r.row, RecordRefusedError(r.why))
        if data.num_rows:
            self._batches.append(data)

    def pre_commit(self, epoch: int) -> SinkSnapshot:
        if self._rows:
            self._convert()
        # An epoch with no row left (none written, or all refused) writes no file
        # and is not pending: no commit, and no application transaction, is due
        # for it. The transaction only tells a recovery which kept files are in
        # the table already; the completed checkpoint is what marks the epoch done.
        if self._batches:
            batches, self._batches = self._batches, []
            written = self._write_file(epoch, pa.concat_tables(batches))
            self._pending.append(PendingEpoch(epoch, (written,)))
        if not self._exactly_once and self._pending:
            self._commit(epoch, fence=False)
        return SinkSnapshot(meta={"pending": [p.to_json() for p in self._pending]})

    def commit(self, epoch: int) -> None:
        if any(p.epoch <= epoch for p in self._pending):
            self._commit(epoch, fence=False)

    def abort(self, epoch: int) -> None:
        """Nothing to undo: the failed checkpoint's file stays pending, listed by the
        next snapshot and added with the next completed checkpoint."""

    def recover(self, epoch: int | None, kept: SinkSnapshot | None) -> None:
        if not self._exactly_once:
            return
        listed = kept.meta.get("pending", []) if kept is not None else []
        self._pending = [PendingEpoch.from_json(p) for p in listed]
        # Always a commit, with the kept epochs or alone: it raises the generation.
        self._commit(None, fence=True)

    def close(self) -> None:
        # Written files of uncommitted epochs stay for the next recovery (or vacuum).
        self._table = None

    # -- files and commits --------------------------------------------------

    def _write_file(self, epoch: int, table: pa.Table) -> PendingFile:
        name = file_name(self._data_app, self._ctx.generation, epoch, uuid.uuid4().hex[:12])
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, compression="snappy")
        data = sink.getvalue().to_pybytes()
        try:
            out = self._files.open_output_stream(name, None)
            out.write(data)
            # The upload completes at close (a multipart upload on object stores);
            # close is missing from deltalake's stub, not from the class.
            out.close()  # type: ignore[attr-defined]
        except (DeltaError, OSError) as exc:
            raise DatabaseError(
                f"Delta table {self._uri}: writing {name}: {first_line(exc)}"
            ) from exc
        return PendingFile(name, len(data), stamp_ms(), file_stats(table))

    def _snapshot(self) -> DeltaTable:
        """The table at its newest version."""
        try:
            if self._table is None:
                self._table = DeltaTable(self._uri, storage_options=self._options)
            else:
                self._table.update_incremental()
        except (DeltaError, OSError) as exc:
            raise DatabaseError(f"Delta table {self._uri}: {first_line(exc)}") from exc
        return self._table

    def _commit(self, upto: int | None, *, fence: bool) -> None:
        """Add the pending epochs <= `upto` (None: all) in one Delta commit, unless the
        table has them; with `fence`, commit the generation even with nothing to add."""
        what = f"Delta table {self._uri}, {self._data_app}"
        for attempt in range(1, COMMIT_ATTEMPTS + 1):
            table = self._snapshot()
            check_generation(
                table.transaction_version(self._generation_app), self._ctx.generation, what
            )
            todo = epochs_to_commit(self._pending, upto, table.transaction_version(self._data_app))
            if todo or fence:
                try:
                    self._commit_on(table, todo)
                except CommitFailedError as exc:
                    if attempt == COMMIT_ATTEMPTS:
                        raise DatabaseError(f"{what}: {first_line(exc)}") from exc
                    # A commit of this subtask (a zombie's or a successor's) won the
                    # race: check the generation and the epochs again on its snapshot.
                    log.info("%s: commit lost a race (%s); trying again", what, first_line(exc))
                    continue
                except (DeltaError, OSError) as exc:
                    raise DatabaseError(f"{what}: {first_line(exc)}") from exc
            elif self._pending:
                log.info("%s: epochs up to %s are in the table already", what, upto)
            self._pending = [p for p in self._pending if upto is not None and p.epoch > upto]
            return

    def _commit_on(self, table: DeltaTable, todo: Sequence[PendingEpoch]) -> None:
        now = stamp_ms()
        actions: list[AddAction | RemoveAction] = [
            AddAction(f.path, f.size, {}, f.modification_time, True, f.stats)
            for p in todo
            for f in p.files
        ]
        apps = [Transaction(self._generation_app, self._ctx.generation, now)]
        if todo:
            apps.append(Transaction(self._data_app, todo[-1].epoch, now))
        table.create_write_transaction(
            actions,
            "append",
            table.schema(),
            commit_properties=CommitProperties(
                app_transactions=apps,
                custom_metadata={"kstream.epochs": [p.epoch for p in todo]},
            ),
        )
