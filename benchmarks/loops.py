"""Hand-written contenders: the plain confluent-kafka loop and the exactly-once loop.

    python -m benchmarks.loops plain|eos --bootstrap-servers B --input T --output T
        --workload wordcount|mapfilter|windowed [--window-ms 10000] [--group G]

Each runs as its own process, one thread, until it is terminated (the suite
stops it once a read_committed reader holds every expected output).

- ``plain``: batch consume, one output record per word, no state (value ``1``
  for the word count), no guarantees: the practical limit of a Python loop.
- ``eos``: what a careful user writes by hand: a dict of counts, one Kafka
  transaction per consumed batch whose input offsets are committed in it with
  ``send_offsets_to_transaction``. (The dict is not restored after a crash; a
  real job would have to rebuild it, which this benchmark never exercises.)

For ``windowed`` both keep the same `Windows`: a dict of counts per window,
one watermark per input partition (its largest timestamp: they rise per
partition) and their minimum; after each consumed batch every window whose end
the minimum reached is emitted and dropped (the plain loop with no
guarantees, the exactly-once loop inside the batch's transaction).
"""

from __future__ import annotations

import argparse
import signal
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from benchmarks.workloads import WINDOW_MS, WORKLOADS, keep, window_value
from kstream.infra.client_settings import client_config

#: Records per consume call: large batches amortise the Python call overhead.
BATCH = 10_000
#: Producer tuned for throughput alike for both loops (and as kstream's sink is).
PRODUCER: dict[str, Any] = {
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "compression.type": "lz4",
    "queue.buffering.max.messages": 1_000_000,
}


def _consumer(bootstrap: str, topic: str, group: str) -> Consumer:
    consumer = Consumer(
        client_config(
            bootstrap,
            {"group.id": group, "enable.auto.commit": False, "isolation.level": "read_committed"},
        )
    )
    partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
    # assign, not subscribe: one process owns every partition, no group rebalance to wait for.
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    return consumer


def _produce(producer: Producer, topic: str, key: bytes, value: bytes) -> None:
    while True:
        try:
            producer.produce(topic, value, key)
            return
        except BufferError:
            producer.poll(0.05)


def _stop_on_term() -> Callable[[], bool]:
    stopping = [False]

    def handler(_signum: int, _frame: object) -> None:
        stopping[0] = True

    signal.signal(signal.SIGTERM, handler)
    return lambda: stopping[0]


class Windows:
    """Tumbling window counts with a watermark per partition (see the module docstring)."""

    def __init__(self, size: int, partitions: int) -> None:
        self.size = size
        self.partitions = partitions
        #: Window start -> word -> count.
        self.counts: dict[int, dict[bytes, int]] = {}
        self.highest: dict[int, int] = {}

    def add(self, partition: int, timestamp: int, words: list[bytes]) -> None:
        start = timestamp - timestamp % self.size
        window = self.counts.get(start)
        if window is None:
            window = self.counts[start] = {}
        for word in words:
            window[word] = window.get(word, 0) + 1
        if timestamp > self.highest.get(partition, timestamp - 1):
            self.highest[partition] = timestamp

    def closed(self) -> list[tuple[bytes, bytes]]:
        """The results of every window the watermark passed, which are dropped."""
        if len(self.highest) < self.partitions:
            return []
        watermark = min(self.highest.values())
        out = []
        for start in sorted(s for s in self.counts if s + self.size <= watermark):
            for word, n in self.counts.pop(start).items():
                out.append((word, window_value(start, n)))
        return out


def plain(bootstrap: str, src: str, dst: str, workload: str, window_ms: int, group: str) -> None:
    """Consume-split-produce with no state and no guarantees (window counts for `windowed`)."""
    stopped = _stop_on_term()
    consumer = _consumer(bootstrap, src, group)
    producer = Producer(client_config(bootstrap, PRODUCER))
    counting = workload == "wordcount"
    windows = _windows(consumer, src, window_ms) if workload == "windowed" else None
    while not stopped():
        for m in consumer.consume(BATCH, 0.1):
            if m.error():
                continue
            if windows is not None:
                windows.add(m.partition() or 0, m.timestamp()[1], (m.value() or b"").split())
                continue
            for word in (m.value() or b"").decode().split():
                if counting:
                    _produce(producer, dst, word.encode(), b"1")
                elif keep(word):
                    _produce(producer, dst, word.encode(), word.upper().encode())
        if windows is not None:
            for key, value in windows.closed():
                _produce(producer, dst, key, value)
        producer.poll(0)
    producer.flush(30)
    consumer.close()


def _windows(consumer: Consumer, topic: str, window_ms: int) -> Windows:
    return Windows(window_ms, len(consumer.list_topics(topic, timeout=30).topics[topic].partitions))


def eos(bootstrap: str, src: str, dst: str, workload: str, window_ms: int, group: str) -> None:
    """Dict state, one transaction per batch, input offsets committed in the transaction."""
    stopped = _stop_on_term()
    consumer = _consumer(bootstrap, src, group)
    producer = Producer(
        client_config(bootstrap, {"transactional.id": f"bench-eos-{uuid.uuid4().hex}"}, PRODUCER)
    )
    producer.init_transactions(30)
    counts: dict[str, int] = {}
    counting = workload == "wordcount"
    windows = _windows(consumer, src, window_ms) if workload == "windowed" else None
    while not stopped():
        batch = consumer.consume(BATCH, 0.1)
        if not batch:
            continue
        producer.begin_transaction()
        for m in batch:
            if m.error():
                continue
            if windows is not None:
                windows.add(m.partition() or 0, m.timestamp()[1], (m.value() or b"").split())
                continue
            for word in (m.value() or b"").decode().split():
                if counting:
                    n = counts.get(word, 0) + 1
                    counts[word] = n
                    _produce(producer, dst, word.encode(), str(n).encode())
                elif keep(word):
                    _produce(producer, dst, word.encode(), word.upper().encode())
        if windows is not None:
            for key, value in windows.closed():
                _produce(producer, dst, key, value)
        producer.send_offsets_to_transaction(
            consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30
        )
        producer.commit_transaction(60)
    consumer.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kind", choices=("plain", "eos"))
    ap.add_argument("--bootstrap-servers", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--workload", choices=WORKLOADS, default="wordcount")
    ap.add_argument("--window-ms", type=int, default=WINDOW_MS)
    ap.add_argument("--group", help="consumer group (default: a new one)")
    args = ap.parse_args()
    run = plain if args.kind == "plain" else eos
    group = args.group or f"bench-{args.kind}-{uuid.uuid4().hex[:8]}"
    run(args.bootstrap_servers, args.input, args.output, args.workload, args.window_ms, group)


if __name__ == "__main__":
    main()
