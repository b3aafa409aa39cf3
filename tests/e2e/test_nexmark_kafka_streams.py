"""Kafka Streams on Nexmark through the suite: q1 and q3 on a few thousand events, verified.

Kafka Streams' jars come from Maven Central on first use (mvn), so this runs
only with ``KSTREAM_BENCH_PEERS=1``, like the word-count suite's peers. About
40 s once resolved (a JVM per query; 36 s at load 7).
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
        reason="Kafka Streams is fetched from the network: KSTREAM_BENCH_PEERS=1",
    ),
]

REPO = Path(__file__).resolve().parents[2]


def test_kafka_streams_runs_q1_and_q3_exactly_once_and_skips_q5(
    bootstrap: str, tmp_path: Path
) -> None:
    argv = [
        sys.executable, "-m", "benchmarks", "--workloads", "nexmark", "--queries", "q1,q3,q5",
        "--contenders", "kafka-streams-eos", "--events", "5000", "--rate", "500",
        "--bootstrap-servers", bootstrap, "--timeout", "300", "--out", str(tmp_path),
    ]  # fmt: skip
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=1800, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = {r["query"]: r for r in json.loads((tmp_path / "nexmark.json").read_text())}
    q1, q3, q5 = rows["q1"], rows["q3"], rows["q5"]
    for row in (q1, q3):
        assert row["contender"] == "kafka-streams-eos"
        assert row["status"] == "ok", row["reason"]
        assert row["verified"] is True
        # One JVM, and its CPU was counted.
        assert row["processes"] >= 1
        assert row["cpu_s"] > 0
    # 46 bids in every 50 events: each converted once, none lost or duplicated.
    assert q1["results_read"] == q1["results_expected"] == 4600
    # The join found pairs (persons before and after their auctions), each once.
    assert q3["results_read"] == q3["results_expected"] > 0
    assert q5["status"] == "skipped"
    assert q5["reason"] == "no q5 job for this contender yet"
