"""Word-count throughput: kstream against a plain confluent-kafka loop, side by side.

    python benchmarks/wordcount_bench.py [--lines 200000] [--workers 2]

Both read the same input topic on the same broker in the same run. The plain
loop reads lines in batches and writes one record per word with no state and
no guarantees; kstream runs the exactly-once-state word count (two stages,
RocksDB state, barrier checkpoints every second). Prints words/s for both,
their ratio, and kstream's synchronous snapshot pause.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from kstream.admin import Admin
from kstream.cluster import bootstrap_servers
from kstream.coordinator import CoordinatorConfig
from kstream.demo import _generate
from kstream.examples import wordcount
from kstream.runner import Runner
from kstream.testing import produce, unique_name


def plain_loop(bootstrap: str, src: str, dst: str, ends: dict[int, int]) -> float:
    """Seconds for a bare consume-split-produce loop over the whole input."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique_name("plain"),
            "enable.auto.commit": False,
            "log_level": 0,
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "compression.type": "lz4",
            "queue.buffering.max.messages": 1_000_000,
            "log_level": 0,
        }
    )
    consumer.assign([TopicPartition(src, p, 0) for p in ends])
    remaining = {p for p, e in ends.items() if e > 0}
    started = time.perf_counter()
    while remaining:
        for m in consumer.consume(1000, 0.5):
            if m.error():
                continue
            for word in (m.value() or b"").decode().split():
                while True:
                    try:
                        producer.produce(dst, b"1", word.encode())
                        break
                    except BufferError:
                        producer.poll(0.05)
            if (m.offset() or 0) + 1 >= ends[m.partition() or 0]:
                remaining.discard(m.partition() or 0)
        producer.poll(0)
    producer.flush(60)
    seconds = time.perf_counter() - started
    consumer.close()
    return seconds


def kstream_run(
    bootstrap: str, src: str, dst: str, ends: dict[int, int], workers: int
) -> tuple[float, float, list[float]]:
    """(seconds from start, seconds from first progress, sync pauses in ms)."""
    params = {"input": src, "output": dst, "name": unique_name("bench")}
    with tempfile.TemporaryDirectory() as state:
        runner = Runner(
            wordcount.job(params),
            spec="kstream.examples.wordcount:job",
            params=params,
            bootstrap=bootstrap,
            workers=workers,
            state_dir=Path(state),
            config=CoordinatorConfig(interval=1.0),
            say=lambda _: None,
        )
        runner.prepare()
        started = time.perf_counter()
        first_progress: float | None = None
        runner.start()
        try:
            while True:
                runner.step()
                offsets = runner.stats.source_offsets.get(src, {})
                if first_progress is None and any(o > 0 for o in offsets.values()):
                    first_progress = time.perf_counter()
                if all(offsets.get(p, 0) >= e for p, e in ends.items() if e > 0):
                    break
        finally:
            runner.stop()
        done = time.perf_counter()
        return done - started, done - (first_progress or started), runner.stats.sync_ms


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=200_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--bootstrap-servers")
    args = ap.parse_args()
    bootstrap = bootstrap_servers(args.bootstrap_servers)
    admin = Admin(bootstrap)
    src, out1, out2 = unique_name("bench-in"), unique_name("bench-plain"), unique_name("bench-ks")
    admin.create_topics({src: args.partitions, out1: args.partitions, out2: args.partitions})
    lines = _generate(args.lines, seed=3)
    words = sum(len(line.split()) for line in lines)
    produce(bootstrap, src, [(None, line.encode()) for line in lines])
    ends = {p: high for p, (_, high) in admin.watermarks(src).items()}
    print(f"input: {args.lines:,} lines, {words:,} words, {args.partitions} partitions")

    plain_s = plain_loop(bootstrap, src, out1, ends)
    total_s, steady_s, sync = kstream_run(bootstrap, src, out2, ends, args.workers)
    print(f"plain confluent-kafka loop : {words / plain_s:>10,.0f} words/s ({plain_s:.1f} s)")
    print(
        f"kstream word count         : {words / total_s:>10,.0f} words/s ({total_s:.1f} s, "
        f"{args.workers} workers, incl. start-up)"
    )
    print(f"kstream after first output : {words / steady_s:>10,.0f} words/s ({steady_s:.1f} s)")
    print(
        f"ratio kstream/plain        : {plain_s / total_s:.2f} (incl. start-up), "
        f"{plain_s / steady_s:.2f} (after first checkpoint)"
    )
    produced = sum(high for _, high in admin.watermarks(out2).values())
    verdict = "ok" if produced == words else f"WRONG: expected {words:,}"
    print(f"kstream output records     : {produced:,} ({verdict})")
    if sync:
        print(
            f"synchronous snapshot pause : median {statistics.median(sync):.1f} ms, "
            f"max {max(sync):.1f} ms over {len(sync)} checkpoints"
        )
    admin.delete_topics([src, out1, out2])


if __name__ == "__main__":
    main()
