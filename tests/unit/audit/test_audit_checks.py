"""The audit's check definitions (kstream.audit.checks), without Spark or Kafka."""

from __future__ import annotations

import random
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kstream.audit.checks import (
    EXAMPLE_LIMIT,
    LINEAGE_OFFSET_HEADER,
    LINEAGE_PARTITION_HEADER,
    LINEAGE_TOPIC_HEADER,
    CheckResult,
    Record,
    Violation,
    ViolationKind,
    lineage,
    partition_stats,
    running_count,
    word_separator_regex,
    word_separators,
    words,
)

IN, OUT = "in", "out"


def counts_for(lines: list[str]) -> list[tuple[bytes, bytes]]:
    seen: Counter[str] = Counter()
    out = []
    for line in lines:
        for w in line.split():
            seen[w] += 1
            out.append((w.encode(), str(seen[w]).encode()))
    return out


def inputs_of(lines: list[str]) -> list[Record]:
    return [Record(0, i, None, line.encode()) for i, line in enumerate(lines)]


def outputs_of(pairs: list[tuple[bytes | None, bytes | None]], partition: int = 0) -> list[Record]:
    return [Record(partition, i, k, v) for i, (k, v) in enumerate(pairs)]


def audit(lines: list[str], pairs: list[tuple[bytes | None, bytes | None]]) -> CheckResult:
    return running_count(inputs_of(lines), outputs_of(pairs), input_topic=IN, output_topic=OUT)


def figures(r: CheckResult) -> tuple[int, int, int, int | None]:
    return (r.duplicates, r.lost, r.unexpected, r.out_of_order)


LINES = ["a b a", "b\tc  a", "c\u00a0a\u3000d"]
# a: 4, b: 2, c: 2, d: 1
GOOD = counts_for(LINES)


# -- words ----------------------------------------------------------------------


def test_separators_are_exactly_what_str_split_splits_on() -> None:
    seps = set(word_separators())
    assert {"\t", "\n", " ", "\x0b", "\x0c", "\r", "\x1c", "\x85", "\u00a0", "\u3000"} <= seps
    assert "\u200b" not in seps
    assert "\ufeff" not in seps
    assert "x" not in seps
    # The same predicate as str.isspace(), which CPython implements with the same table.
    assert seps == {chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()}


def test_separator_regex_splits_like_python() -> None:
    # Python's `re` reads the `\x{...}` escapes differently, so translate them to
    # check that the class names the same code points Spark's Java regex will see.
    java = word_separator_regex()
    python = re.sub(r"\\x\{([0-9a-f]+)\}", lambda m: re.escape(chr(int(m.group(1), 16))), java)
    text = "  a\tb\u00a0\u00a0c\u3000d\x1ce\u200bf\r\n"
    parts = [p for p in re.split(python, text) if p]
    assert parts == text.split() == ["a", "b", "c", "d", "e\u200bf"]


def test_words_decode_utf8_and_split_like_python() -> None:
    assert words("x\u3000y  z".encode()) == ["x", "y", "z"]
    assert words(None) == []
    assert words(b"") == []
    assert words(b"caf\xc3\xa9 \xff") == ["café", "\ufffd"]


# -- running-count ----------------------------------------------------------------


def test_clean_running_count_has_no_violation() -> None:
    r = audit(LINES, GOOD)
    assert r.clean
    assert (r.expected, r.outputs) == (9, 9)
    assert figures(r) == (0, 0, 0, 0)
    assert r.examples == ()
    assert r.by_key == ()
    assert r.by_offset == ()


def test_repeated_output_is_one_duplicate_per_extra_copy() -> None:
    r = audit(LINES, [*GOOD, GOOD[0], GOOD[0], GOOD[3]])
    assert figures(r) == (3, 0, 0, 0)
    assert [v.offset for v in r.examples] == [9, 10, 11]
    assert {k.key: k.duplicates for k in r.by_key} == {"a": 2, "b": 1}


def test_missing_counts_are_lost_and_located_by_key_and_value() -> None:
    # Drop a=2 and d=1 (d's only output).
    pairs = [p for p in GOOD if p not in {(b"a", b"2"), (b"d", b"1")}]
    r = audit(LINES, pairs)
    assert figures(r) == (0, 2, 0, 0)
    assert {(v.key, v.value, v.partition, v.offset) for v in r.examples} == {
        ("a", "2", None, None),
        ("d", "1", None, None),
    }


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (b"zebra", b"1"),  # not an input word
        (None, b"1"),  # no key
        (b"a", b"0"),  # counts start at 1
        (b"a", b"5"),  # a occurs 4 times
        (b"a", b"02"),  # not canonical decimal
        (b"a", b" 2"),
        (b"a", b"2\n"),
        (b"a", b"two"),
        (b"a", None),
        (b"A", b"1"),  # words are case-sensitive
    ],
)
def test_output_no_input_can_cause_is_unexpected(key: bytes | None, value: bytes | None) -> None:
    r = audit(LINES, [*GOOD, (key, value)])
    assert figures(r) == (0, 0, 1, 0)
    assert r.examples[0].kind is ViolationKind.UNEXPECTED
    assert r.examples[0].offset == len(GOOD)


def test_adjacent_swap_is_one_out_of_order() -> None:
    pairs = list(GOOD)
    i, j = pairs.index((b"a", b"2")), pairs.index((b"a", b"3"))
    pairs[i], pairs[j] = pairs[j], pairs[i]
    r = audit(LINES, pairs)
    assert figures(r) == (0, 0, 0, 1)
    assert (r.examples[0].key, r.examples[0].value, r.examples[0].offset) == ("a", "2", j)


def test_every_value_below_an_earlier_higher_one_is_out_of_order() -> None:
    lines = ["w w w w w"]
    r = audit(lines, [(b"w", v) for v in (b"1", b"4", b"2", b"3", b"5")])
    assert figures(r) == (0, 0, 0, 2)


def test_order_is_per_partition() -> None:
    lines = ["w w"]
    outs = [Record(1, 0, b"w", b"2"), Record(0, 7, b"w", b"1")]
    r = running_count(inputs_of(lines), outs, input_topic=IN, output_topic=OUT)
    assert r.clean


def test_late_duplicate_is_a_duplicate_not_out_of_order() -> None:
    r = audit(LINES, [*GOOD, (b"a", b"1")])
    assert figures(r) == (1, 0, 0, 0)


def test_examples_are_limited_and_ordered() -> None:
    lines = ["x " * 50]
    r = audit(lines, [(b"x", b"1")] * 60)
    assert r.duplicates == 59
    assert r.lost == 49
    assert len(r.examples) == EXAMPLE_LIMIT
    assert r.examples == tuple(sorted(r.examples, key=Violation.sort_key))
    assert {v.kind for v in r.examples} == {ViolationKind.DUPLICATE}  # "duplicate" < "lost"


def test_offset_bins_count_violations_per_bin() -> None:
    r = running_count(
        inputs_of(["q"]),
        outputs_of([(b"q", b"1")] + [(b"zz", b"1")] * 25),
        input_topic=IN,
        output_topic=OUT,
        bin_width=10,
    )
    assert [(b.start, b.count) for b in r.by_offset] == [(0, 9), (10, 10), (20, 6)]


fault = st.sampled_from(["drop", "duplicate", "unexpected", "keep"])


@settings(max_examples=200)
@given(
    lines=st.lists(
        st.lists(st.sampled_from(["a", "b", "c", "dd", "é"]), max_size=6).map(" ".join),
        max_size=12,
    ),
    faults=st.lists(fault, max_size=80),
)
def test_figures_add_up_and_match_injected_faults(lines: list[str], faults: list[str]) -> None:
    good = counts_for(lines)
    pairs: list[tuple[bytes | None, bytes | None]] = []
    dropped = duplicated = bogus = 0
    for i, pair in enumerate(good):
        action = faults[i] if i < len(faults) else "keep"
        if action == "drop":
            dropped += 1
            continue
        pairs.append(pair)
        if action == "duplicate":
            pairs.append(pair)
            duplicated += 1
        elif action == "unexpected":
            pairs.append((pair[0], b"999"))
            bogus += 1
    r = audit(lines, pairs)
    assert figures(r) == (duplicated, dropped, bogus, 0)
    assert r.outputs == r.expected - r.lost + r.duplicates + r.unexpected


# -- lineage ----------------------------------------------------------------------


def lineage_out(p: int, o: int, topic: str = IN) -> tuple[tuple[str, bytes | None], ...]:
    return (
        (LINEAGE_TOPIC_HEADER, topic.encode()),
        (LINEAGE_PARTITION_HEADER, str(p).encode()),
        (LINEAGE_OFFSET_HEADER, str(o).encode()),
    )


def lineage_audit(inputs: list[Record], outputs: list[Record]) -> CheckResult:
    return lineage(inputs, outputs, input_topic=IN, output_topic=OUT)


# Input offsets have gaps (markers, aborted records): 0, 1, 3 and 5, 8.
SOURCE = [
    Record(0, 0, b"k0", b"v"),
    Record(0, 1, b"k1", b"v"),
    Record(0, 3, b"k3", b"v"),
    Record(1, 5, b"k5", b"v"),
    Record(1, 8, b"k8", b"v"),
]


def test_clean_lineage() -> None:
    outs = [
        Record(0, i, r.key, b"x", lineage_out(r.partition, r.offset)) for i, r in enumerate(SOURCE)
    ]
    r = lineage_audit(SOURCE, outs)
    assert r.clean
    assert r.out_of_order is None
    assert (r.expected, r.outputs) == (5, 5)


def test_lineage_duplicates_losses_and_strangers() -> None:
    outs = [
        Record(0, 0, b"k0", b"x", lineage_out(0, 0)),
        Record(0, 1, b"k0", b"x", lineage_out(0, 0)),  # duplicate
        Record(0, 2, b"k3", b"x", lineage_out(0, 3)),
        Record(0, 3, b"k5", b"x", lineage_out(1, 5)),
        Record(0, 4, b"?", b"x", lineage_out(0, 2)),  # offset 2 holds no committed record
        Record(0, 5, b"?", b"x", lineage_out(0, 1, topic="other")),  # another topic
        Record(0, 6, b"?", b"x", lineage_out(0, 1)[:2]),  # no offset header
        Record(
            0,
            7,
            b"?",
            b"x",
            (
                (LINEAGE_TOPIC_HEADER, b"in"),
                (LINEAGE_PARTITION_HEADER, b"00"),
                (LINEAGE_OFFSET_HEADER, b"1"),
            ),
        ),
    ]
    r = lineage_audit(SOURCE, outs)
    assert (r.duplicates, r.lost, r.unexpected) == (1, 2, 4)
    lost = {
        (v.topic, v.partition, v.offset, v.key) for v in r.examples if v.kind is ViolationKind.LOST
    }
    assert lost == {(IN, 0, 1, "k1"), (IN, 1, 8, "k8")}
    dup = next(v for v in r.examples if v.kind is ViolationKind.DUPLICATE)
    assert (dup.topic, dup.partition, dup.offset, dup.source) == (OUT, 0, 1, "in/0/0")
    assert r.outputs == r.expected - r.lost + r.duplicates + r.unexpected


def test_first_header_wins() -> None:
    headers = (*lineage_out(0, 0), (LINEAGE_OFFSET_HEADER, b"1"))
    r = lineage_audit(SOURCE[:1], [Record(0, 0, None, None, headers)])
    assert r.clean


def test_partition_stats_count_gaps() -> None:
    stats = partition_stats(IN, SOURCE, {0: (0, 5), 1: (5, 10), 2: (0, 0)})
    assert [(s.partition, s.records, s.first_offset, s.last_offset, s.gaps) for s in stats] == [
        (0, 3, 0, 3, 2),
        (1, 2, 5, 8, 3),
        (2, 0, None, None, 0),
    ]


def test_importing_the_audit_does_not_import_pyspark() -> None:
    # `import kstream` and `import kstream.audit` must work without the audit extra.
    code = "import sys, kstream.tools.cli, kstream.audit; sys.exit('pyspark' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


# -- expected output --------------------------------------------------------------


def out(p: int, o: int, k: str | None, v: str | None) -> Record:
    return Record(p, o, None if k is None else k.encode(), None if v is None else v.encode())


def test_expected_output_is_a_multiset_comparison() -> None:
    from kstream.audit.checks import expected_output

    want = [("a", "1"), ("a", "1"), ("b", None), (None, "x")]
    outputs = [
        out(0, 0, "a", "1"),
        out(1, 0, "b", None),
        out(0, 3, "a", "1"),
        out(0, 4, "a", "1"),  # a third copy: a duplicate
        out(1, 1, "c", "9"),  # listed nowhere: unexpected
    ]
    r = expected_output(want, outputs, output_topic="o")
    assert (r.expected, r.outputs, r.duplicates, r.lost, r.unexpected, r.out_of_order) == (
        4,
        5,
        1,
        1,
        1,
        None,
    )
    kinds = {(v.kind.value, v.key, v.value, v.offset) for v in r.examples}
    assert kinds == {
        ("duplicate", "a", "1", 4),
        ("unexpected", "c", "9", 1),
        ("lost", None, "x", None),
    }


@settings(max_examples=200)
@given(
    want=st.lists(st.tuples(st.sampled_from(["a", "b", None]), st.sampled_from(["1", "2", None]))),
    strangers=st.lists(st.tuples(st.just("z"), st.sampled_from(["1", "9"]))),
    copies=st.sets(st.integers(0, 30)),
    drop=st.sets(st.integers(0, 30)),
    seed=st.randoms(),
)
def test_expected_output_figures_add_up(
    want: list[tuple[str | None, str | None]],
    strangers: list[tuple[str, str]],
    copies: set[int],
    drop: set[int],
    seed: random.Random,
) -> None:
    from kstream.audit.checks import expected_output

    kept = [pair for i, pair in enumerate(want) if i not in drop]
    again = [pair for i, pair in enumerate(kept) if i in copies]
    pairs = kept + again + strangers
    seed.shuffle(pairs)
    outputs = [out(i % 2, i, k, v) for i, (k, v) in enumerate(pairs)]
    r = expected_output(want, outputs, output_topic="o")
    # Counted as multisets: a copy of a kept record stands in for a dropped equal one.
    n, have = Counter(want), Counter(pairs)
    assert (r.lost, r.duplicates, r.unexpected) == (
        sum(max(0, n[p] - have[p]) for p in n),
        sum(max(0, have[p] - n[p]) for p in n),
        len(strangers),
    )
    assert r.outputs == r.expected - r.lost + r.duplicates + r.unexpected


def test_a_malformed_reference_is_named_with_its_line(tmp_path: Path) -> None:
    from kstream.audit.checks import load_expected
    from kstream.errors import ConfigurationError

    good = tmp_path / "good.jsonl"
    good.write_text('{"key": "a", "value": "1"}\n\n{"value": "2"}\n{"key": null, "value": null}\n')
    assert load_expected(good) == [("a", "1"), (None, "2"), (None, None)]
    for body, message in [
        ('{"key": "a"}\n{"key": 1}\n', r"bad.jsonl:2: key and value must be text or null"),
        ('{"key": "a", "other": 1}\n', r"bad.jsonl:1: expected an object"),
        ("[1]\n", r"bad.jsonl:1: expected an object"),
        ('{"key": \n', r"bad.jsonl:1: not JSON"),
    ]:
        bad = tmp_path / "bad.jsonl"
        bad.write_text(body)
        with pytest.raises(ConfigurationError, match=message):
            load_expected(bad)
    with pytest.raises(ConfigurationError, match="cannot read the expected output"):
        load_expected(tmp_path / "missing.jsonl")
