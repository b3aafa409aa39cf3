"""The suite's figures beyond throughput run on a tiny input and hang together.

Latency, checkpoints and bytes per input record (`benchmarks.latency`) and
pause, recovery and RSS against state size (`benchmarks.state_bench`), through
``python -m benchmarks --figures``. Only structure and sanity are asserted,
never a time against a bound: every output was seen, quantiles are ordered,
the categories of bytes are where the job writes them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# ~70 s: extended tier (the benchmark suite's own test runs in the default tier).
pytestmark = [pytest.mark.broker, pytest.mark.e2e, pytest.mark.extended]

REPO = Path(__file__).resolve().parents[2]
INTERVALS = (0.5, 1.0)
KEYS = (1000, 20_000)
#: The state job's checkpoints measured per size (`state_bench`'s default).
CHECKPOINTS = 5


def _ordered(q: dict[str, float]) -> None:
    assert q["n"] > 0
    assert q["p50"] <= q["p99"] <= q["max"]


def test_latency_and_state_figures_run_on_a_tiny_input(bootstrap: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks",
            "--figures",
            "latency,state",
            "--latency-intervals",
            ",".join(map(str, INTERVALS)),
            "--latency-seconds",
            "3",
            "--capacity-words",
            "20000",
            "--state-keys",
            ",".join(map(str, KEYS)),
            "--bootstrap-servers",
            bootstrap,
            "--out",
            str(tmp_path),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for name in ("report.html", "latency.png", "state.png", "results.md"):
        assert (tmp_path / name).is_file(), name
    doc = json.loads((tmp_path / "results.json").read_text())
    figures = doc["figures"]
    assert figures["throughput"] == []

    latency = figures["latency"]
    assert latency["capacity_words_per_s"] > 0
    assert [r["interval_s"] for r in latency["runs"]] == list(INTERVALS)
    for r in latency["runs"]:
        assert r["rate_words_per_s"] == pytest.approx(latency["capacity_words_per_s"] / 2)
        # One latency per output, one output per input word: every output was seen.
        assert r["latency_ms"]["n"] == r["words"] > 0
        _ordered(r["latency_ms"])
        # An output cannot be seen before its input was appended.
        assert r["latency_ms"]["p50"] > 0
        assert r["target_p99_ms"] == r["interval_s"] * 1000 + 250
        assert r["target_met"] == (r["latency_ms"]["p99"] <= r["target_p99_ms"])
        for key in ("checkpoint_duration_ms", "alignment_ms", "sync_pause_ms"):
            _ordered(r[key])
        b = r["bytes"]
        assert b["input_records"] == r["input_records"]
        assert b["records"]["output"] == r["words"]
        assert b["records"]["barriers"] >= 1
        assert b["records"]["markers"] >= 1
        assert b["bytes"]["channels"] > 0
        assert b["bytes"]["control"] > 0
        assert b["total_per_input_record"] == pytest.approx(
            sum(b["bytes"].values()) / b["input_records"]
        )

    sizes = figures["state"]["sizes"]
    assert [s["keys"] for s in sizes] == list(KEYS)
    for s in sizes:
        assert s["sync_pause_ms"]["n"] >= CHECKPOINTS
        _ordered(s["sync_pause_ms"])
        assert s["recovery_s"] > 0
        assert 0 < s["worker_rss_mb"] <= s["worker_peak_rss_mb"]
    # Twenty times the keys of incompressible values: a larger snapshot.
    assert sizes[1]["state_bytes"] > sizes[0]["state_bytes"] > 0

    text = (tmp_path / "results.md").read_text()
    assert "End-to-end latency" in text
    assert "Keyed state size" in text
