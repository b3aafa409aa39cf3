"""A real PostgreSQL server for the PostgreSQL sink's tests, one per session.

Debian's packages (``apt-get install -y postgresql``) provide the binaries; without
them every test here skips with that one line, or fails where
``KSTREAM_REQUIRE_POSTGRES`` is set (CI installs them and sets it: .ci/run). The
server is `kstream.infra.postgres.LocalPostgres` on ``KSTREAM_TEST_POSTGRES_PORT``
(default 25433, not the default of ``kstream postgres``), wiped at the start: it
is the suite's own, stopped at the end unless somebody else had started it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import psycopg
import pytest

from kstream.infra.postgres import LocalPostgres, postgres_bin
from kstream.testing import unique_name

TEST_PORT = int(os.environ.get("KSTREAM_TEST_POSTGRES_PORT", "25433"))


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[LocalPostgres]:
    if postgres_bin() is None:
        missing = "PostgreSQL is not installed (apt-get install -y postgresql)"
        if os.environ.get("KSTREAM_REQUIRE_POSTGRES"):
            pytest.fail(f"{missing}, and KSTREAM_REQUIRE_POSTGRES is set")
        pytest.skip(missing)
    server = LocalPostgres(TEST_PORT)
    was_running = server.status().running
    if not was_running:
        server.wipe()
    server.start()
    yield server
    if not was_running:
        server.stop()


@pytest.fixture
def postgres_url(postgres_server: LocalPostgres) -> str:
    return postgres_server.url


@pytest.fixture
def table(postgres_url: str) -> str:
    """A fresh table ``word_counts_<unique>`` (word text primary key, count bigint)."""
    name = unique_name("wc").replace("-", "_")
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {name} (word text PRIMARY KEY, count bigint NOT NULL)")
    return name
