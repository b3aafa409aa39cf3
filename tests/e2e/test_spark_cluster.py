"""Spark jobs on a real standalone cluster (a master and two worker JVMs) and on
``local[2]``: the same results. The cluster is the session's `spark_cluster`.

The state read takes the word count savepoint of test_state_read; the audit
reads topics written here (a running count with one duplicate and one loss, so
the verdict has figures to agree on). pyspark keeps one JVM per process and a
session's ``spark.jars`` only reach the driver when its JVM starts, so every
session of these tests is given the Kafka connector's jars.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from test_cli_run import wait_for
from test_state_read import wordcount_savepoint  # noqa: F401 (a fixture)

from kstream.audit import AuditResult, run_audit
from kstream.audit.jars import connector_jars
from kstream.audit.spark import spark_session
from kstream.errors import EnvironmentSetupError
from kstream.infra.admin import Admin
from kstream.infra.spark_cluster import SparkCluster, check_master
from kstream.testing import produce, unique_name
from kstream.tools.state import read_state

pytestmark = [pytest.mark.broker, pytest.mark.e2e, pytest.mark.audit]

WORDS = [f"w{i}" for i in range(30)]


def test_the_cluster_runs_three_jvms_and_a_second_start_changes_nothing(
    spark_cluster: SparkCluster,
) -> None:
    before = spark_cluster.status()
    assert before.running
    assert len({before.master_pid, *before.worker_pids}) == 3
    again = SparkCluster(spark_cluster.port, workers=2).start()
    assert again == before


def test_an_unreachable_master_fails_in_seconds_with_one_line(
    wordcount_savepoint: tuple[str, dict[str, int]],  # noqa: F811
) -> None:
    dead = "spark://127.0.0.1:9"  # discard: nothing listens
    with pytest.raises(EnvironmentSetupError, match="is unreachable"):
        check_master(dead)
    url, _ = wordcount_savepoint
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "kstream", "state", "read", url, "--operator", "count",
         "--master", dead],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert time.monotonic() - started < 15
    assert done.stderr.strip().splitlines() == [
        f"kstream: error: Spark master {dead} is unreachable (127.0.0.1:9: Connection refused)"
    ]


def _state_rows(master: str, url: str, log: Path) -> list[tuple[int, str, int]]:
    with spark_session(master, connector_jars(), log, app_name="kstream-state") as spark:
        df = read_state(spark, url, "count", value_type="bigint")
        return sorted((r.key_group, r.key, r.value) for r in df.collect())


def test_state_read_on_the_cluster_equals_local(
    spark_cluster: SparkCluster,
    wordcount_savepoint: tuple[str, dict[str, int]],  # noqa: F811
    tmp_path: Path,
) -> None:
    url, expected = wordcount_savepoint
    on_cluster = _state_rows(spark_cluster.master_url, url, tmp_path / "cluster.log")
    local = _state_rows("local[2]", url, tmp_path / "local.log")
    assert on_cluster == local
    assert {key: value for _, key, value in on_cluster} == expected


def _audit_topics(bootstrap: str, lines: int) -> tuple[str, str]:
    """An input of `lines` lines and its running counts, one record duplicated and one lost."""
    src, dst = unique_name("in"), unique_name("out")
    Admin(bootstrap).create_topics({src: 2, dst: 2})
    text = [" ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(3)) for i in range(lines)]
    produce(bootstrap, src, [(None, t.encode()) for t in text], transactional_id=unique_name("i"))
    seen: Counter[str] = Counter()
    out = []
    for t in text:
        for w in t.split():
            seen[w] += 1
            out.append((w.encode(), str(seen[w]).encode()))
    out.append(out[5])  # a duplicate
    del out[10]  # a loss
    produce(bootstrap, dst, out, transactional_id=unique_name("o"))
    return src, dst


def _audit(bootstrap: str, src: str, dst: str, master: str, where: Path) -> AuditResult:
    return run_audit(
        input_topic=src, output_topic=dst, bootstrap=bootstrap, master=master,
        report_dir=where, progress=False,
    )  # fmt: skip


def _figures(r: AuditResult) -> tuple[object, ...]:
    return (
        r.clean, r.input_records, r.output_records, r.expected_outputs,
        r.duplicates, r.lost, r.unexpected, r.out_of_order,
    )  # fmt: skip


def test_the_audit_on_the_cluster_equals_local(
    bootstrap: str, spark_cluster: SparkCluster, tmp_path: Path
) -> None:
    src, dst = _audit_topics(bootstrap, 300)
    on_cluster = _audit(bootstrap, src, dst, spark_cluster.master_url, tmp_path / "cluster")
    local = _audit(bootstrap, src, dst, "local[2]", tmp_path / "local")
    assert _figures(on_cluster) == _figures(local)
    assert (on_cluster.clean, on_cluster.duplicates, on_cluster.lost) == (False, 1, 1)


def _executors_running(cluster: SparkCluster, role: str) -> bool:
    return any((cluster.directory / role).glob("app-*/*/stderr"))


@pytest.mark.extended
def test_a_worker_killed_during_an_audit_leaves_the_verdict_unchanged(
    bootstrap: str, tmp_path: Path
) -> None:
    """Extended (~2 min): its own cluster, since a worker of it is killed."""
    from netns import free_port

    cluster = SparkCluster(free_port("127.0.0.1"), workers=2)
    cluster.start()
    try:
        src, dst = _audit_topics(bootstrap, 200_000)
        reference = _audit(bootstrap, src, dst, "local[2]", tmp_path / "local")
        results: list[AuditResult] = []
        audit = threading.Thread(
            target=lambda: results.append(
                _audit(bootstrap, src, dst, cluster.master_url, tmp_path / "cluster")
            )
        )
        audit.start()
        wait_for(lambda: _executors_running(cluster, "worker-1"), 120, "an executor on worker-1")
        assert cluster.kill("worker-1")
        audit.join(timeout=600)
        assert not audit.is_alive()
        assert _figures(results[0]) == _figures(reference)
    finally:
        cluster.stop()
