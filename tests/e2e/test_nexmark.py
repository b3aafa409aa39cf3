"""The Nexmark queries as kstream jobs on real workers, against their references.

One generated input (5,000 events, 10 s of event time, 3 partitions, end
markers) is written once; each query runs with 2 workers until a checkpoint
covers the whole input, and its committed output must equal the reference as
a multiset (`benchmarks.nexmark.check`), with nothing late and nothing in the
dead-letter topic.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from benchmarks.nexmark import check, generator, queries, reference
from kstream.infra.admin import Admin
from kstream.protocol.coordination import CoordinatorConfig
from kstream.protocol.names import dead_letter_topic
from kstream.runtime.config import JobRef, RunConfig
from kstream.runtime.runner.runner import Runner
from kstream.testing import read_all, run_until_consumed, unique_name

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

REPO = Path(__file__).resolve().parents[2]
PARTITIONS = 3
EVENTS = 5_000
#: 500 events per second of event time: 10 s, so q5 and q7 close several windows.
RATE = 500


@pytest.fixture(scope="module")
def nexmark_input(bootstrap: str) -> tuple[str, dict[int, int], list[dict[str, Any]]]:
    """The input topic, its end offsets and the events. Their time is an hour ago
    (results carry event time, and a topic's retention would delete older ones)."""
    config = generator.Config(EVENTS, rate=RATE, base_ms=int(time.time() * 1000) - 3_600_000)
    topic = unique_name("nexmark-in")
    Admin(bootstrap).create_topics({topic: PARTITIONS})
    events = generator.generate(config)
    ends = generator.write(bootstrap, topic, config, PARTITIONS, generated=events)
    return topic, ends, events


@pytest.mark.parametrize("query", ["q0", "q1", "q2", "q3", "q4", "q5", "q7", "q8"])
def test_query_output_is_the_reference(
    bootstrap: str,
    tmp_path: Path,
    nexmark_input: tuple[str, dict[int, int], list[dict[str, Any]]],
    query: str,
) -> None:
    topic, ends, events = nexmark_input
    run = unique_name(f"nexmark-{query}")
    output, late = f"{run}-out", f"{run}-late"
    Admin(bootstrap).create_topics({output: PARTITIONS, late: PARTITIONS})
    params = {"query": query, "input": topic, "output": output, "late": late, "name": run}
    job = queries.job(params)
    runner = Runner(
        RunConfig(
            JobRef("benchmarks.nexmark.queries:job", params),
            bootstrap,
            2,
            tmp_path / "state",
            checkpoints=CoordinatorConfig(interval=0.5, timeout=60.0),
        ),
        job,
        say=lambda _: None,
    )
    runner.prepare()
    run_until_consumed(runner, topic, ends, say=lambda _: None, timeout=120)

    expected = reference.REFERENCES[query](events)
    assert expected, f"{query} has no result on this input: the check would prove nothing"
    verdict = check.verify(query, check.read_output(bootstrap, output), expected)
    assert verdict.ok, verdict.describe()
    assert read_all(bootstrap, late) == []
    assert read_all(bootstrap, dead_letter_topic(job.name)) == []


def test_the_suite_runs_a_query_and_verifies_it(bootstrap: str, tmp_path: Path) -> None:
    """`python -m benchmarks --workloads nexmark` on a tiny input: one verified row per
    query for kstream, a skipped one (with its reason) for a contender without a job."""
    argv = [
        sys.executable, "-m", "benchmarks", "--workloads", "nexmark", "--queries", "q2",
        "--contenders", "kstream-eos,plain", "--events", "5000", "--rate", str(RATE),
        "--bootstrap-servers", bootstrap, "--timeout", "300", "--out", str(tmp_path),
    ]  # fmt: skip
    done = subprocess.run(
        argv,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = {r["contender"]: r for r in json.loads((tmp_path / "nexmark.json").read_text())}
    assert rows["kstream-eos"]["status"] == "ok"
    assert rows["kstream-eos"]["verified"] is True
    assert rows["kstream-eos"]["results_read"] == rows["kstream-eos"]["results_expected"] > 0
    assert rows["kstream-eos"]["events_per_s"] > 0
    assert rows["plain"]["status"] == "skipped"
    assert "no Nexmark job" in rows["plain"]["reason"]
