"""The Flink contender's pure parts: its SQL text, its output read as the reference's,
the CPU accounting of a process tree, and the suite's contender list."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks.cpu import TreeCpu, broker_process, machine_busy_s
from benchmarks.nexmark import bench, check, flink_sql, model


def _statements(query: str) -> list[str]:
    return flink_sql.statements(
        query,
        bootstrap="127.0.0.1:9092",
        source="in",
        output="out",
        group="g",
        transactional_id_prefix="tx-1",
    )


@pytest.mark.parametrize("query", flink_sql.FLINK_QUERIES)
def test_every_query_is_source_views_sink_and_one_insert(query: str) -> None:
    ddl = _statements(query)
    assert ddl[0].startswith("CREATE TABLE events")
    assert "'topic' = 'in'" in ddl[0]
    assert "read_committed" in ddl[0]
    sink = ddl[-2]
    assert sink.startswith(f"CREATE TABLE sink ({flink_sql.SINK_COLUMNS[query]})")
    assert "'topic' = 'out'" in sink
    assert "'sink.delivery-guarantee' = 'exactly-once'" in sink
    assert "'sink.transactional-id-prefix' = 'tx-1'" in sink
    assert ddl[-1].startswith("INSERT INTO sink SELECT")
    # Balanced parentheses: a typo in the nested SELECTs shows here, not in a JVM.
    text = " ".join(ddl)
    assert text.count("(") == text.count(")")


def test_the_queries_use_the_models_constants() -> None:
    assert f"{model.EURO_RATE} * price" in _statements("q1")[-1]
    assert f"MOD(auction, {model.Q2_MODULUS}) = 0" in _statements("q2")[-1]
    q3 = _statements("q3")[-1]
    assert all(f"'{s}'" in q3 for s in model.Q3_STATES)
    assert f"A.category = {model.Q3_CATEGORY}" in q3
    assert "INTERVAL '2' SECOND, INTERVAL '10' SECOND" in _statements("q5")[-1]


def test_a_query_without_a_flink_version_is_refused() -> None:
    with pytest.raises(KeyError):
        _statements("q4")


def test_window_times_read_as_epoch_milliseconds() -> None:
    row = {
        "auction": 7,
        "num": 3,
        "window_start": "2026-11-28T03:48:00",
        "window_end": "2026-11-28T03:48:10.5",
    }
    out = flink_sql.normalise(row)
    assert out["window_start"] == 1795837680000
    assert out["window_end"] == 1795837690500
    assert out["auction"] == 7
    assert out["num"] == 3
    assert row["window_start"] == "2026-11-28T03:48:00"  # the input is not changed


def test_q1s_decimal_price_compares_equal_to_the_reference() -> None:
    bid = {"auction": 1, "bidder": 2, "price": 1_234_567, "dateTime": 5, "extra": ""}
    # Flink writes DECIMAL(23, 3) as a plain number with its scale.
    flink = b'{"auction":1,"bidder":2,"price":1120986.836,"dateTime":5,"extra":""}'
    assert check.compare([flink_sql.decode(flink)], [model.q1_row(bid)]).ok
    assert flink_sql.decode(None) is None


def test_a_process_trees_cpu_counts_its_children() -> None:
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import subprocess, sys; subprocess.run([sys.executable, '-c', {burn!r}])",
        ]
    )
    tree = TreeCpu(parent.pid)
    deadline = time.monotonic() + 30
    while tree.processes < 2 and time.monotonic() < deadline:
        tree.sample()
    while parent.poll() is None and time.monotonic() < deadline:
        tree.sample()
    parent.wait()
    assert tree.processes == 2
    # The child burned 0.3 s; the last sample may come up to one interval before its end.
    assert 0.1 < tree.cpu_s < 10


def test_no_local_listener_means_no_broker_process() -> None:
    assert broker_process("no-such-host:notaport") is None
    assert broker_process("127.0.0.1:1") is None
    assert machine_busy_s() > 0
    assert os.getloadavg()[0] >= 0


def test_flink_is_a_nexmark_contender_with_kstreams_parallelism() -> None:
    flink = bench.CONTENDERS["flink-eos"]
    assert set(flink.queries) == set(flink_sql.FLINK_QUERIES)
    argv = flink.command("b:1", "q1", "in", "out", Path("/s"))
    assert argv[1:3] == ["-m", "benchmarks.nexmark.flink_job"]
    assert argv[-2:] == [str(bench.KSTREAM_WORKERS), f"{bench.CHECKPOINT_INTERVAL_S:g}"]


def test_results_report_cpu_per_million_events() -> None:
    r = bench.NexmarkResult(
        "q1", "flink-eos", "ok", "", 2_000_000, 10, 10, True, 4.0, 1.0, cpu_s=6.0,
        broker_cpu_s=None,
    )  # fmt: skip
    doc = r.as_json()
    assert doc["events_per_s"] == 500_000
    assert doc["cpu_s_per_m_events"] == 3.0
    assert doc["broker_cpu_s_per_m_events"] is None
    assert json.dumps(doc)
