"""The Iceberg sink's view of its table: loading it, checking it, turning results
into rows, writing an epoch's Parquet file and committing files with a mark.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import CommitFailedException, NoSuchTableError
from pyiceberg.table import Table as IcebergTable
from pyiceberg.table import TableProperties
from pyiceberg.table.snapshots import ancestors_of

from kstream.connectors.arrow_rows import Refusal, to_arrow
from kstream.connectors.iceberg.marks import Mark, Plan, digest, newest_mark, summary
from kstream.connectors.rows import as_row
from kstream.errors import ConfigurationError, DatabaseError, KStreamError

__all__ = ["COMMIT_DEADLINE_S", "Columns", "commit_files", "describe", "open_catalog"]

#: How long a commit keeps re-deciding after conflicts with other writers' commits.
COMMIT_DEADLINE_S = 120.0


def first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def open_catalog(name: str, properties: Mapping[str, str]) -> Catalog:
    """The catalog `properties` describe; `DatabaseError` in one line if it cannot be opened."""
    try:
        return load_catalog(name, **dict(properties))
    except Exception as exc:  # pyiceberg raises many kinds (ValueError, SQLAlchemy's, OSError)
        raise DatabaseError(
            f"cannot open the Iceberg catalog {name!r}: {first_line(exc)}"
        ) from None


def load(catalog: Catalog, name: str) -> IcebergTable:
    """Table `name`; `ConfigurationError` (one line) if it does not exist."""
    try:
        return catalog.load_table(name)
    except NoSuchTableError:
        raise ConfigurationError(
            f"Iceberg table {name!r} does not exist; create it first"
        ) from None
    except Exception as exc:
        raise DatabaseError(f"cannot load Iceberg table {name!r}: {first_line(exc)}") from None


@dataclass(frozen=True, slots=True)
class Columns:
    """The declared columns as the sink writes them: names, Arrow schema, which are required."""

    table: str
    names: tuple[str, ...]
    schema: pa.Schema
    required: tuple[bool, ...]

    def row(self, value: Any) -> Sequence[Any]:
        """The row for result `value` (`kstream.connectors.rows.as_row`)."""
        return as_row(self.table, self.names, self.required, value, "required")

    def arrow(self, rows: Sequence[Sequence[Any]]) -> tuple[pa.Table, list[Refusal]]:
        """`rows` as an Arrow table, without the rows Arrow refuses (a value that does
        not fit its column's type), which come second, each with why in one line
        (`kstream.connectors.arrow_rows.to_arrow`)."""
        return to_arrow(self.table, self.schema, rows)


def describe(table: IcebergTable, name: str, columns: tuple[str, ...]) -> Columns:
    """Table `name` as the sink will write it; `ConfigurationError` (one line) if it lacks a
    declared column, has a required column the sink does not write, or is partitioned."""
    schema = table.schema()
    present = [f.name for f in schema.fields]
    missing = [c for c in columns if c not in present]
    if missing:
        raise ConfigurationError(
            f"Iceberg table {name!r} has no column {', '.join(missing)} (it has "
            f"{', '.join(present)}); the sink's columns must be the table's"
        )
    required = [f.name for f in schema.fields if f.required and f.name not in columns]
    if required:
        raise ConfigurationError(
            f"Iceberg table {name!r} requires {', '.join(required)}, which the sink does not write"
        )
    if not table.spec().is_unpartitioned():
        raise ConfigurationError(
            f"Iceberg table {name!r} is partitioned (by "
            f"{', '.join(f.name for f in table.spec().fields)}); the sink writes "
            "unpartitioned tables only"
        )
    arrow = schema.as_arrow()
    # No field ids in the files: `add_files` maps columns by name (and refuses ids).
    fields = [arrow.field(c).remove_metadata() for c in columns]
    return Columns(
        name,
        columns,
        pa.schema(fields),
        tuple(schema.find_field(c).required for c in columns),
    )


def write_file(
    table: IcebergTable, label: str, data: pa.Table, h: str, epoch: int, generation: int
) -> str:
    """Write `data` (`Columns.arrow`) as a new Parquet file under the table's data
    location; its path. `label` names the table in errors.

    The file is durable when this returns (fsynced on a local path) and invisible:
    no snapshot names it yet.
    """
    name = f"kstream-{digest(h)}-e{epoch}-g{generation}-{uuid.uuid4().hex}.parquet"
    path = table.location_provider().new_data_location(name)
    try:
        with table.io.new_output(path).create(overwrite=False) as out:
            pq.write_table(data, out)
        local = _local_path(path)
        if local is not None:
            fd = os.open(local, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    except OSError as exc:
        raise DatabaseError(f"{label}: writing {path}: {first_line(exc)}") from None
    return path


def _local_path(path: str) -> str | None:
    if path.startswith("file://"):
        return path[len("file://") :]
    return path if path.startswith("/") else None


def lineage(table: IcebergTable) -> list[Mapping[str, str]]:
    """The summaries of the `main` branch's snapshots, newest first."""
    current = table.current_snapshot()
    if current is None:
        return []
    return [
        dict(s.summary.additional_properties) if s.summary is not None else {}
        for s in ancestors_of(current, table.metadata)
    ]


def _busy(exc: BaseException) -> bool:
    """Whether `exc` is a SQL catalog's database being locked by another writer."""
    return type(exc).__name__ == "OperationalError" and "locked" in str(exc)


def _without_retries(table: IcebergTable) -> IcebergTable:
    """`table` whose commits are not retried by pyiceberg (a retry would re-base the append
    on a newer snapshot without deciding again); the catalog's own copy is unchanged."""
    props = {**table.metadata.properties, TableProperties.COMMIT_NUM_RETRIES: "0"}
    return IcebergTable(
        table.name(),
        metadata=table.metadata.model_copy(update={"properties": props}),
        metadata_location=table.metadata_location,
        io=table.io,
        catalog=table.catalog,
    )


def commit_files(
    catalog: Catalog,
    name: str,
    h: str,
    generation: int,
    decide: Callable[[Mark | None], Plan],
    files: Callable[[Plan], list[str]],
) -> tuple[Plan, Mark | None]:
    """Commit as `decide` says, deciding again after every conflict.

    `decide(mark)` returns the `Plan` for the subtask's newest mark (it raises
    `ProducerFencedError` for a newer generation's); `files(plan)` the paths of its
    epochs. One append snapshot with the files and the subtask's mark, asserting the
    snapshot the mark was read from. Returns the plan carried out and the mark it
    was decided on.
    """
    deadline = time.monotonic() + COMMIT_DEADLINE_S
    while True:
        table = load(catalog, name)
        mark = newest_mark(lineage(table), h)
        p = decide(mark)
        if not p.snapshot:
            return p, mark
        paths = files(p)
        try:
            tx = _without_retries(table).transaction()
            if paths:
                # The marks rule duplicates out; pyiceberg's own check would read
                # every manifest of the table at every commit.
                tx.add_files(
                    paths,
                    snapshot_properties=summary(h, p.epoch, generation),
                    check_duplicate_files=False,
                )
            else:
                with tx.update_snapshot(
                    snapshot_properties=summary(h, p.epoch, generation)
                ).fast_append():
                    pass
            tx.commit_transaction()
            return p, mark
        except CommitFailedException:
            # Another writer committed first (another subtask, or a zombie or a
            # successor of this one): read the table again and decide again.
            if time.monotonic() > deadline:
                raise DatabaseError(
                    f"{h}: commits to {name} kept conflicting for {COMMIT_DEADLINE_S:.0f}s"
                ) from None
        except Exception as exc:
            if _busy(exc) and time.monotonic() <= deadline:
                continue  # SQLite's lock, held by another writer's commit: decide again
            if isinstance(exc, KStreamError):
                raise
            raise DatabaseError(f"{h}: committing to {name}: {first_line(exc)}") from None
