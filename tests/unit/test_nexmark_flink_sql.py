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
        _statements("q6")


def test_q4_is_written_as_upserts_keyed_by_category_exactly_once() -> None:
    *_, sink, insert = _statements("q4")
    assert {"q4"} == flink_sql.UPSERT_QUERIES
    assert "PRIMARY KEY (category) NOT ENFORCED" in sink
    assert "'connector' = 'upsert-kafka'" in sink
    assert "'key.format' = 'json'" in sink
    assert "'value.format' = 'json'" in sink
    assert "'sink.delivery-guarantee' = 'exactly-once'" in sink
    # Flink's AVG of a BIGINT is integral: the average is over DOUBLE.
    assert "AVG(CAST(Q.final AS DOUBLE))" in insert
    assert "B.`dateTime` BETWEEN A.`dateTime` AND A.expires" in insert
    assert "'connector' = 'kafka'" in _statements("q1")[-2]


def _upsert(category: int, count: int | None, avg: float = 0.0) -> check.Upsert:
    """A record of Flink's q4 output as the suite reads it (key and value JSON)."""
    key = flink_sql.decode(json.dumps({"category": category}).encode())
    if count is None:
        return check.Upsert(key, flink_sql.decode(None))
    value = {"category": category, "count": count, "avg": avg}
    return check.Upsert(key, flink_sql.decode(json.dumps(value).encode()))


#: Two categories: 10 with closing prices 100, 200, 400; 11 with 5.
Q4_REFERENCE = {10: (3, 700 / 3), 11: (1, 5.0)}


def test_an_upsert_output_is_its_last_value_per_key() -> None:
    records = [
        _upsert(10, 1, 100.0),
        _upsert(11, 1, 3.0),
        _upsert(10, 2, 150.0),
        # Auction of 11 raised its closing price: retracted (the key deleted), re-added.
        _upsert(11, None),
        _upsert(11, 1, 5.0),
        # A float sum that added and subtracted: off in the last digits.
        _upsert(10, 3, 700 / 3 * (1 + 1e-12)),
    ]
    verdict = check.verify_upserts("q4", records, Q4_REFERENCE)
    assert verdict.ok, verdict.describe()
    assert (verdict.read, verdict.expected) == (2, 2)  # keys
    assert check.latest(records) == {
        '{"category":10}': {"category": 10, "count": 3, "avg": 700 / 3 * (1 + 1e-12)},
        '{"category":11}': {"category": 11, "count": 1, "avg": 5.0},
    }


def test_an_upsert_output_shows_a_wrong_count_average_or_key() -> None:
    good = [_upsert(10, 3, 700 / 3), _upsert(11, 1, 5.0)]
    assert check.verify_upserts("q4", good, Q4_REFERENCE).ok
    # A count off by one with the right average, an average off by 0.1 %, a deleted
    # key, a key the reference does not have.
    for bad in (
        [_upsert(10, 4, 700 / 3), _upsert(11, 1, 5.0)],
        [_upsert(10, 3, 700 / 3 * 1.001), _upsert(11, 1, 5.0)],
        [*good, _upsert(11, None)],
        [*good, _upsert(12, 1, 9.0)],
    ):
        verdict = check.verify_upserts("q4", bad, Q4_REFERENCE)
        assert not verdict.ok
        assert len(verdict.missing) + len(verdict.extra) >= 1
    (missing,) = check.verify_upserts("q4", good[:1], Q4_REFERENCE).missing
    assert missing == '{"category":11}: {"avg":5.0,"category":11,"count":1}'
    # A count is exact, also against a float of the same value.
    assert not check.same({"count": 3.0}, {"count": 3})
    assert check.same({"count": 3, "avg": 2.0}, {"count": 3, "avg": 2.0 + 1e-13})


def test_only_q4_has_an_updating_result() -> None:
    with pytest.raises(ValueError, match="q1 has no updating result"):
        check.verify_upserts("q1", [], [])


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
    assert flink.upserts == {"q4"}
    assert not bench.CONTENDERS["kstream-eos"].upserts
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
