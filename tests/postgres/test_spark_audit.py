"""`kstream audit --table`: Spark reads a real PostgreSQL table through JDBC and audits it.

The tables hold what the PostgreSQL sink's word count writes in insert mode, one
(word, count) row per update, written here with psycopg: exactly once, with one
row twice, with one row missing; and an upsert table's final rows against a
reference file. The input is a real topic. Cost: four small
audits in this process, ~45 s in all on 2 shared cores (the first starts the JVM);
the command line is run where it fails before Spark. The standalone-cluster
variant is in the extended tier.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
from table_audit import GOOD, LINES, input_topic_of_lines

from kstream.audit import AuditResult, run_audit
from kstream.audit.tables import PostgresTable, TableAudit, jdbc_url, redact
from kstream.errors import ConfigurationError
from kstream.infra.postgres import LocalPostgres
from kstream.infra.spark_cluster import SparkCluster
from kstream.testing import unique_name

pytestmark = [pytest.mark.postgres, pytest.mark.audit]

#: An unreachable database is reported by the audit's connect check, before Spark starts.
FAIL_FAST_S = 20


@pytest.fixture(scope="module")
def input_topic(bootstrap: str) -> str:
    return input_topic_of_lines(bootstrap, "audit-table-in")


def make_table(url: str, rows: list[tuple[str, int]]) -> str:
    """A table as the insert-mode word count leaves it (no key: duplicates can exist)."""
    name = unique_name("wc_audit").replace("-", "_")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {name} (word text NOT NULL, count bigint NOT NULL)")
        with conn.cursor() as cur:
            cur.executemany(f"INSERT INTO {name} (word, count) VALUES (%s, %s)", rows)
    return name


def audit(
    bootstrap: str, src: str, url: str, table: str, where: Path, master: str = "local[2]"
) -> AuditResult:
    return run_audit(
        input_topic=src,
        bootstrap=bootstrap,
        table=TableAudit(PostgresTable(url, table), key=("word",), value=("count",)),
        master=master,
        report_dir=where,
        progress=False,
    )


@pytest.fixture(scope="module", autouse=True)
def jvm_started_without_the_driver(tmp_path_factory: pytest.TempPathFactory) -> None:
    """A Spark session without the JDBC jar first, as earlier tests of a whole run
    leave one: pyspark reuses this process's JVM, whose driver then lacked the
    PostgreSQL driver (``ClassNotFoundException``) until the audit added it."""
    from kstream.audit.jars import connector_jars
    from kstream.audit.spark import spark_session

    log = tmp_path_factory.mktemp("plain-spark") / "spark.log"
    with spark_session("local[1]", connector_jars(), log) as spark:
        assert spark.range(3).count() == 3


def figures(r: AuditResult) -> tuple[int, int, int, int | None]:
    return (r.duplicates, r.lost, r.unexpected, r.out_of_order)


def test_a_table_written_exactly_once_is_clean(
    bootstrap: str, input_topic: str, postgres_server: LocalPostgres, tmp_path: Path
) -> None:
    table = make_table(postgres_server.url, GOOD)
    r = audit(bootstrap, input_topic, postgres_server.url, table, tmp_path)
    assert r.clean
    assert figures(r) == (0, 0, 0, 0)
    assert r.input_records == len(LINES)
    assert r.output_records == r.expected_outputs == len(GOOD)
    report = json.loads(r.report_json.read_text())
    assert report["verdict"] == "clean"
    label = f"table {table} at 127.0.0.1:{postgres_server.port}/postgres"
    assert report["output"]["topic"] == label
    assert report["output"]["records"] == len(GOOD)


def test_a_missing_row_is_counted(
    bootstrap: str, input_topic: str, postgres_server: LocalPostgres, tmp_path: Path
) -> None:
    url = postgres_server.url
    missing = make_table(url, [row for row in GOOD if row != ("to", 2)])
    r = audit(bootstrap, input_topic, url, missing, tmp_path)
    assert not r.clean
    assert figures(r) == (0, 1, 0, 0)
    assert r.output_records == len(GOOD) - 1
    examples = json.loads(r.report_json.read_text())["examples"]
    assert [(e["kind"], e["key"], e["value"]) for e in examples] == [("lost", "to", "2")]


def test_an_upsert_table_is_audited_against_its_final_rows(
    bootstrap: str, input_topic: str, postgres_server: LocalPostgres, tmp_path: Path
) -> None:
    # The upsert mode keeps one row per word: its final count. One word's row is stale.
    final = dict(GOOD)
    table = make_table(postgres_server.url, [*{**final, "be": final["be"] - 1}.items()])
    reference = tmp_path / "expected.jsonl"
    reference.write_text(
        "".join(json.dumps({"key": w, "value": str(n)}) + "\n" for w, n in final.items())
    )
    r = run_audit(
        input_topic=input_topic,
        bootstrap=bootstrap,
        check="expected",
        expected=reference,
        table=TableAudit(PostgresTable(postgres_server.url, table), key=("word",)),
        master="local[2]",
        report_dir=tmp_path / "report",
        progress=False,
    )
    assert (r.duplicates, r.lost, r.unexpected) == (0, 1, 1)
    assert r.output_records == r.expected_outputs == len(final)


def kstream_audit(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kstream", "audit", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_a_duplicated_row_is_counted(
    bootstrap: str, input_topic: str, postgres_server: LocalPostgres, tmp_path: Path
) -> None:
    url = postgres_server.url
    doubled = make_table(url, [*GOOD, ("be", 3)])
    r = audit(bootstrap, input_topic, url, doubled, tmp_path)
    assert not r.clean
    assert figures(r) == (1, 0, 0, 0)
    assert r.output_records == len(GOOD) + 1
    examples = json.loads(r.report_json.read_text())["examples"]
    assert [(e["kind"], e["key"], e["value"]) for e in examples] == [("duplicate", "be", "3")]


def test_an_unreachable_database_is_one_line_in_seconds(
    bootstrap: str, input_topic: str, tmp_path: Path
) -> None:
    # Port 9 (discard) is closed on this host: nothing answers there.
    started = time.monotonic()
    done = kstream_audit(
        "--input", input_topic, "--table", "t", "--postgres",
        "postgresql://postgres:secret@127.0.0.1:9/postgres", "--key", "word",
        "--bootstrap-servers", bootstrap, "--report-dir", str(tmp_path), timeout=FAIL_FAST_S,
    )  # fmt: skip
    assert time.monotonic() - started < FAIL_FAST_S
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("kstream: error: cannot read table t at 127.0.0.1:9/postgres: ")
    assert "secret" not in done.stderr


def test_a_missing_column_or_table_is_refused_before_spark(
    bootstrap: str, input_topic: str, postgres_server: LocalPostgres, tmp_path: Path
) -> None:
    url = postgres_server.url
    table = make_table(url, GOOD[:2])
    with pytest.raises(ConfigurationError, match=r"has no column cnt; its columns: word, count"):
        run_audit(
            input_topic=input_topic,
            bootstrap=bootstrap,
            table=TableAudit(PostgresTable(url, table), key=("word",), value=("cnt",)),
            report_dir=tmp_path,
            progress=False,
        )
    with pytest.raises(ConfigurationError, match=r"table nowhere at .* does not exist"):
        run_audit(
            input_topic=input_topic,
            bootstrap=bootstrap,
            table=TableAudit(PostgresTable(url, "nowhere"), key=("word",)),
            report_dir=tmp_path,
            progress=False,
        )


def test_postgres_urls_become_jdbc_urls() -> None:
    assert jdbc_url("postgresql://u:p%40ss@db.example:5433/app?sslmode=require") == (
        "jdbc:postgresql://db.example:5433/app?sslmode=require",
        {"user": "u", "password": "p@ss"},
    )
    assert jdbc_url("postgres://h") == ("jdbc:postgresql://h/postgres", {})
    assert redact("postgresql://u:secret@h:1/d") == "postgresql://u:***@h:1/d"
    with pytest.raises(ConfigurationError, match="not a PostgreSQL URL: mysql://u:\\*\\*\\*@h/d"):
        jdbc_url("mysql://u:secret@h/d")


@pytest.mark.extended
def test_the_table_audit_on_the_cluster_equals_local(
    bootstrap: str,
    input_topic: str,
    postgres_server: LocalPostgres,
    spark_cluster: SparkCluster,
    tmp_path: Path,
) -> None:
    # The JDBC driver must reach the cluster's executors through spark.jars.
    url = postgres_server.url
    table = make_table(url, [*GOOD, ("be", 3)])
    on_cluster = audit(
        bootstrap, input_topic, url, table, tmp_path / "cluster", spark_cluster.master_url
    )
    assert figures(on_cluster) == (1, 0, 0, 0)
    assert on_cluster.output_records == len(GOOD) + 1
