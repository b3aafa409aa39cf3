"""`IcebergSink`: the description of an Apache Iceberg table a job appends to, exactly once."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kstream.connectors.iceberg.table import Columns, describe, load, open_catalog
from kstream.connectors.iceberg.writer import IcebergWriter
from kstream.dataflow.outputs import Sink, SinkContext, SinkWriter
from kstream.errors import ConfigurationError

__all__ = ["IcebergSink", "sql_catalog"]


def sql_catalog(uri: str, warehouse: str) -> dict[str, str]:
    """The properties of pyiceberg's SQL catalog at `uri` (e.g. ``sqlite:////path/cat.db``)
    keeping its tables under `warehouse` (a directory, ``file://...`` or ``s3://...``)."""
    return {"type": "sql", "uri": uri, "warehouse": warehouse}


@dataclass(frozen=True)
class IcebergSink(Sink[object]):
    """Append results as rows of Iceberg `table` (``"namespace.name"``) of a catalog.

    `catalog`: the catalog's pyiceberg properties (`sql_catalog` builds those of
    a SQL catalog); `catalog_name` its name for pyiceberg. A result is a tuple (or
    list) of values in the order of `columns`, or a mapping by column name.

    Exactly-once jobs write each checkpoint epoch as a Parquet file under the
    table's data location when the checkpoint's barrier passes, and append the
    files in one snapshot once the checkpoint completes; the snapshot's summary
    records the subtask (``kstream.sink``), the epoch (``kstream.epoch``) and the
    generation (``kstream.generation``), so a recovery commits what a crash left
    and nothing twice, and a zombie process commits nothing once its successor
    recovered. At-least-once jobs append each epoch at its barrier.

    `check` refuses, in one line, a catalog that cannot be opened, a missing
    table, a declared column the table lacks, a required column the sink does
    not write and a partitioned table.
    """

    catalog: Mapping[str, str] = field(hash=False)
    table: str
    columns: tuple[str, ...]
    catalog_name: str = "default"

    def __post_init__(self) -> None:
        if not self.columns:
            raise ConfigurationError(f"IcebergSink({self.table!r}) needs at least one column")
        if len(set(self.columns)) != len(self.columns):
            raise ConfigurationError(f"IcebergSink({self.table!r}): a column is named twice")
        if "." not in self.table:
            raise ConfigurationError(
                f"IcebergSink({self.table!r}): name the table as 'namespace.table'"
            )

    @property
    def name(self) -> str:
        return f"iceberg:{self.table}"

    @property
    def commit_markers(self) -> bool:
        # Its kept epochs are data files, published by the table's own commit
        # (the snapshot summary names the epoch), never by commit markers.
        return False

    def describe(self) -> Columns:
        """The table's declared columns as the sink writes them (checked as `check` does)."""
        catalog = open_catalog(self.catalog_name, self.catalog)
        return describe(load(catalog, self.table), self.table, self.columns)

    def check(self, bootstrap: str) -> None:
        self.describe()

    def open(self, ctx: SinkContext) -> SinkWriter:
        return IcebergWriter(
            self.catalog_name,
            dict(self.catalog),
            self.table,
            self.describe(),
            self.name,
            ctx,
            two_phase=ctx.guarantee == "exactly-once",
        )
