"""A job on several hosts (network namespaces): exactly-once output, also after faults.

The first test keeps checkpoints in a directory every host links to; the fault
tests in an object store (S3Proxy) on the bridge address.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hosts_cluster import HostedJob, generations
from netns import Host, HostNet
from object_store import Bucket

from kstream.infra.broker import LocalBroker

pytestmark = [pytest.mark.e2e, pytest.mark.broker]


def _assert_exactly_once(job: HostedJob) -> None:
    check = job.finish()
    assert check.wrong_final == [], job.logs()
    assert check.duplicates == 0, job.logs()
    assert check.missing == 0, job.logs()
    assert check.out_of_order == 0
    assert check.outputs == job.total
    if job.bucket is not None:  # the checkpoints really went to the object store
        stored = job.bucket.listing(job.run_id)
        assert any(k.endswith("/manifest.json") for k in stored), stored[:20]
        assert any("/shared/" in k for k in stored), stored[:20]


def test_three_worker_hosts(host_net: HostNet, bridge_broker: LocalBroker, tmp_path: Path) -> None:
    job = HostedJob(host_net, bridge_broker.bootstrap, tmp_path)
    job.start()
    _assert_exactly_once(job)


def _midway(job: HostedJob) -> None:
    """Run until a third of the words are counted and output is committed."""
    job.run_until(lambda: job.committed_outputs() >= job.total // 3, "a third counted")


def test_a_partitioned_host_heals(
    host_net: HostNet, bridge_broker: LocalBroker, bridge_object_store: Bucket, tmp_path: Path
) -> None:
    job = HostedJob(host_net, bridge_broker.bootstrap, tmp_path, bucket=bridge_object_store)
    job.start()
    _midway(job)
    before = generations(job)
    cut = job.hosts[2]  # worker 1
    cut.cut()
    # Silent past the liveness timeout, the worker is declared lost: a new generation.
    job.run_until(lambda: generations(job) > before, "the job rolled back")
    cut.heal()
    # The healed worker's old generation is fenced; it joins the new one.
    _assert_exactly_once(job)


def test_every_process_of_a_host_killed(
    host_net: HostNet, bridge_broker: LocalBroker, bridge_object_store: Bucket, tmp_path: Path
) -> None:
    job = HostedJob(host_net, bridge_broker.bootstrap, tmp_path, bucket=bridge_object_store)
    job.start()
    _midway(job)
    host = job.hosts[3]  # worker 2
    before = generations(job)
    assert job.worker_procs[2].pid in host.kill_all()
    # What a supervisor (systemd, Kubernetes) does: start it again on its host, at
    # once (well within the liveness timeout, so the coordinator still counts the
    # dead process as running its generation).
    job.start_worker(2)
    job.run_until(lambda: len(_restores(job, host, "w2")) >= 2, "the new process joined")
    # It never joined the generation its predecessor ran: it waited for a new one.
    first, second = _restores(job, host, "w2")[:2]
    assert first <= before < second, job.logs()
    _assert_exactly_once(job)


def _restores(job: HostedJob, host: Host, worker: str) -> list[int]:
    """The generations `worker`'s processes on `host` restored, in the order logged."""
    return [
        int(line.split(f"{worker}: generation ", 1)[1].split(",", 1)[0])
        for line in job.log_of(host, worker.replace("w", "worker")).splitlines()
        if f"{worker}: generation " in line and ", restored " in line
    ]


def test_the_coordinator_killed_and_restarted(
    host_net: HostNet, bridge_broker: LocalBroker, bridge_object_store: Bucket, tmp_path: Path
) -> None:
    job = HostedJob(host_net, bridge_broker.bootstrap, tmp_path, bucket=bridge_object_store)
    job.start()
    _midway(job)
    before = generations(job)
    assert job.coordinators[0].pid in job.hosts[0].kill_all()
    job.start_coordinator(0)
    # The workers ran on: the new coordinator adopts their generation, no rollback.
    job.run_until(
        lambda: "adopting generation" in job.log_of(job.hosts[0], "coordinator"),
        "the generation adopted",
    )
    _assert_exactly_once(job)
    assert generations(job) == before, job.logs()


def test_a_second_coordinator_fences_the_first(
    host_net: HostNet, bridge_broker: LocalBroker, bridge_object_store: Bucket, tmp_path: Path
) -> None:
    """Two coordinators of one job on different hosts (state directories apart, so no
    file lock sees both) never both act: the second is refused while the first is
    heard, and one started while the first is cut off fences it."""
    job = HostedJob(host_net, bridge_broker.bootstrap, tmp_path, bucket=bridge_object_store)
    job.start()
    _midway(job)
    other = host_net.hosts[4] if len(host_net.hosts) > 4 else host_net.add_host()
    second = job.start_coordinator(other.index - 1)
    assert job.exit_code(second) == 2, job.logs()
    assert "already running" in job.log_of(other, "coordinator"), job.logs()

    first, first_host = job.coordinators[0], job.hosts[0]
    before = generations(job)
    first_host.cut()
    job.start_coordinator(other.index - 1)
    # The new coordinator takes over (after the presence wait): its workers are
    # alive, so it adopts their generation.
    job.run_until(
        lambda: "adopting generation" in job.log_of(other, "coordinator"),
        "the second coordinator took over",
    )
    first_host.heal()
    # Its next control message fails: fenced, it stops with one line.
    assert job.exit_code(first) == 2, job.logs()
    assert "another coordinator started" in job.log_of(first_host, "coordinator"), job.logs()
    del job.coordinators[0]
    _assert_exactly_once(job)
    assert generations(job) == before, job.logs()


def test_two_processes_claiming_one_worker_index_never_both_write(
    host_net: HostNet, bridge_broker: LocalBroker, bridge_object_store: Bucket, tmp_path: Path
) -> None:
    """A second process for a running worker's index, on another host (state
    directories apart, so no file lock sees both): the job rolls back keeping the
    newest, and the first stops with one line (the rollback names the process kept;
    or the newest's sink producers fenced the first's before it read that)."""
    job = HostedJob(host_net, bridge_broker.bootstrap, tmp_path, bucket=bridge_object_store)
    job.start()
    _midway(job)
    first = job.worker_procs[1]
    other = host_net.hosts[4] if len(host_net.hosts) > 4 else host_net.add_host()
    before = generations(job)
    job.start_worker(1, other)
    # It stops: told by the rollback that keeps the newest process, or, if the
    # newest's sink producers fenced it first, at its next write.
    assert job.exit_code(first) == 2, job.logs()
    said = job.log_of(job.hosts[2], "worker1")
    assert "another process" in said or "Fatal error" in said, job.logs()
    assert generations(job) > before
    _assert_exactly_once(job)
