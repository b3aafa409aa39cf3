"""Word-count throughput: kstream against a plain confluent-kafka loop, side by side.

    python benchmarks/wordcount_bench.py [--lines 200000] [--workers 2] [--probes 20]

All read the same input topic on the same broker in the same run. The plain
loop reads lines in batches and writes one record per word with no state and
no guarantees; kstream runs the word count (two stages, RocksDB state, barrier
checkpoints every second) once with exactly-once output (transactions) and
once with at-least-once output. Prints words/s for each, their ratios,
kstream's synchronous snapshot pause, and how long a new input line takes to
become visible to a read_committed reader of the output (probes sent once the
backlog is processed).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from kstream.dataflow.outputs import Guarantee
from kstream.examples import wordcount
from kstream.infra.admin import Admin
from kstream.infra.client_settings import client_config
from kstream.infra.cluster import bootstrap_servers
from kstream.protocol.coordination import CoordinatorConfig
from kstream.runtime.config import JobRef, RunConfig
from kstream.runtime.runner.runner import Runner, RunningJob
from kstream.testing import produce, read_all, unique_name, wait_settled
from kstream.tools.demo import _generate

CHECKPOINT_INTERVAL_S = 1.0
PROBE_TIMEOUT_S = 60.0
GUARANTEES_RUN: tuple[Guarantee, ...] = ("exactly-once", "at-least-once")


def plain_loop(bootstrap: str, src: str, dst: str, ends: dict[int, int]) -> float:
    """Seconds for a bare consume-split-produce loop over the whole input."""
    consumer = Consumer(
        client_config(bootstrap, {"group.id": unique_name("plain"), "enable.auto.commit": False})
    )
    producer = Producer(
        client_config(
            bootstrap,
            {
                "linger.ms": 5,
                "batch.size": 1_000_000,
                "compression.type": "lz4",
                "queue.buffering.max.messages": 1_000_000,
            },
        )
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


@dataclass
class KstreamResult:
    total_s: float
    sync_ms: list[float]
    recoveries: int
    #: Seconds from producing a probe line to reading its output with read_committed.
    visibility_s: list[float] = field(default_factory=list)


def kstream_run(
    bootstrap: str,
    src: str,
    dst: str,
    ends: dict[int, int],
    workers: int,
    guarantee: Guarantee,
    probes: int,
) -> KstreamResult:
    """Run the word count over the whole input, then time `probes` single-line round trips."""
    params = {"input": src, "output": dst, "name": unique_name("bench")}
    with tempfile.TemporaryDirectory() as state:
        runner = Runner(
            RunConfig(
                JobRef("kstream.examples.wordcount:job", params),
                bootstrap,
                workers,
                Path(state),
                checkpoints=CoordinatorConfig(interval=CHECKPOINT_INTERVAL_S),
                guarantee=guarantee,
            ),
            wordcount.job(params),
            say=lambda _: None,
        )
        runner.prepare()
        started = time.perf_counter()
        running = runner.start()
        try:
            while True:
                running.step()
                offsets = runner.stats.source_offsets.get(src, {})
                if all(offsets.get(p, 0) >= e for p, e in ends.items() if e > 0):
                    break
            done = time.perf_counter()
            visibility = _probe(running, bootstrap, src, dst, probes)
        finally:
            running.stop()
        return KstreamResult(
            done - started, runner.stats.sync_ms, runner.stats.recoveries, visibility
        )


def _probe(running: RunningJob, bootstrap: str, src: str, dst: str, probes: int) -> list[float]:
    """Latency until a new input line's output is visible to a read_committed reader."""
    consumer = Consumer(
        client_config(
            bootstrap,
            {
                "group.id": unique_name("probe"),
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
            },
        )
    )
    producer = Producer(client_config(bootstrap, {"linger.ms": 0}))
    md = consumer.list_topics(dst, timeout=30)
    # Start at the high watermark, not OFFSET_END: for a read_committed consumer
    # that is the last stable offset, which the backlog's last open transaction
    # may hold far back, and reading up from there would be timed as latency.
    start = []
    for p in md.topics[dst].partitions:
        _, high = consumer.get_watermark_offsets(TopicPartition(dst, p), timeout=30)
        start.append(TopicPartition(dst, p, high))
    consumer.assign(start)
    out = []
    try:
        for i in range(probes):
            word = f"probe{i}".encode()
            producer.produce(src, word)
            producer.flush(30)
            t0 = time.perf_counter()
            seen = False
            while not seen:
                running.step(0.005)
                for m in consumer.consume(10_000, 0.005):
                    if m.error() is None and m.key() == word:
                        seen = True
                if time.perf_counter() - t0 > PROBE_TIMEOUT_S:
                    raise TimeoutError(f"probe {i} not visible within {PROBE_TIMEOUT_S:.0f}s")
            out.append(time.perf_counter() - t0)
    finally:
        consumer.close()
    return out


def output_figures(bootstrap: str, topic: str, skip_last: int = 0) -> tuple[int, float]:
    """(committed records, seconds between the first and last output written).

    The span comes from the records' producer timestamps (read_uncommitted, so
    exactly-once output counts from when it was written, not committed): it is
    the processing rate once output flows, free of process start-up and of the
    wait for the final checkpoint. The last `skip_last` records (the probes) are
    left out of the span.
    """
    wait_settled(bootstrap, topic)
    committed = len(read_all(bootstrap, topic))
    consumer = Consumer(
        client_config(
            bootstrap,
            {
                "group.id": unique_name("span"),
                "isolation.level": "read_uncommitted",
                "enable.auto.commit": False,
                # The last offset may be a transaction marker, never delivered: EOF tells the end.
                "enable.partition.eof": True,
            },
        )
    )
    md = consumer.list_topics(topic, timeout=30)
    partitions = set(md.topics[topic].partitions)
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    stamps: list[int] = []
    while partitions:
        for m in consumer.consume(10_000, 1.0):
            err = m.error()
            if err is None:
                stamps.append(m.timestamp()[1])
            elif err.code() == KafkaError._PARTITION_EOF:
                partitions.discard(m.partition() or 0)
    consumer.close()
    stamps.sort()
    if skip_last:
        stamps = stamps[:-skip_last]
    return committed, (stamps[-1] - stamps[0]) / 1000 if len(stamps) > 1 else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=200_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--probes", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3, help="rounds, each guarantee once per round")
    ap.add_argument("--bootstrap-servers")
    args = ap.parse_args()
    bootstrap = bootstrap_servers(args.bootstrap_servers)
    admin = Admin(bootstrap)
    src = unique_name("bench-in")
    admin.create_topics({src: args.partitions})
    lines = _generate(args.lines, seed=3)
    words = sum(len(line.split()) for line in lines)
    produce(bootstrap, src, [(None, line.encode()) for line in lines])
    print(
        f"input: {args.lines:,} lines, {words:,} words, {args.partitions} partitions; "
        f"{args.workers} kstream workers, checkpoint interval {CHECKPOINT_INTERVAL_S:g} s; "
        f"{args.rounds} rounds, the guarantees' order alternating"
    )
    print("words/s: whole run incl. start-up | while output flows (first to last output written)")
    # Per round, figure -> (seconds incl. start-up, seconds while output flows).
    rounds: list[dict[str, tuple[float, float]]] = []
    kstream_runs = 0
    created = [src]
    for n in range(args.rounds):
        ends = {p: high for p, (_, high) in admin.watermarks(src).items()}
        figures: dict[str, tuple[float, float]] = {}
        plain_out = unique_name("bench-plain")
        admin.create_topics({plain_out: args.partitions})
        created.append(plain_out)
        plain_s = plain_loop(bootstrap, src, plain_out, ends)
        figures["plain"] = (plain_s, output_figures(bootstrap, plain_out)[1])
        print(f"round {n + 1}")
        _line("plain confluent-kafka loop", words, *figures["plain"], "")
        order = GUARANTEES_RUN if n % 2 == 0 else tuple(reversed(GUARANTEES_RUN))
        for guarantee in order:
            out = unique_name(f"bench-{guarantee}")
            admin.create_topics({out: args.partitions})
            created.append(out)
            # Earlier runs' probe lines are in the input too: read them as well.
            ends = {p: high for p, (_, high) in admin.watermarks(src).items()}
            r = kstream_run(bootstrap, src, out, ends, args.workers, guarantee, args.probes)
            kstream_runs += 1
            produced, span = output_figures(bootstrap, out, skip_last=args.probes)
            figures[guarantee] = (r.total_s, span)
            # Each probe line (this run's and earlier runs') adds one output. Without
            # faults nothing is replayed, unless a worker was declared lost (then
            # at-least-once may repeat output).
            expected = words + args.probes * kstream_runs
            verdict = "ok" if produced == expected else f"expected {expected:,}"
            note = f"{produced:,} committed outputs ({verdict}; {r.recoveries} recoveries)"
            _line(f"kstream {guarantee}", words, r.total_s, span, note)
            if r.sync_ms:
                print(
                    f"    synchronous snapshot pause: median {statistics.median(r.sync_ms):.1f} ms"
                    f", max {max(r.sync_ms):.1f} ms over {len(r.sync_ms)} checkpoints"
                )
            if r.visibility_s:
                vis = sorted(r.visibility_s)
                print(
                    f"    input -> read_committed output: median "
                    f"{statistics.median(vis) * 1000:.0f} ms, max {vis[-1] * 1000:.0f} ms "
                    f"over {len(vis)} probes"
                )
        rounds.append(figures)
    print(
        f"ratios, median of {args.rounds} rounds (each ratio from one round's side-by-side runs):"
    )
    for name, num, den in (
        ("kstream exactly-once / plain loop", "plain", "exactly-once"),
        ("kstream at-least-once / plain loop", "plain", "at-least-once"),
        ("exactly-once / at-least-once", "at-least-once", "exactly-once"),
    ):
        # Throughput ratio a/b = time(b) / time(a).
        total = statistics.median(f[num][0] / f[den][0] for f in rounds)
        flow = statistics.median(f[num][1] / f[den][1] for f in rounds)
        print(f"  {name:<36}: {total:.2f} incl. start-up | {flow:.2f} while output flows")
    admin.delete_topics(created)


def _line(name: str, words: int, total_s: float, span_s: float, note: str) -> None:
    print(f"  {name:<28}: {words / total_s:>10,.0f} | {words / span_s:>10,.0f}   {note}")


if __name__ == "__main__":
    main()
