"""`run_audit` against real topics: exact figures for exactly injected faults."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest
from confluent_kafka import Producer
from wordcount_data import by_partition, running_counts, text_lines

from kstream.audit import (
    LINEAGE_OFFSET_HEADER,
    LINEAGE_PARTITION_HEADER,
    LINEAGE_TOPIC_HEADER,
    AuditResult,
    run_audit,
)
from kstream.infra.admin import Admin
from kstream.testing import produce, read_all, unique_name

pytestmark = pytest.mark.audit

VOCABULARY = ["the", "cat", "sat", "on", "mat", "naïve", "<b>bold</b>", "x-y", "THE", "42"]
LINES = text_lines(seed=7, n=150, vocabulary=VOCABULARY)
GOOD = running_counts(LINES)
OUTPUT_PARTITIONS = 3


def write_lines(bootstrap: str, topic: str, lines: Sequence[str]) -> None:
    produce(
        bootstrap, topic, [(None, s.encode()) for s in lines], transactional_id=unique_name("in")
    )


def write_counts(
    bootstrap: str,
    topic: str,
    records: Sequence[tuple[bytes, bytes]],
    *,
    abort: bool = False,
) -> None:
    """Write records to their key's partition, one transaction per partition."""
    for p, recs in by_partition(records, OUTPUT_PARTITIONS).items():
        if recs:
            tid = unique_name("out")
            produce(bootstrap, topic, recs, partition=p, transactional_id=tid, abort=abort)


@pytest.fixture
def wordcount(bootstrap: str, admin: Admin, topic: str) -> tuple[str, str]:
    """An input topic holding LINES (and an aborted transaction of junk lines) and an
    empty output topic."""
    src, dst = f"{topic}-in", f"{topic}-out"
    admin.create_topics({src: 2, dst: OUTPUT_PARTITIONS})
    write_lines(bootstrap, src, LINES[:70])
    # Words in aborted input would inflate N_w and show up as losses if they were read.
    produce(
        bootstrap,
        src,
        [(None, b"the cat the cat zebra")] * 5,
        transactional_id=unique_name("junk"),
        abort=True,
    )
    write_lines(bootstrap, src, LINES[70:])
    return src, dst


def audit(
    bootstrap: str, src: str, dst: str, tmp_path: Path, check: str = "running-count"
) -> AuditResult:
    return run_audit(
        input_topic=src,
        output_topic=dst,
        bootstrap=bootstrap,
        check=check,
        master="local[2]",
        report_dir=tmp_path / "report",
        progress=False,
    )


def figures(r: AuditResult) -> tuple[int, int, int, int | None]:
    return (r.duplicates, r.lost, r.unexpected, r.out_of_order)


def nth(word: str, count: int) -> tuple[bytes, bytes]:
    """The correct output for the `count`-th occurrence of `word`."""
    pair = (word.encode(), str(count).encode())
    assert pair in GOOD
    return pair


def test_exactly_once_output_is_clean(
    bootstrap: str, wordcount: tuple[str, str], tmp_path: Path
) -> None:
    src, dst = wordcount
    write_counts(bootstrap, dst, GOOD)
    # An aborted attempt of bogus output: never read, so never a violation.
    write_counts(bootstrap, dst, [(b"the", b"999"), (b"zebra", b"1"), *GOOD[:10]], abort=True)
    r = audit(bootstrap, src, dst, tmp_path)
    assert r.clean
    assert figures(r) == (0, 0, 0, 0)
    assert r.input_records == len(LINES)
    assert r.output_records == r.expected_outputs == len(GOOD)

    report = json.loads(r.report_json.read_text())
    assert report["verdict"] == "clean"
    assert report["input"]["records"] == len(LINES)
    assert report["output"]["records"] == len(GOOD)
    assert {name: c["verdict"] for name, c in report["checks"].items()} == dict.fromkeys(
        ["duplicates", "lost", "unexpected", "out_of_order"], "pass"
    )
    assert report["examples"] == []
    for part in report["output"]["partitions"]:
        # One committed and one aborted transaction per partition: the aborted
        # records and both markers are offsets without a committed record.
        per_partition = len(by_partition(GOOD, OUTPUT_PARTITIONS)[part["partition"]])
        aborted = len(
            by_partition([(b"the", b"999"), (b"zebra", b"1"), *GOOD[:10]], OUTPUT_PARTITIONS)[
                part["partition"]
            ]
        )
        assert part["records"] == per_partition
        assert part["gaps"] == (1 if per_partition else 0) + (aborted + 1 if aborted else 0)
    page = r.report_html.read_text()
    assert page.count('src="data:image/png;base64,') == 3
    assert ">clean<" in page


def test_injected_duplicates_are_counted_exactly(
    bootstrap: str, wordcount: tuple[str, str], tmp_path: Path
) -> None:
    src, dst = wordcount
    write_counts(bootstrap, dst, GOOD)
    again = [nth("cat", 1), nth("cat", 2), nth("mat", 3)]
    write_counts(bootstrap, dst, again)  # a retried, already committed write
    r = audit(bootstrap, src, dst, tmp_path)
    assert figures(r) == (3, 0, 0, 0)
    assert not r.clean
    assert {(v.key, v.value) for v in r.result.examples} == {
        (k.decode(), v.decode()) for k, v in again
    }
    for example in r.result.examples:
        assert example.topic == dst
        assert example.partition is not None
        assert example.offset is not None


def test_dropped_records_are_lost_exactly(
    bootstrap: str, wordcount: tuple[str, str], tmp_path: Path
) -> None:
    src, dst = wordcount
    dropped = {nth("the", 1), nth("the", 5), nth("naïve", 2), nth("42", 1)}
    write_counts(bootstrap, dst, [p for p in GOOD if p not in dropped])
    r = audit(bootstrap, src, dst, tmp_path)
    assert figures(r) == (0, 4, 0, 0)
    assert {(v.key, v.value) for v in r.result.examples} == {
        (k.decode(), v.decode()) for k, v in dropped
    }


def test_reordered_records_are_out_of_order_exactly(
    bootstrap: str, wordcount: tuple[str, str], tmp_path: Path
) -> None:
    src, dst = wordcount
    records = list(GOOD)
    for word in ("sat", "x-y"):  # two swaps of neighbouring counts of one word
        i, j = records.index(nth(word, 2)), records.index(nth(word, 3))
        records[i], records[j] = records[j], records[i]
    write_counts(bootstrap, dst, records)
    r = audit(bootstrap, src, dst, tmp_path)
    assert figures(r) == (0, 0, 0, 2)
    assert {(v.key, v.value) for v in r.result.examples} == {("sat", "2"), ("x-y", "2")}


def test_every_fault_at_once_and_aborted_junk_counts_nothing(
    bootstrap: str, wordcount: tuple[str, str], tmp_path: Path
) -> None:
    src, dst = wordcount
    dropped = {nth("on", 2), nth("on", 3)}
    records = [p for p in GOOD if p not in dropped]
    i, j = records.index(nth("mat", 4)), records.index(nth("mat", 5))
    records[i], records[j] = records[j], records[i]
    write_counts(bootstrap, dst, records)
    write_counts(bootstrap, dst, [(b"zebra", b"1"), (b"the", b"999"), *GOOD[:30]], abort=True)
    write_counts(bootstrap, dst, [nth("the", 2)])
    write_counts(bootstrap, dst, [(b"<script>alert(1)</script>", b"1"), (b"cat", b"0")])
    r = audit(bootstrap, src, dst, tmp_path)
    assert figures(r) == (1, 2, 2, 1)
    assert r.output_records == len(GOOD) - 2 + 1 + 2
    report = json.loads(r.report_json.read_text())
    assert report["verdict"] == "violations"
    assert report["violations"] == 6
    assert {k: c["count"] for k, c in report["checks"].items()} == {
        "duplicates": 1,
        "lost": 2,
        "unexpected": 2,
        "out_of_order": 1,
    }
    assert len(report["examples"]) == 6
    assert sum(k["total"] for k in report["by_key"]) == 6
    # Lost counts sit at no offset; the other four are binned by offset.
    assert sum(b["count"] for b in report["by_offset"]["bins"]) == 4
    page = r.report_html.read_text()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<script>" not in page


# -- lineage ----------------------------------------------------------------------


def send(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes]]]],
    *,
    abort: bool = False,
) -> None:
    """Write (partition, key, value, headers) records in one transaction."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": unique_name("tx"), "log_level": 0}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for partition, key, value, headers in records:
        producer.produce(topic, value, key, partition, headers=headers)
    assert producer.flush(30) == 0
    if abort:
        producer.abort_transaction(30)
    else:
        producer.commit_transaction(30)


def lineage_of(topic: str, partition: int, offset: int) -> list[tuple[str, bytes]]:
    return [
        (LINEAGE_TOPIC_HEADER, topic.encode()),
        (LINEAGE_PARTITION_HEADER, str(partition).encode()),
        (LINEAGE_OFFSET_HEADER, str(offset).encode()),
    ]


def test_lineage_check_on_real_topics(
    bootstrap: str, admin: Admin, topic: str, tmp_path: Path
) -> None:
    src, dst = f"{topic}-in", f"{topic}-out"
    admin.create_topics({src: 2, dst: OUTPUT_PARTITIONS})
    send(bootstrap, src, [(i % 2, f"k{i}".encode(), b"v", []) for i in range(40)])
    send(bootstrap, src, [(i % 2, b"aborted", b"v", []) for i in range(6)], abort=True)
    send(bootstrap, src, [(i % 2, f"k{i}".encode(), b"v", []) for i in range(40, 60)])
    committed = read_all(bootstrap, src)
    everything = read_all(bootstrap, src, isolation="read_uncommitted")
    aborted = [r for r in everything if r.key == b"aborted"]
    assert len(committed) == 60
    assert len(aborted) == 6

    outputs = [
        (i % OUTPUT_PARTITIONS, r.key, b"out", lineage_of(src, r.partition, r.offset))
        for i, r in enumerate(committed)
    ]
    dropped, doubled = outputs[3:6], outputs[10:12]
    kept = outputs[:3] + outputs[6:]
    send(bootstrap, dst, kept)
    send(bootstrap, dst, doubled)
    send(bootstrap, dst, outputs[20:40], abort=True)  # an aborted retry: nothing
    strangers = [
        (0, b"s1", b"out", lineage_of(src, aborted[0].partition, aborted[0].offset)),
        (1, b"s2", b"out", lineage_of(src, 0, 0)[:2]),  # no offset header
    ]
    send(bootstrap, dst, strangers)
    r = audit(bootstrap, src, dst, tmp_path, check="lineage")
    assert (r.duplicates, r.lost, r.unexpected, r.out_of_order) == (2, 3, 2, None)
    assert r.expected_outputs == r.input_records == 60
    lost = {(v.topic, v.partition, v.offset) for v in r.result.examples if v.kind == "lost"}
    assert lost == {(src, int(h[1][1]), int(h[2][1])) for _, _, _, h in dropped}


def test_clean_lineage_on_real_topics(
    bootstrap: str, admin: Admin, topic: str, tmp_path: Path
) -> None:
    src, dst = f"{topic}-in", f"{topic}-out"
    admin.create_topics({src: 2, dst: 1})
    send(bootstrap, src, [(i % 2, None, b"v", []) for i in range(30)])
    outputs = [
        (0, None, b"o", lineage_of(src, r.partition, r.offset)) for r in read_all(bootstrap, src)
    ]
    send(bootstrap, dst, outputs)
    r = audit(bootstrap, src, dst, tmp_path, check="lineage")
    assert r.clean
    assert (r.input_records, r.output_records) == (30, 30)


def test_an_output_is_audited_against_a_reference_file(
    bootstrap: str, wordcount: tuple[str, str], tmp_path: Path
) -> None:
    src, dst = wordcount
    records = [p for p in GOOD if p != nth("cat", 2)] + [nth("mat", 1), (b"zebra", b"1")]
    write_counts(bootstrap, dst, records)
    reference = tmp_path / "expected.jsonl"
    reference.write_text(
        "".join(json.dumps({"key": k.decode(), "value": v.decode()}) + "\n" for k, v in GOOD)
    )
    r = run_audit(
        input_topic=src,
        output_topic=dst,
        bootstrap=bootstrap,
        check="expected",
        expected=reference,
        master="local[2]",
        report_dir=tmp_path / "report",
        progress=False,
    )
    assert figures(r) == (1, 1, 1, None)
    assert r.expected_outputs == len(GOOD)
    assert {(v.kind.value, v.key, v.value) for v in r.result.examples} == {
        ("lost", "cat", "2"),
        ("duplicate", "mat", "1"),
        ("unexpected", "zebra", "1"),
    }
    assert json.loads(r.report_json.read_text())["verdict"] == "violations"
