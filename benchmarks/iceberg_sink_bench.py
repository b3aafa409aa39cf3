"""The Iceberg sink's writer against a plain pyiceberg append loop, rows per second.

Drives `IcebergWriter` as a worker does (write every row; every `--interval`
seconds a checkpoint: `pre_commit` = one Parquet file, then `commit` = one append
snapshot with the subtask's mark), and a plain loop without guarantees (the same
rows appended by `Table.append` in batches of one interval's worth), on (word,
running count) rows of the word count, into a SQL catalog on SQLite and a local
warehouse, and prints rows/s and the ratio sink / plain::

    python -m benchmarks.iceberg_sink_bench [--rows 1000000] [--interval 1] [--dir DIR]

It measures the sink in one process (no Kafka, no job around it): what writing
files at the barrier and committing them with a mark costs next to pyiceberg's
own append.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pyarrow as pa
from pyiceberg.catalog import load_catalog
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from benchmarks.table_sinks import sink_rate, word_counts
from kstream.connectors.iceberg import IcebergSink, sql_catalog


def fresh_catalog(root: Path) -> dict[str, str]:
    (root / "warehouse").mkdir(parents=True)
    props = sql_catalog(f"sqlite:///{root / 'catalog.db'}", f"file://{root / 'warehouse'}")
    catalog = load_catalog("default", **props)
    catalog.create_namespace("bench")
    schema = Schema(
        NestedField(1, "word", StringType(), required=False),
        NestedField(2, "count", LongType(), required=False),
    )
    for name in ("bench.sink", "bench.plain"):
        catalog.create_table(name, schema)
    return props


def plain_rate(props: dict[str, str], rows: list[tuple[str, int]], interval: float) -> float:
    """Rows buffered and appended by `Table.append` once per interval: the limit."""
    table = load_catalog("default", **props).load_table("bench.plain")
    schema = pa.schema([pa.field("word", pa.large_string()), pa.field("count", pa.int64())])
    start = time.perf_counter()
    due, batch = start + interval, []
    for i, row in enumerate(rows):
        batch.append(row)
        if not i % 1000 and time.perf_counter() >= due:
            append(table, schema, batch)
            batch, due = [], due + interval
    append(table, schema, batch)
    return len(rows) / (time.perf_counter() - start)


def append(table: object, schema: pa.Schema, batch: list[tuple[str, int]]) -> None:
    words, counts = zip(*batch, strict=True)
    data = pa.Table.from_arrays([pa.array(words), pa.array(counts)], schema=schema)
    table.append(data)  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--interval", type=float, default=1.0, help="checkpoint interval (s)")
    parser.add_argument("--dir", type=Path, default=None, help="where the catalog goes")
    args = parser.parse_args()
    rows = list(word_counts(args.rows))
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        props = fresh_catalog(Path(tmp))
        print(f"{args.rows:,} (word, count) rows; checkpoint every {args.interval:g} s")
        plain = plain_rate(props, rows, args.interval)
        sink = sink_rate(IcebergSink(props, "bench.sink", ("word", "count")), rows, args.interval)
        print(f"{'sink rows/s':>12} {'plain rows/s':>13} {'sink/plain':>11}")
        print(f"{sink:>12,.0f} {plain:>13,.0f} {sink / plain:>11.2f}")


if __name__ == "__main__":
    main()
