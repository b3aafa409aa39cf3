"""Real Iceberg SQL catalogs (a SQLite file) and local warehouses for the Iceberg
sink's tests, and the word count's table."""

from __future__ import annotations

from pathlib import Path

from pyiceberg.catalog import load_catalog
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from kstream.connectors.iceberg import sql_catalog


def make_catalog(root: Path) -> dict[str, str]:
    """The properties of a SQL catalog on SQLite under `root`, with namespace ``db``."""
    (root / "warehouse").mkdir(parents=True, exist_ok=True)
    props = sql_catalog(f"sqlite:///{root / 'catalog.db'}", f"file://{root / 'warehouse'}")
    load_catalog("default", **props).create_namespace_if_not_exists("db")
    return props


def make_table(props: dict[str, str], name: str) -> None:
    """Table `name` (word string, count long required), unpartitioned."""
    load_catalog("default", **props).create_table(
        name,
        Schema(
            NestedField(1, "word", StringType(), required=False),
            NestedField(2, "count", LongType(), required=True),
        ),
    )
