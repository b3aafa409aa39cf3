"""The Delta Lake sink's writer against a plain `write_deltalake` append loop, rows per
second, side by side.

Drives `DeltaWriter` as a worker does (write every row; every `--interval` seconds a
checkpoint: `pre_commit` = the epoch's Parquet file, then `commit` = one Delta commit
with its application transactions), and a plain loop without guarantees (the rows of
each interval appended by `write_deltalake`), on (word, running count) rows of the
word count, into fresh local tables, and prints rows/s and the ratio sink / plain::

    python -m benchmarks.delta_sink_bench [--rows 1000000] [--interval 1] [--dir DIR]
                                          [--refused N]

It measures the sink in one process (no Kafka, no job around it): what the
exactly-once commit costs next to delta-rs's own append. With ``--refused N`` the
sink runs a second time, beside the first, on the same rows with every Nth count
written as text, which the table's long column refuses: what finding refused rows
(a search by halves of the failing column) costs next to rows that all fit.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from benchmarks.table_sinks import sink_rate, word_counts
from kstream.connectors.delta import DeltaSink

COLUMNS = {"word": "string", "count": "long"}


def plain_rate(uri: str, rows: list[tuple[str, int]], interval: float) -> float:
    schema = pa.schema([("word", pa.string()), ("count", pa.int64())])
    DeltaTable.create(uri, schema)
    start = time.perf_counter()
    due = start + interval
    buffered: list[tuple[str, int]] = []

    def append() -> None:
        words, counts = zip(*buffered, strict=True) if buffered else ((), ())
        table = pa.table({"word": list(words), "count": list(counts)}, schema=schema)
        write_deltalake(uri, table, mode="append")
        buffered.clear()

    for i, row in enumerate(rows):
        buffered.append(row)
        if not i % 1000 and time.perf_counter() >= due:
            append()
            due += interval
    append()
    return len(rows) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--interval", type=float, default=1.0, help="checkpoint interval (s)")
    parser.add_argument("--dir", type=Path, default=None, help="where the tables go (a temp dir)")
    parser.add_argument(
        "--refused", type=int, default=0, metavar="N",
        help="also run the sink with every Nth count as text (refused rows)",
    )  # fmt: skip
    args = parser.parse_args()
    rows = list(word_counts(args.rows))
    # Built before any run, so that every run has the same objects alive (the
    # garbage collector's passes cost with their number).
    bad = [(w, str(n)) if args.refused and i % args.refused == 0 else (w, n)
           for i, (w, n) in enumerate(rows)]  # fmt: skip
    refused: list[Any] = []
    base = args.dir or Path(tempfile.mkdtemp(prefix="kstream-delta-bench-"))
    try:
        plain = plain_rate(str(base / "plain"), rows, args.interval)
        sink = sink_rate(DeltaSink(str(base / "sink"), COLUMNS), rows, args.interval)
        check_rows(str(base / "sink"), len(rows))
        if args.refused:
            with_refusals = sink_rate(
                DeltaSink(str(base / "refused"), COLUMNS), bad, args.interval,
                refused=lambda value, _: refused.append(value),
            )  # fmt: skip
            expected = len(range(0, len(rows), args.refused))
            if len(refused) != expected:
                raise SystemExit(f"{len(refused):,} rows refused, not {expected:,}")
            check_rows(str(base / "refused"), len(rows) - expected)
    finally:
        if args.dir is None:
            shutil.rmtree(base, ignore_errors=True)
    print(f"{args.rows:,} (word, count) rows; checkpoint every {args.interval:g} s")
    print(f"{'sink rows/s':>12} {'plain rows/s':>13} {'sink/plain':>11}")
    print(f"{sink:>12,.0f} {plain:>13,.0f} {sink / plain:>11.2f}")
    if args.refused:
        print(f"every {args.refused:,}th row refused ({len(refused):,} rows):")
        print(f"{'sink rows/s':>12} {'/ all fit':>13}")
        print(f"{with_refusals:>12,.0f} {with_refusals / sink:>13.2f}")


def check_rows(uri: str, expected: int) -> None:
    """Exit unless the table at `uri` holds `expected` rows."""
    rows_read = DeltaTable(uri).to_pyarrow_table().num_rows
    if rows_read != expected:
        raise SystemExit(f"the sink's table holds {rows_read:,} rows, not {expected:,}")


if __name__ == "__main__":
    main()
