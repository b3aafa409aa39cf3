"""One real Iceberg SQL catalog (a SQLite file) and local warehouse per test, under
its temporary directory (`iceberg_tables`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from iceberg_tables import make_catalog, make_table


@pytest.fixture
def catalog(tmp_path: Path) -> dict[str, str]:
    return make_catalog(tmp_path / "iceberg")


@pytest.fixture
def table(catalog: dict[str, str]) -> str:
    make_table(catalog, "db.word_counts")
    return "db.word_counts"
