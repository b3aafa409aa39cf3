"""The Spark checks compute exactly what the reference definitions compute."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from wordcount_data import NOT_WHITESPACE, ODD_WHITESPACE

from kstream.audit import checks, spark_checks
from kstream.audit.checks import (
    LINEAGE_OFFSET_HEADER,
    LINEAGE_PARTITION_HEADER,
    LINEAGE_TOPIC_HEADER,
    Record,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.audit

IN, OUT = "in", "out"
# Few examples: each one runs several Spark jobs (about a second each on 2 cores).
SPARK_EXAMPLES = settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def frame(spark: SparkSession, records: list[Record]) -> DataFrame:
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
    )

    header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    schema = StructType(
        [
            StructField("partition", IntegerType(), False),
            StructField("offset", LongType(), False),
            StructField("key", BinaryType()),
            StructField("value", BinaryType()),
            StructField("headers", ArrayType(header)),
        ]
    )
    rows = [
        (r.partition, r.offset, r.key, r.value, list(r.headers) if r.headers else None)
        for r in records
    ]
    return spark.createDataFrame(rows, schema)


def ranges_of(records: list[Record], partitions: int) -> dict[int, tuple[int, int]]:
    ends = dict.fromkeys(range(partitions), 0)
    for r in records:
        ends[r.partition] = max(ends[r.partition], r.offset + 1)
    return {p: (0, end) for p, end in ends.items()}


def with_offsets(
    pairs: list[tuple[int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]],
    rng: random.Random,
) -> list[Record]:
    """Give each (partition, key, value, headers) an offset, leaving random gaps."""
    nxt: dict[int, int] = {}
    out = []
    for p, k, v, h in pairs:
        offset = nxt.get(p, 0) + rng.choice([0, 0, 0, 1, 2])  # gaps: markers, aborted records
        nxt[p] = offset + 1
        out.append(Record(p, offset, k, v, h))
    return out


def test_spark_splits_words_exactly_like_python(spark: SparkSession) -> None:
    from pyspark.sql import functions as sf

    text = "".join(f"w{i}{sep}" for i, sep in enumerate(ODD_WHITESPACE + NOT_WHITESPACE))
    lines = [text, "  lead and trail\u3000", "\u00a0", "", "one"]
    df = spark.createDataFrame([(line,) for line in lines], "line string")
    split = sf.split("line", checks.word_separator_regex())
    got = [
        [w for w in row[0] if w]
        for row in df.select(split).collect()  # order of a local list is kept
    ]
    assert got == [line.split() for line in lines]
    assert "w10\u200bw11\ufeffw12\u180ew13-w14," in got[0]


words = st.sampled_from(["a", "b", "cc", "é", "<x>", "a.b"])
separators = st.sampled_from([" ", *ODD_WHITESPACE])


@st.composite
def word_count_case(draw: st.DrawFn) -> tuple[list[Record], list[Record]]:
    rng = random.Random(draw(st.integers(0, 2**32)))
    lines = draw(
        st.lists(
            st.lists(st.tuples(words, separators), max_size=6).map(
                lambda ws: "".join(w + s for w, s in ws)
            ),
            max_size=10,
        )
    )
    inputs = with_offsets(
        [(rng.randrange(2), None, line.encode(), ()) for line in lines]
        + [(0, None, None, ())],  # a tombstone has no words
        rng,
    )
    counts: dict[str, int] = {}
    outs: list[tuple[int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]] = []
    for line in lines:
        for w in line.split():
            counts[w] = counts.get(w, 0) + 1
            p = hash(w) % 3 if rng.random() < 0.9 else rng.randrange(3)
            action = draw(st.sampled_from(["keep"] * 6 + ["drop", "dup", "swap", "junk", "late"]))
            record = (p, w.encode(), str(counts[w]).encode(), ())
            if action == "drop":
                continue
            outs.append(record)
            if action == "dup":
                outs.append(record)
            elif action == "swap" and len(outs) >= 2:
                outs[-1], outs[-2] = outs[-2], outs[-1]
            elif action == "junk":
                outs.append(
                    (
                        p,
                        rng.choice([w.encode(), b"zz", None]),
                        rng.choice([b"0", b"99", b"x", None, b"01"]),
                        (),
                    )
                )
            elif action == "late":
                outs.insert(rng.randrange(len(outs) + 1), record)
    return inputs, with_offsets(outs, rng)


@SPARK_EXAMPLES
@given(case=word_count_case())
def test_running_count_agrees(spark: SparkSession, case: tuple[list[Record], list[Record]]) -> None:
    inputs, outputs = case
    ranges = ranges_of(outputs, 3)
    expected = checks.running_count(inputs, outputs, input_topic=IN, output_topic=OUT, bin_width=3)
    got, stats = spark_checks.running_count(
        frame(spark, inputs),
        frame(spark, outputs),
        input_topic=IN,
        output_topic=OUT,
        ranges=ranges,
        bin_width=3,
    )
    assert got == expected
    assert stats == checks.partition_stats(OUT, outputs, ranges)


@st.composite
def lineage_case(draw: st.DrawFn) -> tuple[list[Record], list[Record]]:
    rng = random.Random(draw(st.integers(0, 2**32)))
    n = draw(st.integers(0, 25))
    inputs = with_offsets([(rng.randrange(2), f"k{i}".encode(), b"v", ()) for i in range(n)], rng)
    outs: list[tuple[int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]] = []

    def headers(topic: str, p: str, o: str) -> tuple[tuple[str, bytes | None], ...]:
        return (
            (LINEAGE_TOPIC_HEADER, topic.encode()),
            (LINEAGE_PARTITION_HEADER, p.encode()),
            (LINEAGE_OFFSET_HEADER, o.encode()),
        )

    for r in inputs:
        h = headers(IN, str(r.partition), str(r.offset))
        action = draw(st.sampled_from(["keep"] * 5 + ["drop", "dup", "bad"]))
        if action == "drop":
            continue
        outs.append((rng.randrange(3), r.key, b"out", h))
        if action == "dup":
            outs.append((rng.randrange(3), r.key, b"out", h))
        elif action == "bad":
            bad = rng.choice(
                [
                    headers("other", str(r.partition), str(r.offset)),
                    headers(IN, str(r.partition), str(r.offset + 1000)),
                    headers(IN, "0" + str(r.partition), str(r.offset)),
                    h[:2],
                    (),
                    ((LINEAGE_TOPIC_HEADER, None), *h[1:]),
                ]
            )
            outs.append((rng.randrange(3), b"bad", b"out", bad))
    rng.shuffle(outs)
    return inputs, with_offsets(outs, rng)


@SPARK_EXAMPLES
@given(case=lineage_case())
def test_lineage_agrees(spark: SparkSession, case: tuple[list[Record], list[Record]]) -> None:
    inputs, outputs = case
    ranges = ranges_of(outputs, 3)
    expected = checks.lineage(inputs, outputs, input_topic=IN, output_topic=OUT, bin_width=4)
    got, stats = spark_checks.lineage(
        frame(spark, inputs),
        frame(spark, outputs),
        input_topic=IN,
        output_topic=OUT,
        ranges=ranges,
        bin_width=4,
    )
    assert got == expected
    assert stats == checks.partition_stats(OUT, outputs, ranges)


def test_input_stats_count_records_and_gaps(spark: SparkSession) -> None:
    records = [Record(0, 0, None, b"a"), Record(0, 2, None, b"b"), Record(1, 7, None, b"c")]
    ranges = {0: (0, 4), 1: (5, 8), 2: (0, 0)}
    assert spark_checks.input_stats(frame(spark, records), IN, ranges) == checks.partition_stats(
        IN, records, ranges
    )


@st.composite
def expected_case(draw: st.DrawFn) -> tuple[list[tuple[str | None, str | None]], list[Record]]:
    rng = random.Random(draw(st.integers(0, 2**32)))
    keys, values = (
        st.sampled_from(["a", "b", "é", None]),
        st.sampled_from(["1", "22", "x" * 120, None]),
    )
    want = draw(st.lists(st.tuples(keys, values), max_size=15))
    outs: list[tuple[int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]] = []
    for k, v in want:
        action = draw(st.sampled_from(["keep"] * 5 + ["drop", "dup", "junk"]))
        record = (
            rng.randrange(3),
            None if k is None else k.encode(),
            None if v is None else v.encode(),
            (),
        )
        if action == "drop":
            continue
        outs.append(record)
        if action == "dup":
            outs.append(record)
        elif action == "junk":
            outs.append((rng.randrange(3), b"zz", rng.choice([b"1", None]), ()))
    rng.shuffle(outs)
    return want, with_offsets(outs, rng)


@SPARK_EXAMPLES
@given(case=expected_case())
def test_expected_output_agrees(
    spark: SparkSession, case: tuple[list[tuple[str | None, str | None]], list[Record]]
) -> None:
    want, outputs = case
    ranges = ranges_of(outputs, 3)
    expected = checks.expected_output(want, outputs, output_topic=OUT, bin_width=2)
    got, stats = spark_checks.expected_output(
        spark.createDataFrame(want, "key string, value string"),
        frame(spark, outputs),
        output_topic=OUT,
        ranges=ranges,
        bin_width=2,
    )
    assert got == expected
    assert stats == checks.partition_stats(OUT, outputs, ranges)
