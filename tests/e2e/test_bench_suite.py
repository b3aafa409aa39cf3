"""`python -m benchmarks` runs its contenders on a tiny input and verifies every output.

The contenders that need a download (Quix Streams from PyPI, Kafka Streams from
Maven Central) run only with ``KSTREAM_BENCH_PEERS=1``. No figure is asserted
against a time: only that each is there and that each output was verified.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

REPO = Path(__file__).resolve().parents[2]
#: Small enough for CI, large enough for several batches and checkpoints' worth of data.
WORDS = 3000
#: Windows of the windowed workload: 100 lines each, so the input spans several and
#: most close while the data flows (before the flush lines).
WINDOW_MS = "100"
ALL_WORKLOADS = "wordcount,mapfilter,windowed"


def _run_suite(
    bootstrap: str,
    out: Path,
    contenders: str,
    *,
    workloads: str = ALL_WORKLOADS,
    env: dict[str, str] | None = None,
) -> dict[str, object]:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks",
            "--words",
            str(WORDS),
            "--contenders",
            contenders,
            "--workloads",
            workloads,
            "--window-ms",
            WINDOW_MS,
            "--bootstrap-servers",
            bootstrap,
            "--timeout",
            "600",
            "--out",
            str(out),
            # The other figures have their own tiny run (test_bench_figures_run.py).
            "--figures",
            "throughput",
        ],
        cwd=REPO,
        env=None if env is None else os.environ | env,
        capture_output=True,
        text=True,
        timeout=3000,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (out / "report.html").is_file()
    assert (out / "throughput.png").is_file()
    doc: dict[str, object] = json.loads((out / "results.json").read_text())
    return doc


def _check(doc: dict[str, object], expected_rows: set[tuple[str, str]]) -> None:
    rows = doc["figures"]["throughput"]  # type: ignore[index]
    assert {(r["workload"], r["key"]) for r in rows} == expected_rows
    for r in rows:
        assert r["status"] == "ok", r
        assert r["verified"] is True
        assert r["input_words"] == WORDS
        assert r["outputs_read"] == r["outputs_expected"] > 0
        assert r["words_per_s"] > 0
        # None when all output arrived within a second (too short a span to be a rate).
        assert r["flowing_words_per_s"] is None or r["flowing_words_per_s"] >= r["words_per_s"]
        assert r["ratio_vs_plain"] > 0
        assert r["ratio_vs_kstream_eos"] > 0
        if r["workload"] == "windowed":
            assert r["ratio_vs_own_wordcount"] > 0
    plain = [r for r in rows if r["key"] == "plain"]
    assert all(r["ratio_vs_plain"] == 1 for r in plain)
    assert doc["config"]["words"] == WORDS  # type: ignore[index]
    assert doc["config"]["window_ms"] == int(WINDOW_MS)  # type: ignore[index]
    assert doc["machine"]["cores"]  # type: ignore[index]


def test_suite_runs_and_verifies_the_local_contenders(bootstrap: str, tmp_path: Path) -> None:
    doc = _run_suite(
        bootstrap, tmp_path, "plain,eos-loop,kstream-eos,kstream-alo,kstream-alo-nocp,kstream-amo"
    )
    both = {"plain", "eos-loop", "kstream-eos"}
    rows = {("wordcount", k) for k in (*both, "kstream-alo", "kstream-alo-nocp", "kstream-amo")}
    rows |= {("mapfilter", k) for k in both}
    rows |= {("windowed", k) for k in (*both, "kstream-alo", "kstream-amo")}
    _check(doc, rows)
    # Every target whose contenders ran is measured; the peers' are not (not chosen).
    checked = {(c["target"], c["workload"]): c for c in doc["figures"]["targets"]}  # type: ignore[index]
    measured = {k for k, c in checked.items() if c["measured"] is not None}
    assert measured == {
        *(("kstream EOS ÷ EOS loop", w) for w in ("wordcount", "mapfilter", "windowed")),
        *(("kstream EOS ÷ plain loop", w) for w in ("wordcount", "mapfilter", "windowed")),
        ("cost of checkpoints every 1 s (at-least-once)", "wordcount"),
    }
    assert all(c["met"] is None for k, c in checked.items() if k not in measured)
    assert "Throughput targets" in (tmp_path / "results.md").read_text()


def test_a_peer_that_cannot_be_installed_is_skipped_with_the_reason(
    bootstrap: str, tmp_path: Path
) -> None:
    # A cache without the Quix virtualenv and a pip that may not use any index: as if
    # PyPI were unreachable. The suite must say why and still measure the others.
    env = {"KSTREAM_CACHE_DIR": str(tmp_path / "cache"), "PIP_NO_INDEX": "1"}
    doc = _run_suite(bootstrap, tmp_path / "out", "plain,quix-eos", workloads="wordcount", env=env)
    rows = {r["key"]: r for r in doc["figures"]["throughput"]}  # type: ignore[index]
    assert rows["plain"]["status"] == "ok"
    assert rows["quix-eos"]["status"] == "skipped"
    assert rows["quix-eos"]["words_per_s"] is None
    assert "pip could not install quixstreams" in rows["quix-eos"]["reason"]


@pytest.mark.skipif(
    os.environ.get("KSTREAM_BENCH_PEERS") != "1",
    reason="Quix Streams and Kafka Streams are installed from the network: KSTREAM_BENCH_PEERS=1",
)
def test_suite_runs_and_verifies_quix_and_kafka_streams(bootstrap: str, tmp_path: Path) -> None:
    doc = _run_suite(bootstrap, tmp_path, "plain,quix-eos,quix-alo,kafka-streams,kstream-eos")
    both = {"plain", "quix-eos", "kafka-streams", "kstream-eos"}
    rows = {("wordcount", k) for k in (*both, "quix-alo")}
    rows |= {("mapfilter", k) for k in both}
    rows |= {("windowed", k) for k in (*both, "quix-alo")}
    _check(doc, rows)
