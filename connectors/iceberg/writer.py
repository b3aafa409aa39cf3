"""`IcebergWriter`: one Parquet file per checkpoint epoch, one append snapshot per commit.

The two-phase commit of the checkpoint protocol (:ref:`two-phase-commit`) on an
Iceberg table: `pre_commit` writes the epoch's rows as a data file no snapshot
names (durable, invisible) and keeps its path in the checkpoint; `commit` appends
the files of every pending epoch in one snapshot whose summary records the
subtask, the epoch and the generation (`kstream.connectors.iceberg.marks`). A
recovery re-commits the epochs the restored checkpoint kept unless the table's
history records them, and leaves a mark of its generation there, which fences
older generations' commits.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Any

from pyiceberg.catalog import Catalog
from pyiceberg.table import Table as IcebergTable

from kstream.connectors.iceberg.marks import Mark, Plan, head, plan
from kstream.connectors.iceberg.table import (
    Columns,
    commit_files,
    load,
    open_catalog,
    write_file,
)
from kstream.dataflow.outputs import SinkContext, SinkSnapshot, SinkWriter
from kstream.errors import DatabaseError, RecordRefusedError

__all__ = ["FILE_ROWS", "IcebergWriter"]

log = logging.getLogger("kstream.sink.iceberg")

#: Rows of one epoch buffered before they are written as a file of their own (an
#: epoch is written at `pre_commit` in any case; larger epochs get several files).
FILE_ROWS = 500_000


class IcebergWriter(SinkWriter):
    """Appends one sink subtask's rows to table `name`, exactly once with `two_phase`.

    With `two_phase` False (at-least-once or at-most-once jobs) an epoch is
    appended at `pre_commit`.
    """

    def __init__(
        self,
        catalog_name: str,
        properties: dict[str, str],
        name: str,
        columns: Columns,
        sink: str,
        ctx: SinkContext,
        *,
        two_phase: bool,
    ) -> None:
        self._catalog_name = catalog_name
        self._properties = properties
        self._name = name
        self._columns = columns
        self._ctx = ctx
        self._two_phase = two_phase
        self._head = head(ctx.job, sink, ctx.task)
        self._catalog: Catalog | None = None
        self._table: IcebergTable | None = None
        #: Rows of the open epoch not yet in a file, and the files it has already.
        self._rows: list[Sequence[Any]] = []
        self._files: list[str] = []
        self._label = 0
        #: Pre-committed, uncommitted epochs and their files.
        self._pending: dict[int, list[str]] = {}
        self.handed: int = 0

    def _cat(self) -> Catalog:
        if self._catalog is None:
            self._catalog = open_catalog(self._catalog_name, self._properties)
        return self._catalog

    def _tbl(self) -> IcebergTable:
        # Files are written where this copy says; its location does not change.
        if self._table is None:
            self._table = load(self._cat(), self._name)
        return self._table

    # -- the protocol -------------------------------------------------------

    def begin_epoch(self, epoch: int) -> None:
        self._label = epoch

    def write(self, value: Any) -> None:
        self.handed += 1
        self._rows.append(self._columns.row(value))
        if len(self._rows) >= FILE_ROWS:
            self._write_file(self._label)

    def _write_file(self, epoch: int) -> None:
        rows, self._rows = self._rows, []
        data, refused = self._columns.arrow(rows)
        # A row Arrow refuses is the result's fault, not the epoch's: it goes to
        # the error policy, and the others are written.
        for r in refused:
            self._ctx.refused(r.row, RecordRefusedError(r.why))
        if data.num_rows == 0:
            return
        self._files.append(
            write_file(
                self._tbl(), self._columns.table, data, self._head, epoch, self._ctx.generation
            )
        )

    def pre_commit(self, epoch: int) -> SinkSnapshot:
        if self._rows:
            self._write_file(epoch)
        if self._files:
            self._pending[epoch] = self._files
            self._files = []
        if not self._two_phase:
            self.commit(epoch)
        return SinkSnapshot(meta={"pending": [[e, p] for e, p in sorted(self._pending.items())]})

    def commit(self, epoch: int) -> None:
        due = [e for e in self._pending if e <= epoch]
        if not due:
            return
        self._commit(lambda mark: plan(mark, due, epoch, self._ctx.generation, fence=False,
                                       who=self._head))  # fmt: skip
        for e in due:
            del self._pending[e]

    def _commit(self, decide: Callable[[Mark | None], Plan]) -> Plan:
        pending = self._pending

        def files(p: Plan) -> list[str]:
            return [f for e in p.epochs for f in pending[e]]

        done, mark = commit_files(
            self._cat(), self._name, self._head, self._ctx.generation, decide, files
        )
        skipped = mark.epoch if mark is not None else None
        log.info(
            "%s: committed epochs %s to %s (recorded before: %s)",
            self._head, list(done.epochs), self._name, skipped,
        )  # fmt: skip
        return done

    def abort(self, epoch: int) -> None:
        """Checkpoint `epoch` failed: its file stays pending, committed with the next
        completed checkpoint (the contract's rule; its rows are in the state already)."""

    def recover(self, epoch: int | None, kept: SinkSnapshot | None) -> None:
        self._rows, self._files, self._pending = [], [], {}
        if not self._two_phase:
            return
        listed = kept.meta.get("pending", []) if kept is not None else []
        try:
            self._pending = {int(e): [str(p) for p in paths] for e, paths in listed}
        except (TypeError, ValueError):
            raise DatabaseError(
                f"{self._head}: the checkpoint's pending epochs are malformed: {listed!r}"
            ) from None
        epochs = list(self._pending)
        self._commit(lambda mark: plan(mark, epochs, None, self._ctx.generation, fence=True,
                                       who=self._head))  # fmt: skip
        self._pending = {}

    def close(self) -> None:
        # Pending files stay: a completed checkpoint may name them, for the next recovery.
        engine = getattr(self._catalog, "engine", None)
        if engine is not None:
            with contextlib.suppress(Exception):
                engine.dispose()
        self._catalog = self._table = None
