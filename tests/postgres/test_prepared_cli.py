"""`kstream postgres prepared`: the sink's prepared transactions of a deleted job,
listed and rolled back on a real server; those of a job with checkpoints kept."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from test_server import kstream_postgres

from kstream.connectors.postgres import PostgresSink
from kstream.dataflow.outputs import SinkContext
from kstream.testing import unique_name

pytestmark = [pytest.mark.postgres]


def prepare_one(url: str, table: str, job: str) -> str:
    """Leave one prepared epoch of `job`'s sink (as a crash before the commit would)."""
    ctx = SinkContext("nowhere:9092", job, "s1-0", 1, producer=None)  # type: ignore[arg-type]
    sink = PostgresSink(url, table, ("word", "count"))
    sink.check("")
    w = sink.open(ctx)
    w.recover(None, None)
    w.write((job, 1))
    (gid,) = w.pre_commit(9).meta["prepared"]
    w.close()
    return str(gid)


def prepared(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        return {r[0] for r in conn.execute("SELECT gid FROM pg_prepared_xacts").fetchall()}


def test_a_deleted_jobs_transactions_are_listed_and_rolled_back_a_live_ones_kept(
    postgres_url: str, table: str, tmp_path: Path
) -> None:
    gone, alive = unique_name("pg-gone"), unique_name("pg-alive")
    gone_gid = prepare_one(postgres_url, table, gone)
    alive_gid = prepare_one(postgres_url, table, alive)
    (tmp_path / alive / "checkpoints" / "chk-9").mkdir(parents=True)
    where = ["--url", postgres_url, "--state-dir", str(tmp_path)]

    listing = kstream_postgres("prepared", *where)
    assert listing.returncode == 0, listing.stderr
    assert f"job {gone}: 1 prepared, no stored checkpoints" in listing.stdout
    assert f"job {alive}: 1 prepared, 1 stored checkpoints" in listing.stdout
    assert f"  {gone_gid}  database=postgres owner=postgres prepared=" in listing.stdout
    assert "--job-name NAME --rollback" in listing.stderr

    refused = kstream_postgres("prepared", *where, "--job-name", alive, "--rollback")
    assert refused.returncode != 0
    assert f"job {alive} still has 1 checkpoints" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert alive_gid in prepared(postgres_url)

    cleaned = kstream_postgres("prepared", *where, "--job-name", gone, "--rollback")
    assert cleaned.returncode == 0, cleaned.stderr
    assert f"rolled back 1 prepared transactions of job {gone}" in cleaned.stdout
    assert gone_gid not in prepared(postgres_url)
    assert alive_gid in prepared(postgres_url)

    forced = kstream_postgres("prepared", *where, "--job-name", alive, "--rollback", "--force")
    assert forced.returncode == 0, forced.stderr
    assert alive_gid not in prepared(postgres_url)
    again = kstream_postgres("prepared", *where, "--job-name", alive)
    assert again.stdout.strip() == f"no prepared transactions of job {alive}"


def test_rollback_needs_a_job(postgres_url: str) -> None:
    result = kstream_postgres("prepared", "--url", postgres_url, "--rollback")
    assert result.returncode != 0
    assert "--rollback needs --job-name" in result.stderr
