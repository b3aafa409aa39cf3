"""CPU time per word of the word count's keyed stage, without the rest of the job.

Pushes words through the stage's compiled chain (`kstream.runtime.worker.chain`) as a
channel reader does: the keyed call, the example's `count` with its value
state (RocksDB behind the write-back cache), and the exactly-once Kafka sink
with its real transactional producers, one transaction per round. State changes reach RocksDB
after every `--batch` words as a worker's do after each batch it reads
(`--flush due`: `StateStore.flush_due`, the worker's; `--flush all`: every
change at once, the worker's rule before 2026-11-29), and all of them at the
end of a round. Words are drawn uniformly from `--vocabulary` distinct ones or,
with `--zipf`, with the suite's Zipf-like weights (a few hot words). Prints the
CPU time per word (`time.process_time`: every thread of the process, so
librdkafka's work is in it) of the fastest and the median round::

    python benchmarks/keyed_path_bench.py [--words 200000] [--rounds 5] [--batch 5000]
        [--flush due|all] [--vocabulary 20000] [--zipf] [--bootstrap-servers B]

CPU time, not wall-clock time, so that runs on a machine shared with other
work compare: alternate it between two checkouts to compare their code.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from kstream.connectors.kafka import KafkaSink, KafkaSource
from kstream.dataflow.graph import Node
from kstream.dataflow.job import Job
from kstream.dataflow.outputs import SinkContext, SinkWriter
from kstream.examples.wordcount import count
from kstream.infra.admin import Admin
from kstream.protocol.names import commit_topic
from kstream.runtime.kafka import client_config
from kstream.runtime.state.store import StateStore
from kstream.runtime.worker.chain import compile_chain


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--words", type=int, default=200_000, help="per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--vocabulary", type=int, default=20_000, help="distinct words")
    parser.add_argument("--zipf", action="store_true", help="weights 1/rank, not uniform")
    parser.add_argument("--batch", type=int, default=5_000, help="words between flushes")
    parser.add_argument("--flush", choices=("due", "all"), default="due")
    parser.add_argument(
        "--bootstrap-servers", default=os.environ.get("KSTREAM_BOOTSTRAP", "127.0.0.1:9092")
    )
    args = parser.parse_args()
    bootstrap = args.bootstrap_servers
    rnd = random.Random(7)
    vocabulary = [f"w{i}" for i in range(args.vocabulary)]
    weights = [1.0 / (i + 1) for i in range(args.vocabulary)] if args.zipf else None
    words = rnd.choices(vocabulary, weights, k=args.words)

    name = f"keyed-path-{uuid.uuid4().hex[:8]}"
    output = f"{name}-out"
    Admin(bootstrap).create_topics({output: 3, commit_topic(name): 2})
    job = Job(name)
    (
        job.source(KafkaSource("unused"))
        .key_by(lambda w: w)
        .process(count, name="count")
        .sink(KafkaSink(output))
    )
    stage = job.stages[1]
    store = StateStore(Path(tempfile.mkdtemp(prefix="keyed-path-")) / "db")
    writers: list[SinkWriter] = []

    def open_sink(node: Node) -> Any:
        assert node.sink is not None
        producer = Producer(client_config(bootstrap))
        writer = node.sink.open(SinkContext(bootstrap, name, "s1-0", 1, producer))
        writer.recover(None, None)
        writer.begin_epoch(1)
        writers.append(writer)
        return writer.write

    def no_edge(node: Node) -> Any:
        raise AssertionError(f"the keyed stage has no edge ({node.name})")

    push = compile_chain(
        stage.root, stage_index=1, state=store, open_sink=open_sink, open_edge=no_edge
    )
    flush = store.flush_due if args.flush == "due" else store.flush
    batches = [words[i : i + args.batch] for i in range(0, len(words), args.batch)]
    seconds = []
    for r in range(1, args.rounds + 1):
        t = time.process_time()
        for batch in batches:
            for w in batch:
                push(w, w)
            flush()
        store.flush()
        seconds.append(time.process_time() - t)
        for writer in writers:
            writer.pre_commit(r)
            writer.commit(r)
    for writer in writers:
        writer.close()
    per_word = [s * 1e9 / args.words for s in seconds]
    print(
        f"{args.words:,} words ({'Zipf' if args.zipf else 'uniform'}, {args.vocabulary:,} "
        f"distinct, flush {args.flush} every {args.batch:,}) x {args.rounds} rounds: CPU per word "
        f"min {min(per_word):,.0f} ns, median {statistics.median(per_word):,.0f} ns"
    )


if __name__ == "__main__":
    main()
