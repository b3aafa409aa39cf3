"""Apache Flink as a Nexmark contender (``flink-eos``): installed once, started per query.

Flink comes from PyPI (``apache-flink``, with ``apache-flink-libraries``: Flink's
whole distribution, ~830 MB installed with its Python dependencies) into its
own virtualenv in kstream's cache, like the word-count suite's Quix Streams;
its Kafka SQL connector from Maven Central with mvn (`flink/pom.xml`), as the
local broker's jars are. Each query then runs as `benchmarks.nexmark.flink_job`
in that virtualenv: a PyFlink `TableEnvironment` whose mini-cluster runs in the
JVM it starts, with the parallelism of kstream's workers and kstream's
checkpoint interval, exactly-once (`flink_sql`).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from benchmarks.contenders import ContenderUnavailableError, install_peer
from kstream.errors import KStreamError
from kstream.infra.maven import resolve_maven_classpath
from kstream.infra.paths import cache_dir

__all__ = ["FLINK_VERSION", "command", "connector_jar", "flink_python", "prepare"]

HERE = Path(__file__).resolve().parent
#: PyPI's apache-flink (and apache-flink-libraries, its dependency), Flink 2.2.
FLINK_VERSION = "2.2.1"
#: flink-sql-connector-kafka's version for Flink 2.2 (`flink/pom.xml`).
CONNECTOR_VERSION = "5.0.0-2.2"


def _home() -> Path:
    return cache_dir() / "bench" / f"flink-{FLINK_VERSION}"


def flink_python() -> Path:
    """The interpreter of the Flink virtualenv."""
    return _home() / "venv" / "bin" / "python"


def connector_jar() -> Path:
    return _home() / "libs" / f"flink-sql-connector-kafka-{CONNECTOR_VERSION}.jar"


def prepare(say: Callable[[str], None]) -> None:
    """Install Flink and its Kafka connector once; `ContenderUnavailableError` (one line)
    without Java, PyPI or Maven Central."""
    if shutil.which("java") is None:
        raise ContenderUnavailableError("`java` is not on PATH (Flink needs Java 11+)")
    try:
        resolve_maven_classpath(
            HERE / "flink" / "pom.xml",
            connector_jar().parent,
            properties={"flink.kafka.version": CONNECTOR_VERSION},
            what=f"Flink's Kafka SQL connector {CONNECTOR_VERSION}",
            log=say,
        )
    except KStreamError as exc:
        raise ContenderUnavailableError(str(exc)) from exc
    install_peer(flink_python(), f"apache-flink=={FLINK_VERSION}", say, "~830 MB")


def command(
    *, parallelism: int, interval_s: float
) -> Callable[[str, str, str, str, Path], list[str]]:
    """The contender's command line for (bootstrap, query, input, output, scratch)."""

    def argv(bootstrap: str, query: str, source: str, output: str, scratch: Path) -> list[str]:
        return [
            str(flink_python()), "-m", "benchmarks.nexmark.flink_job", query, bootstrap,
            source, output, str(scratch), str(connector_jar()), str(parallelism),
            f"{interval_s:g}",
        ]  # fmt: skip

    return argv
