"""Benchmark of `kstream audit`: time the running-count audit of N output records.

Writes a word-count input (lines of 10 words drawn from a Zipf-like vocabulary)
and its correct running-count output (N records) to fresh topics, then audits
them on a local Spark master and prints the figures. Not a test: it asserts
nothing but the verdict, and its numbers depend on the machine.

    python benchmarks/audit_bench.py --records 10000000 --master 'local[2]'

Target: 10 M output records on local[2] within 2 minutes.
"""

from __future__ import annotations

import argparse
import itertools
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from confluent_kafka import Producer

from kstream.audit import run_audit
from kstream.infra.admin import Admin
from kstream.infra.client_settings import client_config
from kstream.infra.cluster import bootstrap_servers
from kstream.testing import unique_name

WORDS_PER_LINE = 10
#: Records per transaction: well inside the producer's default 60 s transaction timeout.
TRANSACTION_RECORDS = 500_000


def vocabulary(size: int) -> list[str]:
    return [f"w{i:x}" for i in range(size)]


def producer(bootstrap: str) -> Producer:
    return Producer(
        client_config(
            bootstrap,
            {
                "transactional.id": unique_name("bench"),
                "linger.ms": 50,
                "batch.size": 1_000_000,
                "compression.type": "lz4",
                "queue.buffering.max.messages": 1_000_000,
            },
        )
    )


def send(p: Producer, topic: str, key: bytes | None, value: bytes) -> None:
    while True:
        try:
            p.produce(topic, value, key)
            return
        except BufferError:
            p.poll(0.05)  # local queue full: let deliveries drain


def generate(bootstrap: str, src: str, dst: str, records: int, vocab_size: int) -> None:
    rng = random.Random(1)
    vocab = vocabulary(vocab_size)
    # Zipf-like frequencies, as in text; cumulative once, not per draw.
    cumulative = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(vocab_size)))
    counts: Counter[str] = Counter()
    lines, outs = producer(bootstrap), producer(bootstrap)
    for p in (lines, outs):
        p.init_transactions(60)
        p.begin_transaction()
    written = 0
    while written < records:
        n = min(WORDS_PER_LINE, records - written)
        words = rng.choices(vocab, cum_weights=cumulative, k=n)
        send(lines, src, None, " ".join(words).encode())
        for w in words:
            counts[w] += 1
            send(outs, dst, w.encode(), str(counts[w]).encode())
        written += n
        if written % TRANSACTION_RECORDS < n:
            for p in (lines, outs):
                p.commit_transaction(120)
                p.begin_transaction()
    for p in (lines, outs):
        p.commit_transaction(120)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="output records")
    parser.add_argument("--vocabulary", type=int, default=50_000, help="distinct words")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--bootstrap-servers", default=None)
    parser.add_argument("--output-partitions", type=int, default=4)
    args = parser.parse_args()

    bootstrap = bootstrap_servers(args.bootstrap_servers, lambda m: print(m, file=sys.stderr))
    src, dst = unique_name("bench-in"), unique_name("bench-out")
    admin = Admin(bootstrap)
    admin.create_topics({src: 2, dst: args.output_partitions})
    try:
        t0 = time.monotonic()
        generate(bootstrap, src, dst, args.records, args.vocabulary)
        produced = time.monotonic() - t0
        print(f"produced {args.records} output records in {produced:.1f} s")
        with tempfile.TemporaryDirectory() as reports:
            t0 = time.monotonic()
            result = run_audit(
                input_topic=src,
                output_topic=dst,
                bootstrap=bootstrap,
                master=args.master,
                report_dir=Path(reports),
                progress=sys.stderr.isatty(),
            )
            seconds = time.monotonic() - t0
    finally:
        admin.delete_topics([src, dst])
    print(
        f"audited {result.output_records} output records ({result.input_records} input lines) "
        f"on {args.master} in {seconds:.1f} s: {result.output_records / seconds:,.0f} records/s; "
        f"verdict {'clean' if result.clean else 'VIOLATIONS'}"
    )
    return 0 if result.clean else 1


if __name__ == "__main__":
    sys.exit(main())
