"""The Spark session of the end-to-end tests of state on Spark (`kstream.tools.state`).

A module-scoped local[2] session: one per test module, stopped at its end. A
session shared across modules would not survive them: a module that starts its
own session (an audit's, a cluster's) stops the one before it.

Use: ``from state_spark import spark as spark`` (the alias marks it a re-export,
so the linter takes it as used) and name ``spark`` as a test's argument.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from kstream.audit.jars import connector_jars
from kstream.audit.spark import spark_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """A local[2] Spark session for the test module (its log in a temporary directory)."""
    log = tmp_path_factory.mktemp("spark") / "spark.log"
    with spark_session("local[2]", connector_jars(), log, app_name="kstream-state") as session:
        yield session
