"""A job on several hosts (network namespaces): exactly-once output, also after faults."""

from __future__ import annotations

from pathlib import Path

import pytest

from hosts_cluster import HostedJob
from kstream.infra.broker import LocalBroker
from netns import HostNet

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
