"""`DeltaSink`: the description of a Delta table a job writes, exactly once."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError

from kstream.connectors.delta.schema import Columns, check_types, schema_mismatch
from kstream.connectors.delta.writer import DeltaWriter, first_line
from kstream.dataflow.outputs import Sink, SinkContext, SinkWriter
from kstream.errors import ConfigurationError

__all__ = ["DeltaSink"]


def local_path(uri: str) -> str | None:
    """The directory of a local table URI (a path or ``file://``), None for an object store."""
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return parsed.path
    if parsed.scheme == "" or (len(parsed.scheme) == 1 and os.name == "nt"):
        return uri
    return None


@dataclass(frozen=True, eq=False)
class DeltaSink(Sink[Any]):
    """Write results as rows of the Delta table at `uri` (a local path, ``file://`` or
    ``s3://``), with `columns` (name -> Delta primitive type: ``string``, ``long``,
    ``integer``, ``double``, ``boolean``, ``date``, ``timestamp``, ...).

    A result is a tuple (or list) of values in the order of `columns`, or a mapping
    by column name. Rows are appended. A result that is not a row, and a row with a
    value Arrow cannot convert to its column's type, go to the job's error policy
    (`RecordError`, `RecordRefusedError` in one line); the epoch's other rows land.

    Exactly-once jobs write each checkpoint epoch as a Parquet file in the table
    directory when the checkpoint's barrier passes, and add it to the table's log
    in one Delta commit once the checkpoint completes; the commit carries an
    application transaction per subtask (``kstream:<job>:<sink>:<subtask>``, version
    = the epoch), by which a recovery recognises an epoch that is in already.
    At-least-once jobs commit each epoch at its barrier.

    `storage_options` go to delta-rs as they are (e.g. ``AWS_ENDPOINT_URL``,
    ``AWS_ACCESS_KEY_ID``, ``AWS_ALLOW_HTTP``); they are not part of the sink's
    name. `check` creates a missing table with the declared columns (unless
    `create` is False) and refuses, in one line, an existing table whose schema
    does not take them, and a local directory that cannot be written.
    """

    uri: str
    columns: Mapping[str, str]
    storage_options: Mapping[str, str] | None = field(default=None)
    create: bool = True

    def __post_init__(self) -> None:
        if not self.columns:
            raise ConfigurationError(f"DeltaSink({self.uri!r}) needs at least one column")
        check_types(self.uri, list(self.columns.items()))

    @property
    def name(self) -> str:
        return f"delta:{self.uri}"

    @property
    def commit_markers(self) -> bool:
        # Its kept epochs are data files, published by the table's own commit
        # (the commit names the epoch), never by commit markers.
        return False

    def _options(self) -> dict[str, str] | None:
        return dict(self.storage_options) if self.storage_options is not None else None

    def check(self, bootstrap: str) -> None:
        path = local_path(self.uri)
        if path is not None:
            self._check_directory(path)
        try:
            table = DeltaTable(self.uri, storage_options=self._options())
        except TableNotFoundError:
            if not self.create:
                raise ConfigurationError(
                    f"no Delta table at {self.uri} (the sink creates it unless create=False)"
                ) from None
            try:
                DeltaTable.create(
                    self.uri,
                    self.declared().arrow_schema,
                    mode="ignore",
                    storage_options=self._options(),
                )
            except (DeltaError, OSError) as exc:
                raise ConfigurationError(
                    f"cannot create the Delta table at {self.uri}: {first_line(exc)}"
                ) from None
            return
        except (DeltaError, OSError) as exc:
            raise ConfigurationError(
                f"cannot open the Delta table at {self.uri}: {first_line(exc)}"
            ) from None
        self._check_schema(table)

    def _check_directory(self, path: str) -> None:
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as exc:
            raise ConfigurationError(
                f"cannot create the Delta table's directory {path}: {exc.strerror or exc}"
            ) from None
        if not os.access(path, os.W_OK | os.X_OK):
            raise ConfigurationError(f"the Delta table's directory {path} is not writable")

    def _check_schema(self, table: DeltaTable) -> None:
        existing = [(f.name, _type_name(f.type), bool(f.nullable)) for f in table.schema().fields]
        why = schema_mismatch(self.uri, list(self.columns.items()), existing)
        if why is not None:
            raise ConfigurationError(why)

    def declared(self, not_null: frozenset[str] = frozenset()) -> Columns:
        """The declared columns, those in `not_null` refusing None."""
        names = tuple(self.columns)
        return Columns(
            self.uri,
            names,
            tuple(self.columns[n] for n in names),
            tuple(n in not_null for n in names),
        )

    def open(self, ctx: SinkContext) -> SinkWriter:
        try:
            table = DeltaTable(self.uri, storage_options=self._options())
        except (DeltaError, OSError) as exc:
            raise ConfigurationError(
                f"cannot open the Delta table at {self.uri}: {first_line(exc)}"
            ) from None
        self._check_schema(table)
        required = frozenset(f.name for f in table.schema().fields if not f.nullable)
        return DeltaWriter(
            self.uri,
            self._options(),
            self.name,
            self.declared(required),
            ctx,
            exactly_once=ctx.guarantee == "exactly-once",
        )


def _type_name(t: Any) -> str:
    """A Delta field type's name (``long``, ``string``; ``struct``/``array``/``map`` for
    nested ones, which no declared column matches)."""
    return str(getattr(t, "type", None) or type(t).__name__.removesuffix("Type").lower())
