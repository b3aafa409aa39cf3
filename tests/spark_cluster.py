"""The Spark standalone cluster fixture: a master and two workers, started when used.

Session-scoped: a start costs ~10 s (three JVMs), paid once. The cluster gets a
free port (its state directory, under the cache, is named by it) and is stopped
at the end of the session, whatever the tests did to it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from netns import free_port

from kstream.infra.spark_cluster import SparkCluster


@pytest.fixture(scope="session")
def spark_cluster() -> Iterator[SparkCluster]:
    """A running local standalone cluster of two workers (`SparkCluster.master_url`)."""
    cluster = SparkCluster(free_port("127.0.0.1"), workers=2)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
