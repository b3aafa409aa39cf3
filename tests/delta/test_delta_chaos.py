"""`kstream chaos --workload delta` in short: the word count into a Delta table under
worker kills, kills at the two-phase commit's points and a broker SIGKILL, judged from
the table read back with deltalake."""

from __future__ import annotations

from pathlib import Path

import pytest
from sink_chaos import sink_campaign

from kstream.tools.chaos.tables import DeltaTableAt

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.campaign,
    pytest.mark.extended,
    pytest.mark.timeout(300),
]


def test_a_short_campaign_leaves_every_update_once_in_the_delta_table(tmp_path: Path) -> None:
    table = DeltaTableAt(tmp_path / "chaos" / "delta-table")
    result, log = sink_campaign(
        tmp_path, "delta", table, ("worker-kill", "fault-point", "broker-kill"), seed=2
    )
    # A fault struck the running job (one that strikes before the first checkpoint
    # completes restarts it from scratch: no recovery is counted then).
    assert result.faults, log
