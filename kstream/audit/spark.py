"""The audit's Spark session and how it reads a topic.

A topic is read as a fixed snapshot: before Spark starts, the earliest offset
and the last stable offset (LSO) of every partition are fetched with a
``read_committed`` consumer, and Spark's Kafka source reads exactly
``[earliest, LSO)`` with ``kafka.isolation.level=read_committed``. Records
committed while the audit runs are therefore not audited, and an open
transaction at the end of the log holds the snapshot back rather than being
half-read. Offsets inside the range that hold no committed record (transaction
markers, aborted records) are simply absent from the DataFrame.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from kstream.errors import ConfigurationError, EnvironmentSetupError, KafkaUnavailableError
from kstream.infra.admin import Admin
from kstream.infra.client_settings import client_config, security_settings, spark_options
from kstream.infra.paths import deploy_dir

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["CONNECT_TIMEOUT_S", "TopicSnapshot", "read_topic", "snapshot", "spark_session"]

#: How long the cluster gets to answer before the audit gives up: a healthy cluster
#: answers metadata requests in milliseconds, and a typo should fail fast.
CONNECT_TIMEOUT_S = 10.0
#: Memory of the local driver JVM (which also runs the executors in local mode):
#: enough to cache the flagged output of a 10 M record audit.
LOCAL_DRIVER_MEMORY = "4g"
#: How long a cluster master gets to give the session its first executor: a
#: master without a (free) worker would otherwise leave every job waiting forever.
EXECUTOR_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class TopicSnapshot:
    """The fixed offset range ``[start, end)`` of every partition of `topic`."""

    topic: str
    ranges: dict[int, tuple[int, int]]

    @property
    def records_upper_bound(self) -> int:
        return sum(end - start for start, end in self.ranges.values())

    @property
    def max_end(self) -> int:
        return max((end for _, end in self.ranges.values()), default=0)


def snapshot(bootstrap: str, topic: str) -> TopicSnapshot:
    """Fix the range to audit: earliest offset and last stable offset of each partition.

    Raises `KafkaUnavailableError` when the cluster does not answer within
    `CONNECT_TIMEOUT_S` and `ConfigurationError` when the topic does not exist.
    """
    admin = Admin(bootstrap)
    admin.check_reachable(CONNECT_TIMEOUT_S)
    partitions = admin.partitions(topic)
    if partitions is None:
        raise ConfigurationError(f"topic {topic} does not exist on {bootstrap}")
    consumer = Consumer(
        client_config(
            bootstrap,
            {
                "group.id": "kstream-audit-offsets",
                "enable.auto.commit": False,
                # The high watermark a read_committed consumer sees is the LSO.
                "isolation.level": "read_committed",
            },
        )
    )
    try:
        ranges = {}
        for p in range(partitions):
            ranges[p] = consumer.get_watermark_offsets(
                TopicPartition(topic, p), timeout=CONNECT_TIMEOUT_S, cached=False
            )
    except KafkaException as exc:
        raise KafkaUnavailableError(
            f"cannot read the offsets of {topic} from {bootstrap}: {exc.args[0]}"
        ) from None
    finally:
        consumer.close()
    return TopicSnapshot(topic, {p: (int(lo), int(hi)) for p, (lo, hi) in ranges.items()})


def read_topic(
    spark: SparkSession, bootstrap: str, snap: TopicSnapshot, *, headers: bool = False
) -> DataFrame:
    """The committed records of `snap` as a DataFrame of Spark's Kafka source.

    Columns: ``partition``, ``offset``, ``key``, ``value`` (and ``headers`` when asked).
    """
    offsets = {str(p): start for p, (start, _) in snap.ranges.items()}
    ends = {str(p): end for p, (_, end) in snap.ranges.items()}
    reader = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        # The same security settings as every other client, in the Java client's names.
        .options(**spark_options(security_settings()))
        .option("assign", json.dumps({snap.topic: sorted(snap.ranges)}))
        .option("startingOffsets", json.dumps({snap.topic: offsets}))
        .option("endingOffsets", json.dumps({snap.topic: ends}))
        # The Java client's default is read_uncommitted: aborted records would count.
        .option("kafka.isolation.level", "read_committed")
        # Split big partitions so every core reads, also from a one-partition topic.
        .option("minPartitions", str(spark.sparkContext.defaultParallelism))
        .option("includeHeaders", "true" if headers else "false")
    )
    columns = ["partition", "offset", "key", "value", *(["headers"] if headers else [])]
    return reader.load().select(*columns)


def _local_cores(master: str) -> int | None:
    """Cores of a ``local``/``local[N]``/``local[*]`` master; None for a cluster."""
    match = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\d+)?\])?", master)
    if match is None:
        return None
    n = match.group(1)
    if n is None:
        return 1  # plain `local`: one thread
    return (os.cpu_count() or 1) if n == "*" else int(n)


@contextlib.contextmanager
def _jvm_output_to(log_file: Path) -> Iterator[None]:
    """Point this process's stdout and stderr at `log_file` while the JVM is launched.

    The JVM inherits the descriptors, so Spark's console output (JVM warnings,
    log lines) goes to the file for the JVM's whole life, while Python's own
    stdout and stderr are restored at once.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with log_file.open("ab") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)


def _await_executor(spark: SparkSession, master: str, timeout_s: float) -> None:
    """Return once an executor has registered; `EnvironmentSetupError` after `timeout_s`."""
    # The driver's own block manager is one entry of the executors' memory status.
    status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus
    deadline = time.monotonic() + timeout_s
    while status().size() < 2:
        if time.monotonic() > deadline:
            raise EnvironmentSetupError(
                f"Spark master {master} gave no executor within {timeout_s:.0f} s: it has no "
                "live worker, or none with a free core and spark.executor.memory free"
            )
        time.sleep(0.2)


#: The jars this process's JVM started with (its driver's class path).
_LAUNCH_JARS: set[Path] = set()
#: The class loader of the jars added after the JVM started (a py4j handle to a
#: Spark ``MutableURLClassLoader``), created once and kept for the process's life,
#: and the jars it holds.
_LATE_LOADER: Any = None
_LATE_JARS: set[Path] = set()


def _late_jar_loader(late: Sequence[Path]) -> None:
    """Make one process-wide class loader hold `late` and set it as this thread's.

    Set before the session is created, it becomes the parent of the session's own
    class loaders (its SQL extensions, its jars, its local executors), so every
    session of this JVM sees the same classes. A library whose classes register
    JVM-wide state when they load cannot be loaded twice: a second copy of Delta's
    classes, from a later session's ``ADD JAR``, fails with ``Config entry
    spark.databricks.delta... already registered`` (``ExceptionInInitializerError``).
    """
    from pyspark import SparkContext

    global _LATE_LOADER
    jvm, gateway = SparkContext._jvm, SparkContext._gateway
    assert jvm is not None  # only called once a JVM runs
    assert gateway is not None
    thread = jvm.java.lang.Thread.currentThread()
    if _LATE_LOADER is None:
        urls = gateway.new_array(jvm.java.net.URL, 0)
        _LATE_LOADER = jvm.org.apache.spark.util.MutableURLClassLoader(
            urls, thread.getContextClassLoader()
        )
    for jar in late:
        if jar not in _LATE_JARS:
            _LATE_LOADER.addURL(jvm.java.io.File(str(jar)).toURI().toURL())
            _LATE_JARS.add(jar)
    thread.setContextClassLoader(_LATE_LOADER)


@contextlib.contextmanager
def spark_session(
    master: str,
    jars: Sequence[Path],
    log_file: Path,
    *,
    app_name: str = "kstream-audit",
    executor_timeout_s: float = EXECUTOR_TIMEOUT_S,
    config: Mapping[str, str] | None = None,
) -> Iterator[SparkSession]:
    """A Spark session on `master` with the Kafka connector `jars`; stopped on exit.

    `config` adds session settings, e.g. what a table reader needs.

    Spark's console output goes to `log_file`. The session's Python workers run
    this interpreter (``PYSPARK_PYTHON``, unless set). Raises `EnvironmentSetupError`
    (one line) when Spark cannot start, e.g. without Java or with a bad master URL,
    and when a ``spark://`` master gives no executor within `executor_timeout_s`
    (no worker, or none with free resources), rather than letting jobs wait forever.

    pyspark keeps one JVM per Python process, and ``spark.jars`` reaches the
    driver's class path only when that JVM starts: a later session's jars went
    to the executors alone, so its driver could not load e.g. the PostgreSQL
    JDBC driver (``ClassNotFoundException``). Jars the JVM did not start with
    are added to the driver as well: to one class loader kept for the process's
    life and made the parent of the session's (so its SQL extensions load, and
    Delta's classes, which register JVM-wide settings, load once), and with Spark
    SQL's ``ADD JAR``. Known limit: in
    a JVM started without the Kafka connector jars, the second session that
    adds them fails in its Kafka reads (``NoClassDefFoundError``); run such
    audits in a process of their own (``kstream audit`` does).
    """
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    log4j = deploy_dir() / "spark" / "log4j2.properties"
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.jars", ",".join(str(j) for j in jars))
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={log4j.as_uri()}")
        # The audit shows its own progress; Spark's console bar would interleave with it.
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
    )
    for name, value in (config or {}).items():
        builder = builder.config(name, value)
    cores = _local_cores(master)
    if cores is not None:
        # 200 shuffle partitions (Spark's default, sized for clusters) means 200 tiny
        # tasks per stage on a laptop; a few per core keeps every core busy.
        builder = builder.config("spark.sql.shuffle.partitions", str(max(2, 4 * cores)))
        builder = builder.config("spark.driver.memory", LOCAL_DRIVER_MEMORY)
    log_file.parent.mkdir(parents=True, exist_ok=True)
    jvm_running = SparkContext._gateway is not None
    late = [j for j in jars if jvm_running and j not in _LAUNCH_JARS]
    if late:
        _late_jar_loader(late)
    try:
        with _jvm_output_to(log_file):
            spark = builder.getOrCreate()
    except Exception as exc:  # pyspark raises several unrelated types here
        first = str(exc).strip().splitlines()[:1] or [type(exc).__name__]
        raise EnvironmentSetupError(
            f"Spark could not start on master {master}: {first[0]} (see {log_file})"
        ) from None
    spark.sparkContext.setLogLevel("ERROR")
    thread = spark._jvm.java.lang.Thread.currentThread()  # type: ignore[union-attr]
    loader = thread.getContextClassLoader()
    if not jvm_running:
        _LAUNCH_JARS.update(jars)
    for jar in late:
        # Sets this (py4j-pinned) thread's class loader to the session's, with the jar.
        quoted = str(jar).replace("'", "\\'")
        spark.sql(f"ADD JAR '{quoted}'")
    try:
        if master.startswith("spark://"):
            _await_executor(spark, master, executor_timeout_s)
        yield spark
    finally:
        spark.stop()
        # The next session's executors start from this thread's loader: one holding
        # this session's classes would hand them over, bound to a stopped context.
        thread.setContextClassLoader(loader)
