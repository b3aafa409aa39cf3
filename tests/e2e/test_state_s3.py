"""State bootstrapped into and read back from ``s3://`` savepoints (S3Proxy): each
Spark task uploads or downloads its own subtask's database.

Extended (~40 s on a quiet machine: S3Proxy and a Spark session of its own); the
default tier reads and bootstraps local savepoints through the same storage
interface.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from object_store import Bucket, ObjectStore
from test_job_safety import Job

from kstream.tools.state import read_state
from kstream.tools.state.bootstrap import bootstrap_state

if TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.audit, pytest.mark.s3]


@pytest.fixture(scope="module")
def spark(object_store: ObjectStore) -> Iterator[SparkSession]:
    """A local[2] session whose Python workers have the store's credentials
    (``spark.executorEnv``: the JVM may have started before the store did)."""
    from pyspark.sql import SparkSession

    # Python workers run this interpreter (kstream and its dependencies), as
    # `kstream.audit.spark.spark_session` arranges for its sessions.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master("local[2]").appName("kstream-state-s3")
    for k, v in object_store.env.items():
        builder = builder.config(f"spark.executorEnv.{k}", v)
    session = builder.getOrCreate()
    try:
        yield session
    finally:
        session.stop()


@pytest.mark.extended
def test_bootstrap_to_s3_and_read_back(
    spark: SparkSession, bucket: Bucket, object_store: ObjectStore, tmp_path: Path
) -> None:
    job = Job("127.0.0.1:1", tmp_path)  # never run: only its plan is needed
    rows = [(f"w{i}", i) for i in range(500)]
    df = spark.createDataFrame(rows, "word STRING, n BIGINT")
    url = bucket.url("savepoints/wc")
    result = bootstrap_state(
        df, f"{job.file}:job", "count", key="word", value="n", out=url,
        params={"input": "a", "output": "b"}, workers=3, s3_endpoint_url=object_store.endpoint,
    )  # fmt: skip
    assert result.url == url
    assert sorted(result.keys) == ["s1-0", "s1-1", "s1-2"]
    assert "savepoints/wc/savepoint.json" in bucket.listing()
    back = read_state(
        spark, url, "count", value_type="bigint", s3_endpoint_url=object_store.endpoint
    )
    assert back.rdd.getNumPartitions() == 3
    assert sorted((r.key, r.value) for r in back.collect()) == sorted(rows)
