"""One audit from start to verdict: fix offsets, start Spark, check, write reports."""

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
from kstream.audit.spark import read_topic, snapshot, spark_session
from kstream.errors import ConfigurationError, EnvironmentSetupError, KafkaUnavailableError

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
    output_topic: str,
    bootstrap: str,
    check: str = "running-count",
    master: str = "local[*]",
    report_dir: Path,
    progress: bool = True,
    expected: Path | None = None,
) -> AuditResult:
    """Audit `output_topic` against `input_topic` with Spark and write both reports.

    Reads the committed records of both topics up to their last stable offsets at
    the start (see `kstream.audit.spark`), runs `check` ("running-count",
    "lineage", or "expected" against the reference output in the JSON Lines file
    `expected`, see `kstream.audit.checks.load_expected`), writes ``report.json``,
    ``report.html`` and Spark's own log ``spark.log`` into `report_dir` (created
    if needed) and returns the figures.

    Violations are a result, not an error. Raises `ConfigurationError` for an
    unknown check or a missing topic, `KafkaUnavailableError` when the cluster
    does not answer, `EnvironmentSetupError` when pyspark, matplotlib, Java or the
    connector jars are missing.
    """
    kind = _check(check)
    if (kind is Check.EXPECTED) != (expected is not None):
        raise ConfigurationError(
            "--expected FILE goes with --check expected, and only with it"
            if expected is not None
            else "--check expected needs the reference output: --expected FILE (JSON Lines)"
        )
    reference = load_expected(expected) if expected is not None else []  # fails before Spark
    require_pyspark()
    _require_matplotlib()
    report_dir.mkdir(parents=True, exist_ok=True)
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    started = time.monotonic()
    with StageProgress(progress) as bar:
        bar.step("fixing the offsets to audit")
        source = snapshot(bootstrap, input_topic)
        sink = snapshot(bootstrap, output_topic)
        bar.step("resolving Spark's Kafka connector")
        jars = connector_jars(log=bar.step)
        bar.step(f"starting Spark ({master})")
        with spark_session(master, jars, report_dir / "spark.log") as spark:
            bar.watch(spark.sparkContext)
            width = max(1, math.ceil(max(source.max_end, sink.max_end) / OFFSET_BINS))
            column = "value" if kind is Check.RUNNING_COUNT else "key"
            inputs = read_topic(spark, bootstrap, source).select("partition", "offset", column)
            outputs = read_topic(spark, bootstrap, sink, headers=kind is Check.LINEAGE)
            # Read once, used twice (statistics, then the check).
            inputs = inputs.cache()
            try:
                bar.step(f"reading {input_topic}")
                input_partitions = spark_checks.input_stats(inputs, input_topic, source.ranges)
                bar.step(f"checking {output_topic} ({kind.value})")
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
                        output_topic=output_topic,
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
                        output_topic=output_topic,
                        ranges=sink.ranges,
                        bin_width=width,
                    )
            except Exception as exc:
                _raise_if_kafka(exc, bootstrap)
                raise
        bar.step("writing reports")
        facts = AuditFacts(
            input_topic=input_topic,
            output_topic=output_topic,
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
        output_topic=output_topic,
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
