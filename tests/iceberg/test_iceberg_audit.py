"""`kstream audit --table NS.TABLE --iceberg --catalog-uri URL`: pyiceberg plans a real
Iceberg table's current snapshot, Spark reads the Parquet files it names, and the
table is audited against a real input topic.

The table a real run of the Iceberg sink's word count (tests/iceberg/wordcount_job.py)
wrote on worker processes is clean; a table as that word count leaves it (one
(word, count) row per update, appended in two snapshots), written here with pyiceberg
with one row twice and another missing, shows both, through the command line (exit
code 1); an empty table audits as zero rows. What this reading would get wrong
(positional and equality delete files, committed here in a delete manifest as other
writers commit them, a changed schema, a table off the local file system) and bad
input (no such table, no catalog, a missing column) is one line before Spark starts.
Cost: two audits in this process, one on the command line and a short word count
run: ~85 s on 2 cores at load average 5.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog import load_catalog
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestWriter,
    ManifestWriterV2,
)
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.update.snapshot import _FastAppendFiles
from pyiceberg.typedef import Record
from pyiceberg.types import StringType
from sink_wordcount import run_sink_wordcount
from table_audit import GOOD, input_topic_of_lines

from kstream.audit import AuditResult, run_audit
from kstream.audit.tables import IcebergTable, TableAudit
from kstream.errors import ConfigurationError
from kstream.testing import unique_name

pytestmark = [pytest.mark.broker, pytest.mark.audit, pytest.mark.iceberg]

JOB = f"{Path(__file__).with_name('wordcount_job.py')}:job"
ROWS = pa.schema([pa.field("word", pa.string()), pa.field("count", pa.int64(), nullable=False)])


@pytest.fixture(scope="module")
def input_topic(bootstrap: str) -> str:
    return input_topic_of_lines(bootstrap, "audit-iceberg-in")


def load(catalog: dict[str, str], name: str) -> Table:
    return load_catalog("default", **catalog).load_table(name)


def fill(catalog: dict[str, str], name: str, rows: list[tuple[str, int]]) -> None:
    """Append `rows` as the sink's word count would: in two snapshots."""
    half = len(rows) // 2
    for part in (rows[:half], rows[half:]):
        words, counts = zip(*part, strict=True)
        load(catalog, name).append(pa.table({"word": words, "count": counts}, schema=ROWS))


def audit(
    catalog: dict[str, str], table: str, src: str, where: Path, bootstrap: str
) -> AuditResult:
    return run_audit(
        input_topic=src,
        bootstrap=bootstrap,
        table=TableAudit(IcebergTable(catalog, table), key=("word",), value=("count",)),
        master="local[2]",
        report_dir=where,
        progress=False,
    )


def figures(r: AuditResult) -> tuple[int, int, int, int | None]:
    return (r.duplicates, r.lost, r.unexpected, r.out_of_order)


def cli(src: str, bootstrap: str, catalog: dict[str, str], table: str, *more: str) -> list[str]:
    cmd = [sys.executable, "-m", "kstream", "audit", "--input", src]
    cmd += ["--bootstrap-servers", bootstrap, "--table", table, "--iceberg"]
    return [*cmd, "--catalog-uri", catalog["uri"], "--key", "word", *more]


def test_the_table_of_a_real_word_count_run_is_clean_and_an_empty_one_has_no_rows(
    bootstrap: str, input_topic: str, catalog: dict[str, str], table: str, tmp_path: Path
) -> None:
    run = unique_name("icaudit")
    params = {"input": f"{run}-in", "catalog": catalog["uri"], "warehouse": catalog["warehouse"]}
    params |= {"table": table, "name": run}
    # The empty table first: created, never written (no snapshot).
    r = audit(catalog, table, input_topic, tmp_path / "empty", bootstrap)
    assert figures(r) == (0, len(GOOD), 0, 0)
    assert r.output_records == 0
    truth, _, messages = run_sink_wordcount(bootstrap, tmp_path, JOB, params, lines=200, seed=3)
    r = audit(catalog, table, params["input"], tmp_path / "report", bootstrap)
    assert r.clean, "\n".join(messages)
    assert figures(r) == (0, 0, 0, 0)
    assert r.input_records == 200
    assert r.output_records == r.expected_outputs == sum(truth.values())
    # Spark read exactly the rows pyiceberg reads (the sink appends several snapshots).
    assert r.output_records == len(load(catalog, table).scan().to_arrow())
    report = json.loads(r.report_json.read_text())
    assert report["verdict"] == "clean"
    assert report["output"]["topic"] == f"Iceberg table {table}"


def test_a_duplicated_row_and_a_missing_row_fail_the_command(
    bootstrap: str, input_topic: str, catalog: dict[str, str], table: str, tmp_path: Path
) -> None:
    # ("be", 3) is in both snapshots, as an epoch committed twice would leave it, and
    # ("to", 2) is in neither, as an epoch lost would.
    fill(catalog, table, [row for row in GOOD if row != ("to", 2)] + [("be", 3)])
    cmd = cli(input_topic, bootstrap, catalog, table, "--report-dir", str(tmp_path / "report"))
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines()[0] == (
        f"VIOLATIONS (running-count): {len(GOOD)} output records, {len(GOOD)} expected: "
        "duplicates=1 lost=1 unexpected=0 out_of_order=0"
    )
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    found = sorted((e["kind"], e["key"], e["value"]) for e in report["examples"])
    assert found == [("duplicate", "be", "3"), ("lost", "to", "2")]


class _DeleteManifestWriter(ManifestWriterV2):
    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


class _AppendDeleteFiles(_FastAppendFiles):
    """A snapshot adding delete files in a delete manifest (pyiceberg writes none itself)."""

    def new_manifest_writer(self, spec: PartitionSpec) -> ManifestWriter:
        out = self.new_manifest_output()
        return _DeleteManifestWriter(spec, self.schema(), out, self._snapshot_id, self._compression)


def add_delete_file(catalog: dict[str, str], name: str, rows: pa.Table, **how: object) -> None:
    """Commit the delete file of `rows` (`how`: its content, equality ids) in a snapshot."""
    table = load(catalog, name)
    path = table.location_provider().new_data_location(f"{unique_name('deletes')}.parquet")
    local = Path(path.removeprefix("file://"))
    pq.write_table(rows, local)
    deletes = DataFile.from_args(
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=Record(),
        record_count=len(rows),
        file_size_in_bytes=local.stat().st_size,
        **how,
    )
    deletes.spec_id = 0
    with (
        table.transaction() as tx,
        _AppendDeleteFiles(operation=Operation.DELETE, transaction=tx, io=table.io) as update,
    ):
        update.append_data_file(deletes)


def delete_first_row(catalog: dict[str, str], name: str) -> None:
    """Delete the first row of the table's first data file with a positional delete file."""
    target = next(iter(load(catalog, name).scan().plan_files())).file.file_path
    rows = pa.table({"file_path": [target], "pos": pa.array([0], pa.int64())})
    add_delete_file(catalog, name, rows, content=DataFileContent.POSITION_DELETES)
    assert len(load(catalog, name).scan().to_arrow()) == len(GOOD) - 1  # pyiceberg applies it


def delete_a_word(catalog: dict[str, str], name: str) -> None:
    """Delete the rows of one word with an equality delete file (on field 1, word)."""
    rows = pa.table({"word": ["be"]})
    add_delete_file(catalog, name, rows, content=DataFileContent.EQUALITY_DELETES, equality_ids=[1])


def moved_to_s3(catalog: dict[str, str], name: str, tmp_path: Path) -> str:
    """A second table registered with `name`'s metadata, its location in a bucket."""
    metadata = json.loads(Path(load(catalog, name).metadata_location[7:]).read_text())
    metadata["location"] = "s3://bucket/warehouse/db/on_s3"
    moved = tmp_path / "on_s3.metadata.json"
    moved.write_text(json.dumps(metadata))
    load_catalog("default", **catalog).register_table("db.on_s3", f"file://{moved}")
    return "db.on_s3"


def test_what_the_audit_cannot_read_is_one_line_before_spark_starts(
    bootstrap: str, input_topic: str, catalog: dict[str, str], table: str, tmp_path: Path
) -> None:
    fill(catalog, table, GOOD)
    on_s3 = moved_to_s3(catalog, table, tmp_path)
    changed = "db.changed"
    load_catalog("default", **catalog).create_table(changed, load(catalog, table).schema())
    with load(catalog, changed).update_schema() as update:
        update.add_column("note", StringType())
    deleted = "db.deleted"
    load_catalog("default", **catalog).create_table(deleted, load(catalog, table).schema())
    fill(catalog, deleted, GOOD)
    delete_first_row(catalog, deleted)
    equality = "db.equality"
    load_catalog("default", **catalog).create_table(equality, load(catalog, table).schema())
    fill(catalog, equality, GOOD)
    delete_a_word(catalog, equality)
    nowhere = {**catalog, "uri": f"sqlite:///{tmp_path / 'none.db'}"}
    refusals = {
        "no Iceberg table db.nope in the catalog": IcebergTable(catalog, "db.nope"),
        "no SQLite catalog at": IcebergTable(nowhere, table),
        "has no column n; its columns: word, count": IcebergTable(catalog, table),
        "its schema changed": IcebergTable(catalog, changed),
        "has delete files": IcebergTable(catalog, deleted),
        "has equality delete files": IcebergTable(catalog, equality),
        "is not on a local file system": IcebergTable(catalog, on_s3),
    }
    for message, bad in refusals.items():
        with pytest.raises(ConfigurationError, match=message) as refused:
            run_audit(
                input_topic=input_topic,
                bootstrap=bootstrap,
                table=TableAudit(bad, key=("word",), value=("n",)),
                master="local[1]",
                report_dir=tmp_path / "report",
                progress=False,
            )
        assert "\n" not in str(refused.value)
    assert not (tmp_path / "report").exists()
    assert not (tmp_path / "none.db").exists()


def test_the_command_line_refuses_an_unknown_table_in_one_line(
    bootstrap: str, input_topic: str, catalog: dict[str, str]
) -> None:
    cmd = cli(input_topic, bootstrap, catalog, "db.nope")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"kstream: error: no Iceberg table db.nope in the catalog {catalog['uri']}"
    ]
