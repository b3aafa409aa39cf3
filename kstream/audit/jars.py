"""The classpath of Spark's Kafka source, resolved with mvn before Spark starts.

`deploy/spark/pom.xml` names ``spark-sql-kafka-0-10`` at `SPARK_VERSION` and
excludes everything pyspark already ships; `connector_jars` copies what remains
into ``<cache>/spark-kafka-<version>/libs`` once and returns the four jars that
go into ``spark.jars``. Nothing is downloaded while Spark runs (no
``spark.jars.packages``), so an audit works offline once the cache is filled.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import metadata
from pathlib import Path

from kstream.errors import DependencyResolutionError, EnvironmentSetupError
from kstream.infra.maven import resolve_maven_classpath
from kstream.infra.paths import cache_dir, deploy_dir

__all__ = ["CONNECTOR_ARTIFACTS", "SPARK_VERSION", "connector_jars", "require_pyspark"]

#: The Spark release the audit runs: equal to the `audit` extra's pyspark pin and to
#: `spark.version` in deploy/spark/pom.xml (Maven Central serves the connector for it).
SPARK_VERSION = "4.2.0"

#: Artifacts that must be on Spark's classpath for ``format("kafka")``; every other
#: dependency of the connector is already in pyspark's own jars/ folder.
CONNECTOR_ARTIFACTS = (
    "spark-sql-kafka-0-10_2.13",
    "spark-token-provider-kafka-0-10_2.13",
    "kafka-clients",
    "commons-pool2",
)

INSTALL_HINT = "pip install 'kstream[audit]'"


def require_pyspark() -> str:
    """Return the installed pyspark version; raise one line if it is missing or not ours.

    The connector jars are compiled against one Spark release: a different pyspark
    fails at run time with linkage errors, so it is refused here instead.
    """
    try:
        version = metadata.version("pyspark")
    except metadata.PackageNotFoundError:
        raise EnvironmentSetupError(
            f"the audit needs pyspark, which is not installed: {INSTALL_HINT}"
        ) from None
    if version != SPARK_VERSION:
        raise EnvironmentSetupError(
            f"the audit needs pyspark {SPARK_VERSION}, found {version}: {INSTALL_HINT}"
        )
    return version


def connector_jars(
    version: str = SPARK_VERSION, log: Callable[[str], None] = lambda _: None
) -> list[Path]:
    """Resolve (once) and return the local jars of Spark's Kafka source for `version`."""
    libs = cache_dir() / f"spark-kafka-{version}" / "libs"
    jars = resolve_maven_classpath(
        deploy_dir() / "spark" / "pom.xml",
        libs,
        properties={"spark.version": version},
        what=f"Spark {version} Kafka connector",
        log=log,
    )
    chosen: list[Path] = []
    for artifact in CONNECTOR_ARTIFACTS:
        # `<artifact>-<version>.jar`: the version starts with a digit, which keeps
        # `spark-sql-kafka-0-10_2.13` from matching `spark-sql-kafka-0-10_2.13-tests`.
        found = [j for j in jars if j.name.startswith(f"{artifact}-") and _versioned(j, artifact)]
        if len(found) != 1:
            raise DependencyResolutionError(
                f"expected one {artifact} jar in {libs}, found {len(found)}; "
                f"delete {libs.parent} to resolve again"
            )
        chosen.append(found[0])
    return chosen


def _versioned(jar: Path, artifact: str) -> bool:
    rest = jar.name[len(artifact) + 1 :]
    return rest[:1].isdigit() and rest.endswith(".jar")
