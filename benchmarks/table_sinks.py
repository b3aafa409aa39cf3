"""What the table sinks' benchmarks share: the rows, and the sink driven at a
checkpoint interval without Kafka (postgres_sink_bench, delta_sink_bench,
iceberg_sink_bench)."""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable, Iterator
from typing import Any

from kstream.dataflow.outputs import Sink, SinkContext
from kstream.errors import RecordError


def word_counts(n: int) -> Iterator[tuple[str, int]]:
    """`n` running counts (word, count so far) of words drawn from 50,000, seed 7."""
    rnd = random.Random(7)
    vocabulary = [f"w{i}" for i in range(50_000)]
    counts: dict[str, int] = {}
    for _ in range(n):
        w = rnd.choice(vocabulary)
        counts[w] = counts.get(w, 0) + 1
        yield w, counts[w]


def sink_rate(
    sink: Sink[Any],
    rows: list[tuple[str, Any]],
    interval: float,
    refused: Callable[[Any, RecordError], None] | None = None,
) -> float:
    """Rows/s of `sink`'s writer over `rows`, pre-committing and committing an epoch
    every `interval` seconds as a checkpoint would (one subtask, no Kafka); rows
    the table refuses go to `refused` (None: they raise)."""
    sink.check("")
    ctx = SinkContext("", "bench", "s1-0", 1, producer=None)  # type: ignore[arg-type]
    if refused is not None:
        ctx = dataclasses.replace(ctx, refused=refused)
    w = sink.open(ctx)
    w.recover(None, None)
    epoch, start = 1, time.perf_counter()
    due = start + interval
    for i, row in enumerate(rows):
        w.write(row)
        if not i % 1000 and time.perf_counter() >= due:
            w.pre_commit(epoch)
            w.commit(epoch)
            epoch, due = epoch + 1, due + interval
    w.pre_commit(epoch)
    w.commit(epoch)
    elapsed = time.perf_counter() - start
    w.close()
    return len(rows) / elapsed
