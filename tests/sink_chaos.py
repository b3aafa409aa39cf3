"""A short `kstream chaos` campaign of a sink workload, for the sinks' suites.

The campaign starts, kills and restarts its own broker on
``KSTREAM_CHAOS_BROKER_PORT`` (default 23392, controller on the next port), never
the suite's; where that port is refused (a broker directory some other run
left), the next pair of ports a campaign may take. The word count writes every
update as a row into the sink's table; the campaign's judge reads the table
back with the sink's own client library and wants every (word, n) once.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kstream.tools.chaos.campaign import CampaignConfig, CampaignResult, run_campaign
from kstream.tools.chaos.own_broker import refusal, survey
from kstream.tools.chaos.report import summary_lines, write_report
from kstream.tools.chaos.tables import SinkTable
from kstream.tools.chaos.workload import workload

#: Seconds of faults (start-up and the drain add some), the first after `WARMUP`.
DURATION = 30.0
WARMUP = 12.0


def campaign_port() -> int:
    """The first port from ``KSTREAM_CHAOS_BROKER_PORT`` (default 23392) on, in steps
    of 2 (listener and controller), that a campaign may take: `kstream chaos`
    refuses one holding data it did not create."""
    first = int(os.environ.get("KSTREAM_CHAOS_BROKER_PORT", "23392"))
    for port in range(first, first + 40, 2):
        if refusal(survey(port)) is None:
            return port
    pytest.fail(f"no port from {first} to {first + 38} may hold a campaign's broker")


def sink_campaign(
    tmp_path: Path, sink: str, table: SinkTable, kinds: tuple[str, ...], seed: int
) -> tuple[CampaignResult, str]:
    """Run a short campaign of workload `sink` into `table` with faults of `kinds`,
    check that its verdict is clean and complete; its result and log."""
    lines: list[str] = []
    config = CampaignConfig(
        workload=workload(sink),
        duration=DURATION,
        seed=seed,
        rate=40.0,
        port=campaign_port(),
        out=tmp_path / "chaos",
        workers=2,
        mean_gap=5.0,
        kinds=kinds,
        table=table,
        warmup=WARMUP,
        drain_timeout=180.0,
    )
    result = run_campaign(config, lines.append)
    json_path, _png = write_report(result)
    log = "\n".join([*lines, *summary_lines(result)])
    report = json.loads(json_path.read_text())
    v = result.verdict
    assert (v.duplicates, v.lost, v.out_of_order, v.wrong) == (0, 0, 0, 0), log
    assert v.outputs == v.expected > 0, log
    assert result.drained, log
    assert v.unfinished == 0, log
    assert not result.incidents, log
    assert report["passed"] is True, log
    assert report["config"]["table"] == table.location
    # What was judged is the table as it stands: one row per output.
    assert v.outputs == len(table.rows()), log
    return result, log
