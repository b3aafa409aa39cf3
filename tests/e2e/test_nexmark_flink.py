"""Apache Flink on Nexmark through the suite: q1 (appended rows) and q4 (an upsert-kafka
table) on a few thousand events, verified.

Flink is installed from the network on first use (apache-flink from PyPI,
~830 MB; the Kafka SQL connector from Maven Central), so this runs only with
``KSTREAM_BENCH_PEERS=1``, like the word-count suite's peers. About 40 s a query
once installed (a JVM and a Flink mini-cluster start).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks.nexmark import generator

pytestmark = [
    pytest.mark.broker,
    pytest.mark.e2e,
    pytest.mark.skipif(
        os.environ.get("KSTREAM_BENCH_PEERS") != "1",
        reason="Flink is installed from the network: KSTREAM_BENCH_PEERS=1",
    ),
]

REPO = Path(__file__).resolve().parents[2]


def _suite_row(bootstrap: str, out: Path, query: str) -> dict[str, Any]:
    """Flink's result row of the suite's run of `query` on 3,000 events."""
    argv = [
        sys.executable, "-m", "benchmarks", "--workloads", "nexmark", "--queries", query,
        "--contenders", "flink-eos", "--events", "3000", "--rate", "500",
        "--bootstrap-servers", bootstrap, "--timeout", "300", "--out", str(out),
    ]  # fmt: skip
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=1800, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (row,) = json.loads((out / "nexmark.json").read_text())
    assert isinstance(row, dict)
    return row


def test_flink_runs_q1_exactly_once_and_its_output_is_the_reference(
    bootstrap: str, tmp_path: Path
) -> None:
    row = _suite_row(bootstrap, tmp_path, "q1")
    assert row["contender"] == "flink-eos"
    assert row["status"] == "ok", row["reason"]
    assert row["verified"] is True
    # 46 bids in every 50 events: each bid converted once, none lost or duplicated.
    assert row["results_read"] == row["results_expected"] == 2760
    assert row["events_per_s"] > 0
    # Flink's tree (Python and its JVM) used CPU, and it was counted.
    assert row["processes"] >= 2
    assert row["cpu_s"] > 0
    assert row["upserts_read"] is None


def test_flink_runs_q4_as_upserts_whose_last_values_are_the_reference(
    bootstrap: str, tmp_path: Path
) -> None:
    row = _suite_row(bootstrap, tmp_path, "q4")
    assert row["contender"] == "flink-eos"
    assert row["status"] == "ok", row["reason"]
    assert row["verified"] is True
    # The table's keys: every one of the generator's categories.
    assert row["results_read"] == row["results_expected"] == generator.CATEGORIES
    # More upserts than keys: rows were updated (and possibly deleted) on the way.
    assert row["upserts_read"] > generator.CATEGORIES
