"""`kstream chaos` in short: a few minutes of random faults of every kind against the
word count, and a shorter run against the windowed counts, fed all along, judged by
the campaign's own read_committed checker.

The campaign starts, kills and restarts its own broker on
``KSTREAM_CHAOS_BROKER_PORT`` (default 23392, controller on the next port), never
the suite's; where that port is refused (a broker directory some other run left),
the next pair of ports a campaign may take. The schedule is seeded: a failure is repeated with
``kstream chaos --duration 200 --seed 7 --mean-gap 8``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sink_chaos import campaign_port

from kstream.tools.chaos.campaign import CampaignConfig, CampaignResult, run_campaign
from kstream.tools.chaos.report import summary_lines, write_report
from kstream.tools.chaos.workload import workload

# The extended tier (6-7 min together): each fault kind a campaign injects has its
# own default-tier test (test_chaos.py, test_liveness.py, test_several_hosts.py);
# the campaigns add their random mix over minutes.
pytestmark = [pytest.mark.e2e, pytest.mark.campaign, pytest.mark.extended]

#: Seconds of faults; start-up and the final drain add a minute or two.
DURATION = 200.0
#: The windowed run's: shorter, the word count's run covers every fault kind.
WINDOWED_DURATION = 150.0


def campaign(
    tmp_path: Path, name: str, duration: float, seed: int
) -> tuple[CampaignResult, str, dict[str, Any]]:
    """Run a campaign of `name`, check its verdict; its result, its log (for assertion
    messages) and its report."""
    lines: list[str] = []
    config = CampaignConfig(
        workload=workload(name),
        duration=duration,
        seed=seed,
        rate=100.0,
        port=campaign_port(),
        out=tmp_path / "chaos",
        mean_gap=8.0,
    )
    result = run_campaign(config, lines.append)
    json_path, png = write_report(result)
    log = "\n".join([*lines, *summary_lines(result)])
    report = json.loads(json_path.read_text())
    assert png.stat().st_size > 0
    v = result.verdict
    assert (v.duplicates, v.lost, v.out_of_order, v.wrong) == (0, 0, 0, 0), log
    assert v.outputs == v.expected > 0, log
    assert result.drained, log
    assert v.unfinished == 0, log
    assert not result.incidents, log
    assert report["checkpoints"]["completed"] > 0
    assert report["passed"] is True
    # Memory and disk were sampled all along (a long run shows them flat).
    resources = report["resources"]
    assert len(resources["samples"]) >= duration / resources["every_s"] / 2, resources
    assert resources["workers_rss_max_mb"]["max"] > 0
    assert resources["broker_disk_mb"]["max"] > 0
    return result, log, report


def test_a_short_campaign_of_every_fault_kind_leaves_the_word_count_exactly_once(
    tmp_path: Path,
) -> None:
    result, log, report = campaign(tmp_path, "wordcount", DURATION, seed=7)
    # The campaign did what it is for: faults of several kinds, each survived. (How
    # many fit in the time depends on how fast the job recovers: a fault waits for
    # a checkpoint completed after the previous one.)
    assert len(result.faults) >= 5, log
    assert len(result.by_kind) >= 3, log
    assert result.recoveries >= 1, log
    assert len(report["windows"]) >= 2


def test_a_short_campaign_leaves_the_windowed_counts_exactly_once(tmp_path: Path) -> None:
    """Event-time windows under faults: every window's count once, as a final result."""
    result, log, _ = campaign(tmp_path, "windowed", WINDOWED_DURATION, seed=11)
    assert len(result.faults) >= 3, log
    assert result.recoveries >= 1, log
