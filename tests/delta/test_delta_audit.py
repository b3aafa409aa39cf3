"""`kstream audit --table PATH --delta`: Spark reads a real Delta table with Delta's
own connector and audits it against a real input topic.

The table a real run of the Delta sink's word count (tests/delta/wordcount_job.py,
the job of docs/guide/delta-spark.md) wrote on worker processes is clean; a table as
that word count leaves it (one (word, count) row per update, appended in two
commits), written here with deltalake with one row twice and another missing, shows
both. Bad input (no Delta table at the path, a missing column, an object-store URI)
is one line before Spark starts. Cost: a plain session, then two small audits in
this process and a short word count run: 155 s on 2 cores at load average 11-14
(a test suite running beside), most of it Spark's start and Delta's first read.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from sink_wordcount import run_sink_wordcount
from table_audit import GOOD, input_topic_of_lines

from kstream.audit import AuditResult, run_audit
from kstream.audit.tables import DeltaLakeTable, TableAudit
from kstream.errors import ConfigurationError
from kstream.testing import unique_name

pytestmark = [pytest.mark.broker, pytest.mark.audit]

JOB = f"{Path(__file__).with_name('wordcount_job.py')}:job"


@pytest.fixture(scope="module")
def input_topic(bootstrap: str) -> str:
    return input_topic_of_lines(bootstrap, "audit-delta-in")


@pytest.fixture(scope="module", autouse=True)
def jvm_started_without_delta(tmp_path_factory: pytest.TempPathFactory) -> None:
    """A Spark session without Delta's jars and settings first, as earlier tests of a
    whole run leave one: pyspark reuses this process's JVM, whose driver then lacks
    Delta's classes until the audit's session adds them."""
    from kstream.audit.jars import connector_jars
    from kstream.audit.spark import spark_session

    log = tmp_path_factory.mktemp("plain-spark") / "spark.log"
    with spark_session("local[1]", connector_jars(), log) as spark:
        assert spark.range(3).count() == 3


def make_table(where: Path, rows: list[tuple[str, int]]) -> Path:
    """A Delta table as the sink's word count leaves it: appended in two commits."""
    half = len(rows) // 2
    for part in (rows[:half], rows[half:]):
        words, counts = zip(*part, strict=True)
        batch = pa.table({"word": list(words), "count": pa.array(counts, pa.int64())})
        write_deltalake(where, batch, mode="append")
    return where


def audit(src: str, table: str | Path, where: Path, bootstrap: str) -> AuditResult:
    return run_audit(
        input_topic=src,
        bootstrap=bootstrap,
        table=TableAudit(DeltaLakeTable(str(table)), key=("word",), value=("count",)),
        master="local[2]",
        report_dir=where,
        progress=False,
    )


def figures(r: AuditResult) -> tuple[int, int, int, int | None]:
    return (r.duplicates, r.lost, r.unexpected, r.out_of_order)


def test_a_duplicated_row_and_a_missing_row_are_counted(
    bootstrap: str, input_topic: str, tmp_path: Path
) -> None:
    # ("be", 3) is in both commits, as an epoch committed twice would leave it, and
    # ("to", 2) is in neither, as an epoch lost would.
    rows = [row for row in GOOD if row != ("to", 2)] + [("be", 3)]
    table = make_table(tmp_path / "word_counts", rows)
    r = audit(input_topic, f"file://{table}", tmp_path / "report", bootstrap)
    assert not r.clean
    assert figures(r) == (1, 1, 0, 0)
    assert r.output_records == len(GOOD)
    examples = json.loads(r.report_json.read_text())["examples"]
    found = sorted((e["kind"], e["key"], e["value"]) for e in examples)
    assert found == [("duplicate", "be", "3"), ("lost", "to", "2")]


def test_the_table_of_a_real_word_count_run_is_clean(bootstrap: str, tmp_path: Path) -> None:
    run = unique_name("dlaudit")
    table = tmp_path / "word_counts"
    params = {"input": f"{run}-in", "table": str(table), "name": run}
    truth, _, messages = run_sink_wordcount(bootstrap, tmp_path, JOB, params, lines=200, seed=1)
    r = audit(params["input"], table, tmp_path / "report", bootstrap)
    assert r.clean, "\n".join(messages)
    assert figures(r) == (0, 0, 0, 0)
    assert r.input_records == 200
    assert r.output_records == r.expected_outputs == sum(truth.values())
    report = json.loads(r.report_json.read_text())
    assert report["verdict"] == "clean"
    assert report["output"]["topic"] == f"Delta table {table}"


def test_bad_tables_are_one_line_before_spark_starts(
    bootstrap: str, input_topic: str, tmp_path: Path
) -> None:
    table = make_table(tmp_path / "word_counts", GOOD)
    (tmp_path / "empty").mkdir()
    refusals = {
        "no Delta table at": TableAudit(DeltaLakeTable(str(tmp_path / "empty")), key=("word",)),
        "has no column n; its columns: word, count": TableAudit(
            DeltaLakeTable(str(table)), key=("word",), value=("n",)
        ),
        "the audit reads Delta tables on a local file system": TableAudit(
            DeltaLakeTable("s3://bucket/word_counts"), key=("word",)
        ),
    }
    for message, bad in refusals.items():
        with pytest.raises(ConfigurationError, match=message):
            run_audit(
                input_topic=input_topic,
                bootstrap=bootstrap,
                table=bad,
                master="local[1]",
                report_dir=tmp_path / "report",
                progress=False,
            )
    assert not (tmp_path / "report").exists()


def test_the_command_line_refuses_a_directory_without_a_delta_table(
    bootstrap: str, input_topic: str, tmp_path: Path
) -> None:
    cmd = [sys.executable, "-m", "kstream", "audit", "--input", input_topic]
    cmd += ["--bootstrap-servers", bootstrap, "--table", str(tmp_path), "--delta", "--key", "w"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [f"kstream: error: no Delta table at {tmp_path}"]
