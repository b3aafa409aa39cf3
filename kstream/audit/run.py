"""One audit from start to verdict: fix offsets, start Spark, check, write reports.

The output is a topic or a table (`kstream.audit.tables`); the input, when the
check reads one, is always a topic.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from kstream.audit import spark_checks
from kstream.audit.checks import Check, CheckResult, PartitionStats, load_expected
from kstream.audit.jars import connector_jars, require_pyspark
from kstream.audit.progress import StageProgress
from kstream.audit.report import AuditFacts, write_html, write_json
from kstream.audit.spark import TopicSnapshot, read_topic, snapshot, spark_session
from kstream.audit.tables import TableAudit
from kstream.errors import (
    ConfigurationError,
    DatabaseError,
    EnvironmentSetupError,
    KafkaUnavailableError,
)
from kstream.infra.spark_cluster import check_master

__all__ = ["AuditResult", "run_audit"]

#: The offset plot has about this many bins per partition: detail without noise.
OFFSET_BINS = 100


@dataclass(frozen=True, slots=True)
class AuditResult:
    """What one audit found, and where its reports are.

    `clean` is True exactly when every figure of the check is zero; the figures
    are defined in `kstream.audit.checks`.
    """

    clean: bool
    check: Check
    input_topic: str
    output_topic: str
    input_records: int
    output_records: int
    expected_outputs: int
    duplicates: int
    lost: int
    unexpected: int
    out_of_order: int | None
    report_json: Path
    report_html: Path
    seconds: float
    result: CheckResult
    input_partitions: tuple[PartitionStats, ...]
    output_partitions: tuple[PartitionStats, ...]

    @property
    def violations(self) -> int:
        return self.result.violations


def _check(name: str) -> Check:
    try:
        return Check(name)
    except ValueError:
        choices = ", ".join(c.value for c in Check)
        raise ConfigurationError(f"unknown check {name!r}; choose one of {choices}") from None


def _require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise EnvironmentSetupError(
            "the audit needs matplotlib, which is not installed: pip install 'kstream[audit]'"
        ) from None


def run_audit(
    *,
    input_topic: str,
    output_topic: str | None = None,
    bootstrap: str,
    check: str = "running-count",
    master: str = "local[*]",
    report_dir: Path,
    progress: bool = True,
    expected: Path | None = None,
    table: TableAudit | None = None,
) -> AuditResult:
    """Audit `output_topic` against `input_topic` with Spark and write both reports.

    Reads the committed records of both topics up to their last stable offsets at
    the start (see `kstream.audit.spark`), runs `check` ("running-count",
    "lineage", or "expected" against the reference output in the JSON Lines file
    `expected`, see `kstream.audit.checks.load_expected`), writes ``report.json``,
    ``report.html`` and Spark's own log ``spark.log`` into `report_dir` (created
    if needed) and returns the figures.

    With `table` instead of `output_topic`, the output audited is that table's
    rows (see `kstream.audit.tables`), in one partition numbered by key and value;
    the lineage check needs headers, which rows do not have.

    Violations are a result, not an error. Raises `ConfigurationError` for an
    unknown check or a missing topic, `KafkaUnavailableError` when the cluster
    does not answer, `EnvironmentSetupError` when pyspark, matplotlib, Java or the
    connector jars are missing, `DatabaseError` when a table's database does not
    answer.
    """
    kind = _check(check)
    if (output_topic is None) == (table is None):
        raise ConfigurationError("audit either an output topic or a table, exactly one")
    if table is not None and kind is Check.LINEAGE:
        raise ConfigurationError(
            "the lineage check reads the kstream.src.* headers, which a table's rows do not "
            "have; audit a table with --check running-count or --check expected"
        )
    if (kind is Check.EXPECTED) != (expected is not None):
        raise ConfigurationError(
            "--expected FILE goes with --check expected, and only with it"
            if expected is not None
            else "--check expected needs the reference output: --expected FILE (JSON Lines)"
        )
    reference = load_expected(expected) if expected is not None else []  # fails before Spark
    require_pyspark()
    _require_matplotlib()
    check_master(master)  # an unreachable cluster: one line in seconds, not Spark's retries
    if table is not None:
        table = table.resolve()  # an unreachable database, a missing column: one line
        output_name = table.reader.label
    else:
        assert output_topic is not None
        output_name = output_topic
    report_dir.mkdir(parents=True, exist_ok=True)
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    started = time.monotonic()
    with StageProgress(progress) as bar:
        bar.step("fixing the offsets to audit")
        source = snapshot(bootstrap, input_topic)
        sink = snapshot(bootstrap, output_topic) if output_topic is not None else None
        bar.step("resolving Spark's Kafka connector")
        jars = connector_jars(log=bar.step)
        if table is not None:
            jars += table.reader.jars(bar.step)
        bar.step(f"starting Spark ({master})")
        config = table.reader.spark_config() if table is not None else {}
        with spark_session(master, jars, report_dir / "spark.log", config=config) as spark:
            bar.watch(spark.sparkContext)
            column = "value" if kind is Check.RUNNING_COUNT else "key"
            inputs = read_topic(spark, bootstrap, source).select("partition", "offset", column)
            # Read once, used twice (statistics, then the check).
            inputs = inputs.cache()
            try:
                if table is not None:
                    bar.step(f"reading {output_name}")
                    # Read once: every pass of the check sees the same rows.
                    outputs = table.records(spark).cache()
                    sink = TopicSnapshot(output_name, {0: (0, outputs.count())})
                else:
                    assert sink is not None
                    outputs = read_topic(spark, bootstrap, sink, headers=kind is Check.LINEAGE)
                width = max(1, math.ceil(max(source.max_end, sink.max_end) / OFFSET_BINS))
                bar.step(f"reading {input_topic}")
                input_partitions = spark_checks.input_stats(inputs, input_topic, source.ranges)
                bar.step(f"checking {output_name} ({kind.value})")
                if kind is Check.EXPECTED:
                    assert expected is not None
                    bar.step(f"reading {len(reference):,} expected records from {expected}")
                    wanted = (
                        spark.read.schema("key string, value string")
                        .option("mode", "FAILFAST")
                        .json(str(expected))
                    )
                    result, output_partitions = spark_checks.expected_output(
                        wanted,
                        outputs,
                        output_topic=output_name,
                        ranges=sink.ranges,
                        bin_width=width,
                    )
                else:
                    audit = (
                        spark_checks.running_count
                        if kind is Check.RUNNING_COUNT
                        else spark_checks.lineage
                    )
                    result, output_partitions = audit(
                        inputs,
                        outputs,
                        input_topic=input_topic,
                        output_topic=output_name,
                        ranges=sink.ranges,
                        bin_width=width,
                    )
            except Exception as exc:
                _raise_if_kafka(exc, bootstrap)
                if table is not None:
                    _raise_if_database(exc, table)
                raise
        bar.step("writing reports")
        facts = AuditFacts(
            input_topic=input_topic,
            output_topic=output_name,
            bootstrap=bootstrap,
            master=master,
            started_at=started_at,
            seconds=time.monotonic() - started,
            result=result,
            input_partitions=input_partitions,
            output_partitions=output_partitions,
            bin_width=width,
        )
        report_json = write_json(facts, report_dir / "report.json")
        report_html = write_html(facts, report_dir / "report.html")
    return AuditResult(
        clean=result.clean,
        check=kind,
        input_topic=input_topic,
        output_topic=output_name,
        input_records=facts.input_records,
        output_records=facts.output_records,
        expected_outputs=result.expected,
        duplicates=result.duplicates,
        lost=result.lost,
        unexpected=result.unexpected,
        out_of_order=result.out_of_order,
        report_json=report_json,
        report_html=report_html,
        seconds=facts.seconds,
        result=result,
        input_partitions=input_partitions,
        output_partitions=output_partitions,
    )


def _raise_if_kafka(exc: Exception, bootstrap: str) -> None:
    """Turn a Spark failure caused by Kafka (broker gone, timeout) into one line."""
    text = str(exc)
    if "org.apache.kafka" in text:
        cause = next(
            (ln.strip() for ln in text.splitlines() if "org.apache.kafka" in ln), text[:200]
        )
        raise KafkaUnavailableError(f"Spark could not read from {bootstrap}: {cause}") from None


def _raise_if_database(exc: Exception, table: TableAudit) -> None:
    """Turn a Spark failure caused by the table's database into one line."""
    text = str(exc)
    # PostgreSQL's JDBC driver, Delta's connector ([DELTA_...] error classes), or a
    # data file gone since the read was planned (an Iceberg snapshot expired meanwhile).
    markers = ("org.postgresql", "SQLException", "sql.delta.", "[DELTA_", "FileNotFoundException")
    if any(m in text for m in markers):
        cause = next((ln.strip() for ln in text.splitlines() if "Exception" in ln), text[:200])
        raise DatabaseError(f"Spark could not read {table.reader.label}: {cause}") from None
