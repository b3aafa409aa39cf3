"""A ``spark://`` master without workers fails the session with one line, in seconds,
rather than leaving every job waiting for executors forever."""

from __future__ import annotations

from pathlib import Path

import pytest
from netns import free_port

from kstream.audit.spark import spark_session
from kstream.errors import EnvironmentSetupError
from kstream.infra.spark_cluster import SparkCluster

pytestmark = [pytest.mark.e2e, pytest.mark.audit]


def test_a_master_without_workers_is_one_line_after_the_executor_timeout(tmp_path: Path) -> None:
    cluster = SparkCluster(free_port("127.0.0.1"), workers=0)  # a master alone
    cluster.start()
    try:
        log = tmp_path / "spark.log"
        with (
            pytest.raises(EnvironmentSetupError) as refused,
            spark_session(cluster.master_url, [], log, executor_timeout_s=5),
        ):
            pytest.fail("a session without executors was handed out")
        message = str(refused.value)
        assert message == (
            f"Spark master {cluster.master_url} gave no executor within 5 s: it has no live "
            "worker, or none with a free core and spark.executor.memory free"
        )
        assert "\n" not in message
        # The master alone is still running: nothing but the session was given up.
        assert cluster.status().master_pid is not None
    finally:
        cluster.stop()
