"""`kstream chaos --workload iceberg` in short: the word count into an Iceberg table
under worker kills, kills at the two-phase commit's points and a worker stopped past
its liveness timeout, judged from the table read back with pyiceberg."""

from __future__ import annotations

from pathlib import Path

import pytest
from sink_chaos import sink_campaign

from kstream.tools.chaos.tables import IcebergTableAt

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.campaign,
    pytest.mark.extended,
    pytest.mark.timeout(300),
]


def test_a_short_campaign_leaves_every_update_once_in_the_iceberg_table(
    tmp_path: Path,
) -> None:
    table = IcebergTableAt(tmp_path / "chaos" / "iceberg")
    result, log = sink_campaign(
        tmp_path, "iceberg", table, ("worker-kill", "fault-point", "runner-kill"), seed=1
    )
    # A fault struck the running job (one that strikes before the first checkpoint
    # completes restarts it from scratch: no recovery is counted then).
    assert result.faults, log
