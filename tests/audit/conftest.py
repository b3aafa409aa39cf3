"""Fixtures of the Spark audit tests: a Spark session for checks on in-memory data."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from kstream.audit.jars import connector_jars
from kstream.audit.spark import spark_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """A local[2] session with the Kafka connector, as the audit itself starts it.

    Module-scoped: `run_audit` stops the session it used, so modules that call it
    must not share this one.
    """
    log = Path(tmp_path_factory.mktemp("spark")) / "spark.log"
    with spark_session("local[2]", connector_jars(), log) as session:
        from pyspark.sql import functions as sf

        # pyspark's first column function imports IPython when it is installed, and
        # IPython's completer raises the recursion limit, which hypothesis reports as
        # an error if it happens inside a test: let it happen here.
        sf.split(sf.col("warm-up"), " ")
        # Tests feed tens of rows: two shuffle partitions keep each job under a second.
        session.conf.set("spark.sql.shuffle.partitions", "2")
        yield session
