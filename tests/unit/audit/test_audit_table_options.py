"""`kstream audit`'s table options: which kind of table they name, and the one-line
refusals of combinations that name none or two."""

from __future__ import annotations

import pytest

from kstream.audit.tables import DeltaLakeTable, IcebergTable, PostgresTable
from kstream.errors import ConfigurationError
from kstream.tools.cli.audit import _table, _TableKind

CATALOG = "sqlite:////data/iceberg/catalog.db"


def kind(
    postgres: str | None = None,
    delta: bool = False,
    iceberg: bool = False,
    catalog_uri: str | None = None,
    warehouse: str | None = None,
) -> _TableKind:
    return _TableKind(postgres, delta, iceberg, catalog_uri, warehouse)


def test_each_kind_names_its_reader() -> None:
    iceberg = _table("db.wc", kind(iceberg=True, catalog_uri=CATALOG), "word", None)
    assert iceberg is not None
    assert iceberg.reader == IcebergTable({"type": "sql", "uri": CATALOG}, "db.wc")
    assert iceberg.key == ("word",)
    located = _table("db.wc", kind(iceberg=True, catalog_uri=CATALOG, warehouse="/w"), "w", "n")
    assert located is not None
    assert located.reader == IcebergTable(
        {"type": "sql", "uri": CATALOG, "warehouse": "/w"}, "db.wc"
    )
    assert located.value == ("n",)
    delta = _table("/t", kind(delta=True), "word", None)
    assert delta is not None
    assert delta.reader == DeltaLakeTable("/t")
    pg = _table("wc", kind(postgres="postgresql://h/db"), "word", None)
    assert pg is not None
    assert pg.reader == PostgresTable("postgresql://h/db", "wc")
    assert _table(None, kind(), None, None) is None


@pytest.mark.parametrize(
    ("table", "given", "message"),
    [
        ("db.wc", kind(), "--table needs its kind, exactly one"),
        ("db.wc", kind(delta=True, iceberg=True, catalog_uri=CATALOG), "exactly one"),
        ("db.wc", kind(iceberg=True), "--iceberg needs the table's catalog: --catalog-uri"),
        ("/t", kind(delta=True, catalog_uri=CATALOG), "--catalog-uri and --warehouse go with"),
        ("/t", kind(delta=True, warehouse="/w"), "--catalog-uri and --warehouse go with"),
        (None, kind(iceberg=True, catalog_uri=CATALOG), "go with --table"),
    ],
)
def test_a_table_of_no_kind_or_two_is_one_line(
    table: str | None, given: _TableKind, message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message) as refused:
        _table(table, given, "word", None)
    assert "\n" not in str(refused.value)
