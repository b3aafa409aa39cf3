"""The checks of `kstream.audit.checks`, computed with Spark for topics of any size.

Both functions take the committed records of the two topics as DataFrames with
the columns of Spark's Kafka source (``partition``, ``offset``, ``key``,
``value`` and, for lineage, ``headers``) and return the same `CheckResult` the
pure reference functions return for the same records: the test suite checks
this on random data.

Cost model: one pass over the output topic computes every total and the
per-partition statistics (a shuffle by key, then window functions that reuse
that partitioning). Only when that pass finds a violation do further passes
collect examples, per-key figures and offset histograms, so a clean audit reads
each topic once.

pyspark is imported inside the functions only: ``import kstream.audit`` must
work without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kstream.audit.checks import (
    EXAMPLE_LIMIT,
    KEY_LIMIT,
    LINEAGE_OFFSET_HEADER,
    LINEAGE_PARTITION_HEADER,
    LINEAGE_TOPIC_HEADER,
    VALUE_CHARS,
    Check,
    CheckResult,
    KeyFigures,
    OffsetBin,
    PartitionStats,
    Violation,
    ViolationKind,
    word_separator_regex,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = ["expected_output", "input_stats", "lineage", "running_count"]

# Java regexes: `\A`/`\z` anchor at the very ends (`$` would also match before a
# trailing newline, so b"17\n" would pass for a count).
_COUNT = r"\A[1-9][0-9]{0,17}\z"
_POSITION = r"\A(0|[1-9][0-9]{0,17})\z"

_KINDS = [k.value for k in ViolationKind]


def running_count(
    inputs: DataFrame,
    outputs: DataFrame,
    *,
    input_topic: str,
    output_topic: str,
    ranges: dict[int, tuple[int, int]],
    bin_width: int = 1,
) -> tuple[CheckResult, tuple[PartitionStats, ...]]:
    """`kstream.audit.checks.running_count` in Spark, plus the output's partition statistics."""
    from pyspark.sql import Window
    from pyspark.sql import functions as sf

    del input_topic  # the input is only counted, as in the reference definition
    word = sf.explode(sf.split(sf.col("value").cast("string"), word_separator_regex()))
    counts = (
        inputs.select(word.alias("word"))
        .where(sf.col("word") != "")
        .groupBy("word")
        .agg(sf.count(sf.lit(1)).alias("n"))
        .cache()
    )
    try:
        expected = int(counts.agg(sf.sum("n")).first()[0] or 0)  # type: ignore[index]

        count = sf.when(sf.col("text").rlike(_COUNT), sf.col("text").cast("long"))
        rows = (
            outputs.select(
                "partition",
                "offset",
                sf.col("key").cast("string").alias("k"),
                sf.col("value").cast("string").alias("text"),
            )
            .join(counts, sf.col("k") == sf.col("word"), "left")
            .withColumn("v", count)
        )
        valid = sf.coalesce(sf.col("v").between(sf.lit(1), sf.col("n")), sf.lit(False))
        rows = rows.withColumn("vv", sf.when(valid, sf.col("v")))
        # Duplicate: not the first (partition, offset) carrying this (key, value).
        first = Window.partitionBy("k", "vv").orderBy("partition", "offset")
        # Out of order: a lower value than any earlier one for this key in this partition.
        before = (
            Window.partitionBy("k", "partition")
            .orderBy("offset")
            .rowsBetween(Window.unboundedPreceding, -1)
        )
        flags = rows.withColumn(
            "kind",
            sf.when(sf.col("vv").isNull(), sf.lit(ViolationKind.UNEXPECTED.value))
            .when(sf.row_number().over(first) > 1, sf.lit(ViolationKind.DUPLICATE.value))
            .when(
                sf.max("vv").over(before) > sf.col("vv"), sf.lit(ViolationKind.OUT_OF_ORDER.value)
            ),
        )
        totals, stats = _first_pass(flags, output_topic, ranges)
        lost = expected - totals["correct"] - totals[ViolationKind.OUT_OF_ORDER.value]
        figures = _figures(Check.RUNNING_COUNT, expected, totals, lost)
        if figures.clean:
            return figures, stats

        # Lost: for each word whose distinct valid values fall short of N_w, the values
        # of 1..N_w that no output carries. Only words with a loss build the sequence.
        seen = (
            flags.where(sf.col("vv").isNotNull())
            .groupBy("k")
            .agg(sf.collect_set("vv").alias("seen"))
        )
        missing = (
            counts.join(seen, sf.col("word") == sf.col("k"), "left")
            .withColumn("seen", sf.coalesce(sf.col("seen"), sf.array().cast("array<bigint>")))
            .where(sf.col("n") > sf.size("seen"))
            .select(
                sf.col("word").alias("key"),
                sf.explode(
                    sf.array_except(
                        sf.sequence(sf.lit(1).cast("long"), sf.col("n")), sf.col("seen")
                    )
                ).alias("missing"),
            )
            .select(
                sf.lit(ViolationKind.LOST.value).alias("kind"),
                sf.lit(output_topic).alias("topic"),
                sf.lit(None).cast("int").alias("partition"),
                sf.lit(None).cast("long").alias("offset"),
                "key",
                sf.col("missing").cast("string").alias("value"),
                sf.lit(None).cast("string").alias("source"),
            )
        )
        found = _flagged(flags, output_topic, sf.lit(None).cast("string"))
        return _details(figures, found.unionByName(missing), bin_width), stats
    finally:
        counts.unpersist()


def lineage(
    inputs: DataFrame,
    outputs: DataFrame,
    *,
    input_topic: str,
    output_topic: str,
    ranges: dict[int, tuple[int, int]],
    bin_width: int = 1,
) -> tuple[CheckResult, tuple[PartitionStats, ...]]:
    """`kstream.audit.checks.lineage` in Spark, plus the output's partition statistics."""
    from pyspark.sql import Window
    from pyspark.sql import functions as sf

    committed = inputs.select(
        sf.col("partition").alias("ip"),
        sf.col("offset").alias("io"),
        sf.col("key").cast("string").alias("ik"),
    ).cache()
    try:
        expected = committed.count()

        def header(name: str) -> Column:
            matching = sf.filter("headers", lambda h: h["key"] == sf.lit(name))
            return sf.get(matching, 0)["value"].cast("string")

        rows = outputs.select(
            "partition",
            "offset",
            sf.col("key").cast("string").alias("k"),
            sf.col("value").cast("string").alias("text"),
            header(LINEAGE_TOPIC_HEADER).alias("st"),
            header(LINEAGE_PARTITION_HEADER).alias("sp"),
            header(LINEAGE_OFFSET_HEADER).alias("so"),
        )
        well_formed = (
            (sf.col("st") == sf.lit(input_topic))
            & sf.col("sp").rlike(_POSITION)
            & sf.col("so").rlike(_POSITION)
        )
        rows = rows.withColumns(
            {
                "sp_i": sf.when(well_formed, sf.col("sp").cast("int")),
                "so_i": sf.when(well_formed, sf.col("so").cast("long")),
            }
        )
        rows = rows.join(
            committed.select("ip", "io", sf.lit(True).alias("present")),
            (sf.col("sp_i") == sf.col("ip")) & (sf.col("so_i") == sf.col("io")),
            "left",
        )
        # Partitioned like the join's left side (equal to ip/io wherever a record matched),
        # so the window needs no second shuffle.
        first = Window.partitionBy("sp_i", "so_i").orderBy("partition", "offset")
        flags = rows.withColumn(
            "kind",
            sf.when(sf.col("present").isNull(), sf.lit(ViolationKind.UNEXPECTED.value)).when(
                sf.row_number().over(first) > 1, sf.lit(ViolationKind.DUPLICATE.value)
            ),
        )
        totals, stats = _first_pass(flags, output_topic, ranges)
        figures = _figures(Check.LINEAGE, expected, totals, expected - totals["correct"])
        if figures.clean:
            return figures, stats

        claimed = flags.where(sf.col("kind").isNull()).select("ip", "io")
        missing = committed.join(claimed, ["ip", "io"], "left_anti").select(
            sf.lit(ViolationKind.LOST.value).alias("kind"),
            sf.lit(input_topic).alias("topic"),
            sf.col("ip").alias("partition"),
            sf.col("io").alias("offset"),
            sf.col("ik").alias("key"),
            sf.lit(None).cast("string").alias("value"),
            sf.lit(None).cast("string").alias("source"),
        )
        source = sf.when(
            sf.col("st").isNotNull() & sf.col("sp").isNotNull() & sf.col("so").isNotNull(),
            sf.concat_ws("/", "st", "sp", "so"),
        )
        found = _flagged(flags, output_topic, source)
        return _details(figures, found.unionByName(missing), bin_width), stats
    finally:
        committed.unpersist()


def expected_output(
    expected: DataFrame,
    outputs: DataFrame,
    *,
    output_topic: str,
    ranges: dict[int, tuple[int, int]],
    bin_width: int = 1,
) -> tuple[CheckResult, tuple[PartitionStats, ...]]:
    """`kstream.audit.checks.expected_output` in Spark, plus the output's partition statistics.

    `expected` has the text columns ``key`` and ``value``, one row per reference record.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as sf

    want = (
        expected.groupBy(sf.col("key").alias("ek"), sf.col("value").alias("ev"))
        .agg(sf.count(sf.lit(1)).alias("n"))
        .cache()
    )
    try:
        total = int(want.agg(sf.sum("n")).first()[0] or 0)  # type: ignore[index]
        rows = outputs.select(
            "partition",
            "offset",
            sf.col("key").cast("string").alias("k"),
            sf.col("value").cast("string").alias("text"),
        )
        # The i-th output carrying (k, v), in (partition, offset) order, is correct
        # while i <= n(k, v): the rest are duplicates.
        nth = Window.partitionBy("k", "text").orderBy("partition", "offset")
        rows = rows.withColumn("i", sf.row_number().over(nth)).join(
            want,
            sf.col("k").eqNullSafe(sf.col("ek")) & sf.col("text").eqNullSafe(sf.col("ev")),
            "left",
        )
        flags = rows.withColumn(
            "kind",
            sf.when(sf.col("n").isNull(), sf.lit(ViolationKind.UNEXPECTED.value)).when(
                sf.col("i") > sf.col("n"), sf.lit(ViolationKind.DUPLICATE.value)
            ),
        )
        totals, stats = _first_pass(flags, output_topic, ranges)
        figures = _figures(Check.EXPECTED, total, totals, total - totals["correct"])
        if figures.clean:
            return figures, stats

        seen = (
            flags.where(sf.col("kind").isNull())
            .groupBy(sf.col("k").alias("sk"), sf.col("text").alias("sv"))
            .agg(sf.count(sf.lit(1)).alias("seen"))
        )
        missing = (
            want.join(
                seen,
                sf.col("ek").eqNullSafe(sf.col("sk")) & sf.col("ev").eqNullSafe(sf.col("sv")),
                "left",
            )
            .withColumn("short", sf.col("n") - sf.coalesce(sf.col("seen"), sf.lit(0)))
            .where(sf.col("short") > 0)
            .select(
                sf.lit(ViolationKind.LOST.value).alias("kind"),
                sf.lit(output_topic).alias("topic"),
                sf.lit(None).cast("int").alias("partition"),
                sf.lit(None).cast("long").alias("offset"),
                sf.col("ek").alias("key"),
                sf.substring("ev", 1, VALUE_CHARS).alias("value"),
                sf.lit(None).cast("string").alias("source"),
                sf.explode(sf.array_repeat(sf.lit(0), sf.col("short").cast("int"))).alias("_"),
            )
            .drop("_")
        )
        found = _flagged(flags, output_topic, sf.lit(None).cast("string"))
        return _details(figures, found.unionByName(missing), bin_width), stats
    finally:
        want.unpersist()


def input_stats(
    inputs: DataFrame, topic: str, ranges: dict[int, tuple[int, int]]
) -> tuple[PartitionStats, ...]:
    """Per-partition statistics of the input topic (one pass)."""
    from pyspark.sql import functions as sf

    got = {
        int(r["partition"]): (int(r["records"]), r["first"], r["last"])
        for r in inputs.groupBy("partition")
        .agg(
            sf.count(sf.lit(1)).alias("records"),
            sf.min("offset").alias("first"),
            sf.max("offset").alias("last"),
        )
        .collect()
    }
    return _stats(topic, ranges, got)


# -- shared passes --------------------------------------------------------------


def _flagged(flags: DataFrame, output_topic: str, source: Column) -> DataFrame:
    """The output records a check flagged, as violation rows (`source`: their lineage)."""
    from pyspark.sql import functions as sf

    return flags.where(sf.col("kind").isNotNull()).select(
        "kind",
        sf.lit(output_topic).alias("topic"),
        "partition",
        "offset",
        sf.col("k").alias("key"),
        sf.substring("text", 1, VALUE_CHARS).alias("value"),
        source.alias("source"),
    )


def _is(kind: ViolationKind) -> Column:
    from pyspark.sql import functions as sf

    return sf.coalesce(sf.col("kind") == sf.lit(kind.value), sf.lit(False))


def _first_pass(
    flags: DataFrame, topic: str, ranges: dict[int, tuple[int, int]]
) -> tuple[dict[str, int], tuple[PartitionStats, ...]]:
    """One aggregation per output partition: record counts, offsets and each kind's count.

    ``correct`` counts outputs with no violation at all.
    """
    from pyspark.sql import functions as sf

    per_partition = (
        flags.groupBy("partition")
        .agg(
            sf.count(sf.lit(1)).alias("records"),
            sf.min("offset").alias("first"),
            sf.max("offset").alias("last"),
            sf.count_if(sf.col("kind").isNull()).alias("correct"),
            *(sf.count_if(_is(ViolationKind(k))).alias(k) for k in _KINDS),
        )
        .collect()
    )
    totals = dict.fromkeys(["records", "correct", *_KINDS], 0)
    got: dict[int, tuple[int, Any, Any]] = {}
    for r in per_partition:
        for name in totals:
            totals[name] += int(r[name])
        got[int(r["partition"])] = (int(r["records"]), r["first"], r["last"])
    return totals, _stats(topic, ranges, got)


def _stats(
    topic: str, ranges: dict[int, tuple[int, int]], got: dict[int, tuple[int, Any, Any]]
) -> tuple[PartitionStats, ...]:
    return tuple(
        PartitionStats(topic, p, start, end, *got.get(p, (0, None, None)))
        for p, (start, end) in sorted(ranges.items())
    )


def _figures(check: Check, expected: int, totals: dict[str, int], lost: int) -> CheckResult:
    return CheckResult(
        check=check,
        expected=expected,
        outputs=totals["records"],
        duplicates=totals[ViolationKind.DUPLICATE.value],
        lost=lost,
        unexpected=totals[ViolationKind.UNEXPECTED.value],
        out_of_order=(
            totals[ViolationKind.OUT_OF_ORDER.value] if check is Check.RUNNING_COUNT else None
        ),
    )


def _details(figures: CheckResult, violations: DataFrame, bin_width: int) -> CheckResult:
    """Examples, per-key figures and offset histograms of a non-clean result."""
    from dataclasses import replace

    from pyspark import StorageLevel
    from pyspark.sql import functions as sf

    violations = violations.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        order = [
            sf.col(c).asc_nulls_first()
            for c in ("kind", "topic", "partition", "offset", "key", "value", "source")
        ]
        examples = tuple(
            Violation(
                ViolationKind(r["kind"]),
                r["topic"],
                r["partition"],
                r["offset"],
                r["key"],
                r["value"],
                r["source"],
            )
            for r in violations.orderBy(*order).limit(EXAMPLE_LIMIT).collect()
        )
        per_key = (
            violations.groupBy("key")
            .agg(*(sf.count_if(sf.col("kind") == sf.lit(k)).alias(k) for k in _KINDS))
            .withColumn("total", sum((sf.col(k) for k in _KINDS), sf.lit(0)))
            .orderBy(sf.col("total").desc(), sf.col("key").asc_nulls_first())
            .limit(KEY_LIMIT)
            .collect()
        )
        by_key = tuple(
            KeyFigures(
                r["key"],
                duplicates=int(r[ViolationKind.DUPLICATE.value]),
                lost=int(r[ViolationKind.LOST.value]),
                unexpected=int(r[ViolationKind.UNEXPECTED.value]),
                out_of_order=int(r[ViolationKind.OUT_OF_ORDER.value]),
            )
            for r in per_key
        )
        start = (sf.floor(sf.col("offset") / sf.lit(bin_width)) * sf.lit(bin_width)).cast("long")
        bins = (
            violations.where(sf.col("partition").isNotNull() & sf.col("offset").isNotNull())
            .groupBy("kind", "topic", "partition", start.alias("start"))
            .agg(sf.count(sf.lit(1)).alias("count"))
            .orderBy("kind", "topic", "partition", "start")
            .collect()
        )
        by_offset = tuple(
            OffsetBin(
                ViolationKind(r["kind"]), r["topic"], r["partition"], r["start"], int(r["count"])
            )
            for r in bins
        )
    finally:
        violations.unpersist()
    return replace(figures, examples=examples, by_key=by_key, by_offset=by_offset)
