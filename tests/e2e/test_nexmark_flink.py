"""Apache Flink on Nexmark through the suite: q1 on a few thousand events, verified.

Flink is installed from the network on first use (apache-flink from PyPI,
~830 MB; the Kafka SQL connector from Maven Central), so this runs only with
``KSTREAM_BENCH_PEERS=1``, like the word-count suite's peers. About 40 s once
installed (a JVM and a Flink mini-cluster start).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.broker,
    pytest.mark.e2e,
    pytest.mark.skipif(
        os.environ.get("KSTREAM_BENCH_PEERS") != "1",
        reason="Flink is installed from the network: KSTREAM_BENCH_PEERS=1",
    ),
]

REPO = Path(__file__).resolve().parents[2]


def test_flink_runs_q1_exactly_once_and_its_output_is_the_reference(
    bootstrap: str, tmp_path: Path
) -> None:
    argv = [
        sys.executable, "-m", "benchmarks", "--workloads", "nexmark", "--queries", "q1",
        "--contenders", "flink-eos", "--events", "3000", "--rate", "500",
        "--bootstrap-servers", bootstrap, "--timeout", "300", "--out", str(tmp_path),
    ]  # fmt: skip
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=1800, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (row,) = json.loads((tmp_path / "nexmark.json").read_text())
    assert row["contender"] == "flink-eos"
    assert row["status"] == "ok", row["reason"]
    assert row["verified"] is True
    # 46 bids in every 50 events: each bid converted once, none lost or duplicated.
    assert row["results_read"] == row["results_expected"] == 2760
    assert row["events_per_s"] > 0
    # Flink's tree (Python and its JVM) used CPU, and it was counted.
    assert row["processes"] >= 2
    assert row["cpu_s"] > 0
