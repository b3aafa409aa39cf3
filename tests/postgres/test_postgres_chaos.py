"""`kstream chaos --workload postgres` in short: the word count into a PostgreSQL table
under worker kills, kills at the two-phase commit's points and the database server
restarted mid-run, judged from the table read back with psycopg."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from sink_chaos import sink_campaign

from kstream.infra.postgres import LocalPostgres
from kstream.testing import unique_name
from kstream.tools.chaos.tables import PostgresTable

pytestmark = [pytest.mark.e2e, pytest.mark.campaign, pytest.mark.postgres, pytest.mark.timeout(300)]


def test_a_short_campaign_with_the_database_restarted_leaves_every_update_once(
    postgres_server: LocalPostgres, tmp_path: Path
) -> None:
    table = PostgresTable(
        postgres_server.url, unique_name("chaos").replace("-", "_"), postgres_server
    )
    try:
        result, log = sink_campaign(
            tmp_path, "postgres", table, ("postgres-restart", "fault-point", "worker-kill"), seed=32
        )
    finally:
        postgres_server.start()  # idempotent: the next tests need it
    assert "postgres-restart" in result.by_kind, log
    assert result.recoveries >= 1, log
    with psycopg.connect(postgres_server.url) as conn:
        prepared = conn.execute("SELECT gid FROM pg_prepared_xacts").fetchall()
    assert not [g for (g,) in prepared if table.name in g], log  # nothing left in doubt
