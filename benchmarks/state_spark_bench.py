"""Throughput of state on Spark: a savepoint bootstrapped from a DataFrame, then read back.

    python -m benchmarks.state_spark_bench [--keys 1000000] [--master 'local[2]']
        [--workers 2] [--kinds value,map,list] [--dir DIR] [--keep]

Builds a savepoint of `--keys` keys for the word count's ``count`` operator
(`kstream.examples.wordcount`, planned at `--workers` subtasks) with
`bootstrap_state` from a generated DataFrame (``spark.range``: key ``w<i>``,
value ``i``), then reads it back with `read_state` (``value_type="bigint"``)
and sums the values on the executors. `--kinds` measures, in the same run
and Spark session, the same number of rows as map state ``m`` (ten entries
``e0``..``e9`` per key) and list state ``l`` (ten elements per key) of that
operator, so their figures compare side by side with the value state's
(the ratios are printed). Then the savepoint is transformed with
`transform_state` (every value + 1, the other states kept) into a second
one, timed the same way and checked by a read that is not timed: a
transform reads, and writes from the original databases, what a bootstrap
writes from nothing, so its rows per second beside the bootstrap's say what
that costs. Each kind runs once on 20,000 rows first, unreported,
so that none pays the warm-up alone. Prints rows per second for each, timed
from the call to its last Spark job's end (the bootstrap's key and value
checks included), the savepoint's size on disk, the driver JVM's heap in
use after a full GC once each is done, and the machine's load average before
and after. The sum and the row count are checked against the
generated ones, so a read that lost or changed rows fails rather than looking
fast.

Nothing passes through the driver (the bootstrap writes each subtask's
database in its Spark task; the read is an aggregation): 10 M keys need no
more driver memory than 1 M. The savepoint is written under `--dir` (default:
a temporary directory, removed at the end unless `--keep`): about 25 bytes a
key for this state. Not a test: its figures depend on the machine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kstream.audit.spark import spark_session
from kstream.tools.state import read_state
from kstream.tools.state.bootstrap import bootstrap_state
from kstream.tools.state.decode import StateKind
from kstream.tools.state.transform import transform_state

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: The job whose state is written: its ``count`` operator's value state.
SPEC = "kstream.examples.wordcount:job"
OPERATOR = "count"
PARAMS = {"input": "words", "output": "word-counts"}
#: Entries per key of the map and list states measured.
PER_KEY = 10
#: Rows of each kind's unreported first run.
WARM_UP = 20_000


@dataclass(frozen=True, slots=True)
class StateFigures:
    """One run's figures: rows per second of the bootstrap and of the read."""

    kind: StateKind
    #: Rows written and read (a map's entries, a list's elements).
    keys: int
    bootstrap_s: float
    read_s: float
    transform_s: float
    savepoint_bytes: int
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]
    #: The driver JVM's heap in use after a full GC, once after each step (MB), and its
    #: bound: what the driver holds on to (with a local master it is the executor too).
    heap_after_bootstrap_mb: float
    heap_after_read_mb: float
    heap_max_mb: float

    @property
    def bootstrap_rows_s(self) -> float:
        return self.keys / self.bootstrap_s

    @property
    def read_rows_s(self) -> float:
        return self.keys / self.read_s

    @property
    def transform_rows_s(self) -> float:
        return self.keys / self.transform_s


def generated(spark: SparkSession, keys: int, kind: StateKind = StateKind.VALUE) -> DataFrame:
    """`keys` rows, generated on the executors, with value ``i``: value state,
    word ``w<i>``; map, word ``w<i // 10>`` and entry ``e<i % 10>``; list, word
    ``w<i // 10>`` and index ``i % 10``."""
    from pyspark.sql import functions as sf

    i = sf.col("id")
    if kind is StateKind.VALUE:
        word = sf.concat(sf.lit("w"), i.cast("string"))
        return spark.range(keys).select(word.alias("word"), i.alias("count"))
    word = sf.concat(sf.lit("w"), sf.floor(i / PER_KEY).cast("string")).alias("word")
    sub = i % PER_KEY
    middle = (
        sf.concat(sf.lit("e"), sub.cast("string")).alias("entry")
        if kind is StateKind.MAP
        else sub.alias("index")
    )
    return spark.range(keys).select(word, middle, i.alias("count"))


def size_on_disk(root: Path) -> int:
    return sum(f.stat().st_size for f in root.rglob("*") if f.is_file())


def heap_in_use_mb(spark: SparkSession) -> tuple[float, float]:
    """(heap in use after a full GC, maximum heap) of the driver's JVM, in MB."""
    jvm = spark._jvm
    assert jvm is not None, "a running session has its JVM"
    jvm.java.lang.System.gc()
    rt = jvm.java.lang.Runtime.getRuntime()
    return float(rt.totalMemory() - rt.freeMemory()) / 1e6, float(rt.maxMemory()) / 1e6


def measure(
    spark: SparkSession, keys: int, workers: int, target: Path, kind: StateKind = StateKind.VALUE
) -> StateFigures:
    """Bootstrap `keys` rows of `kind` into the savepoint `target` (must not exist),
    then read them."""
    from pyspark.sql import functions as sf

    # Starts the executors' Python workers, so that neither figure carries it.
    spark.sparkContext.parallelize(range(workers), workers).map(lambda x: x).count()
    load_before = os.getloadavg()
    t0 = time.monotonic()
    name = None if kind is StateKind.VALUE else kind.value[0]
    result = bootstrap_state(
        generated(spark, keys, kind), SPEC, OPERATOR, key="word", value="count",
        out=str(target), params=PARAMS, workers=workers, kind=kind, state=name,
    )  # fmt: skip
    bootstrap_s = time.monotonic() - t0
    heap_bootstrap, _ = heap_in_use_mb(spark)
    written = sum(result.keys.values())
    want = keys if kind is StateKind.VALUE else -(-keys // PER_KEY)
    if written != want:
        raise SystemExit(f"the bootstrap wrote {written} keys, not {want}")
    t0 = time.monotonic()
    state = read_state(spark, result.url, OPERATOR, kind=kind, name=name, value_type="bigint")
    row = state.agg(sf.count("*").alias("rows"), sf.sum("value").alias("total")).collect()[0]
    read_s = time.monotonic() - t0
    heap_read, heap_max = heap_in_use_mb(spark)
    if (row["rows"], row["total"]) != (keys, keys * (keys - 1) // 2):
        raise SystemExit(f"read {row['rows']} rows summing to {row['total']}: not what was written")
    moved = target.with_name(f"{target.name}-transformed")
    t0 = time.monotonic()
    transform_state(
        spark, result.url, OPERATOR, lambda s: s.withColumn("value", s.value + 1), str(moved),
        kind=kind, name=name, value_type="bigint",
    )  # fmt: skip
    transform_s = time.monotonic() - t0
    state = read_state(spark, str(moved), OPERATOR, kind=kind, name=name, value_type="bigint")
    row = state.agg(sf.count("*").alias("rows"), sf.sum("value").alias("total")).collect()[0]
    if (row["rows"], row["total"]) != (keys, keys * (keys + 1) // 2):
        raise SystemExit(f"transformed {row['rows']} rows summing to {row['total']}: not + 1")
    return StateFigures(
        kind, keys, bootstrap_s, read_s, transform_s, size_on_disk(target), load_before,
        os.getloadavg(), heap_bootstrap, heap_read, heap_max,
    )  # fmt: skip


def report(fig: StateFigures, master: str, workers: int) -> str:
    def load(avg: tuple[float, float, float]) -> str:
        return "/".join(f"{x:.1f}" for x in avg)

    return "\n".join([
        f"{fig.kind.value} state: {fig.keys:,} rows, {workers} subtasks, master {master}, "
        f"{os.cpu_count()} cores",
        f"bootstrap: {fig.bootstrap_s:.1f} s, {fig.bootstrap_rows_s:,.0f} rows/s",
        f"read:      {fig.read_s:.1f} s, {fig.read_rows_s:,.0f} rows/s",
        f"transform: {fig.transform_s:.1f} s, {fig.transform_rows_s:,.0f} rows/s",
        f"read / bootstrap: {fig.read_rows_s / fig.bootstrap_rows_s:.2f}, "
        f"transform / bootstrap: {fig.transform_rows_s / fig.bootstrap_rows_s:.2f}",
        f"savepoint: {fig.savepoint_bytes / 1e6:.1f} MB "
        f"({fig.savepoint_bytes / fig.keys:.1f} B/row)",
        f"driver heap in use after GC: {fig.heap_after_bootstrap_mb:.0f} MB after the "
        f"bootstrap, {fig.heap_after_read_mb:.0f} MB after the read (max {fig.heap_max_mb:.0f})",
        f"load average (1/5/15 min): before {load(fig.load_before)}, "
        f"after {load(fig.load_after)}",
    ])  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--workers", type=int, default=2, help="the job's subtasks (Spark tasks)")
    ap.add_argument(
        "--kinds", default="value", help="comma-separated: value, map, list (side by side)"
    )
    ap.add_argument("--dir", type=Path, default=None, help="where the savepoint is written")
    ap.add_argument("--keep", action="store_true", help="keep the savepoint")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kstream-state-bench-", dir=args.dir))
    try:
        with spark_session(
            args.master, [], work / "spark.log", app_name="kstream-state-bench"
        ) as spark:
            kinds = [StateKind(k) for k in args.kinds.split(",")]
            # Each kind's code paths once, unreported: the first kind measured
            # would otherwise pay the JVM's and the workers' warm-up alone.
            for k in kinds:
                measure(spark, WARM_UP, args.workers, work / f"warm-up-{k.value}", k)
            figs = [
                measure(spark, args.keys, args.workers, work / f"savepoint-{k.value}", k)
                for k in kinds
            ]
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print("\n\n".join(report(f, args.master, args.workers) for f in figs))
    first = figs[0]
    for f in figs[1:]:
        print(
            f"{f.kind.value} / {first.kind.value} rows/s: bootstrap "
            f"{f.bootstrap_rows_s / first.bootstrap_rows_s:.2f}, "
            f"read {f.read_rows_s / first.read_rows_s:.2f}, "
            f"transform {f.transform_rows_s / first.transform_rows_s:.2f}"
        )
    if args.keep:
        print(f"savepoints kept in {work}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
