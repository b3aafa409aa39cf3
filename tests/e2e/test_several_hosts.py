"""A job on several hosts (network namespaces): exactly-once output, also after faults."""

from __future__ import annotations

from pathlib import Path

import pytest
from hosts_cluster import HostedJob, generations
from netns import HostNet

from kstream.infra.broker import LocalBroker

pytestmark = [pytest.mark.e2e, pytest.mark.broker]


def _assert_exactly_once(job: HostedJob) -> None:
    check = job.finish()
    assert check.wrong_final == [], job.logs()
    assert check.duplicates == 0, job.logs()
    assert check.missing == 0, job.logs()
    assert check.out_of_order == 0
    assert check.outputs == job.total


def test_three_worker_hosts(host_net: HostNet, bridge_broker: LocalBroker, tmp_path: Path) -> None:
    job = HostedJob(host_net, bridge_broker.bootstrap, tmp_path)
    job.start()
    _assert_exactly_once(job)


def _midway(job: HostedJob) -> None:
    """Run until a third of the words are counted and output is committed."""
    job.run_until(lambda: job.committed_outputs() >= job.total // 3, "a third counted")


def test_a_partitioned_host_heals(
    host_net: HostNet, bridge_broker: LocalBroker, tmp_path: Path
) -> None:
    job = HostedJob(host_net, bridge_broker.bootstrap, tmp_path)
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
    host_net: HostNet, bridge_broker: LocalBroker, tmp_path: Path
) -> None:
    job = HostedJob(host_net, bridge_broker.bootstrap, tmp_path)
    job.start()
    _midway(job)
    host = job.hosts[3]  # worker 2
    assert job.worker_procs[2].pid in host.kill_all()
    # What a supervisor (systemd, Kubernetes) does: start it again on its host.
    job.start_worker(2)
    _assert_exactly_once(job)


def test_the_coordinator_killed_and_restarted(
    host_net: HostNet, bridge_broker: LocalBroker, tmp_path: Path
) -> None:
    job = HostedJob(host_net, bridge_broker.bootstrap, tmp_path)
    job.start()
    _midway(job)
    assert job.coordinators[0].pid in job.hosts[0].kill_all()
    job.start_coordinator(0)
    _assert_exactly_once(job)
