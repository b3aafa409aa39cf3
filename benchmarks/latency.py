"""End-to-end latency at a steady input rate, with the checkpoints and bytes of the same runs.

    python -m benchmarks.latency [--intervals 0.5,1] [--seconds 30] [--load 0.5]
        [--rate WORDS_PER_S] [--capacity-words 1000000] [--bootstrap-servers B]

kstream's exactly-once word count (2 workers, event time from the input's Kafka
timestamps so each output carries its input's append time) runs once per
checkpoint interval. Capacity comes first, in the same process and on the same
broker: the job over a backlog of `--capacity-words`, its rate taken between
its first and last completed checkpoints that cover part of the backlog (so
start-up is left out). Then, per interval, a producer thread appends generated
lines at `--load` times capacity words per second for `--seconds`, and a
read_committed reader notes, for every output, the wall-clock time it got it
minus the output's Kafka timestamp: the input record's CreateTime. Those are
the latencies (p50, p99, max). The target is p99 ≤ interval + 250 ms.

The same runs give checkpoint duration and alignment (the control topic's
completions, as ``kstream checkpoints`` shows them), the synchronous snapshot
pause (each completed checkpoint's largest ``sync_ms`` over its subtasks' acks),
counting the checkpoints triggered once the input started (the first ones wait
for the worker processes to start),
and the bytes written to Kafka per input record (`benchmarks.bytes_bench`; channel
purging is off in these runs so that every channel record is still there to count).
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from typing import Any

from confluent_kafka import Consumer, Message, Producer, TopicPartition

from benchmarks.bytes_bench import job_bytes
from benchmarks.harness import RunningJob, quantiles
from benchmarks.workloads import generate
from kstream.infra.admin import Admin
from kstream.infra.client_settings import client_config
from kstream.infra.cluster import bootstrap_servers
from kstream.protocol.checkpoint_history import checkpoint_history
from kstream.protocol.messages import Acked
from kstream.runtime.control import read_messages
from kstream.runtime.kafka import connect
from kstream.testing import BACKLOG_READER, produce, unique_name

PARTITIONS = 3
#: The target: exactly-once output visible this long after the checkpoint interval, at most.
TARGET_SLACK_MS = 250.0
#: The producer's pace: lines due are appended every tick.
TICK_S = 0.005
#: After the last input: how long the reader waits for the rest of the output.
DRAIN_TIMEOUT_S = 120.0


def _reader(bootstrap: str, topic: str) -> Consumer:
    consumer = Consumer(
        client_config(
            bootstrap,
            {
                "group.id": unique_name("latency-reader"),
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 10,
                **BACKLOG_READER,
            },
        )
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    return consumer


def _take(consumer: Consumer, limit: int, timeout: float) -> list[Message]:
    """What `consumer` holds now, or else the first record within `timeout` and
    what came with it: a reader that sees output as soon as it is there
    (``consume(limit, timeout)`` alone waits out its timeout unless `limit`
    records arrive, and that wait was counted as latency)."""
    batch = consumer.consume(limit, 0)
    if batch:
        return batch
    first = consumer.poll(timeout)
    return [] if first is None else [first, *consumer.consume(limit - 1, 0)]


def capacity(bootstrap: str, words: int, *, interval: float = 1.0, seed: int = 5) -> float:
    """Words/s of the timed word count over a backlog of `words` words, start-up left out.

    A backlog so small that one checkpoint covers all of it gives no rate between
    checkpoints: then the rate is over the whole run, start-up included.
    """
    lines = generate(words, seed)
    admin = Admin(bootstrap)
    src, dst = unique_name("cap-in"), unique_name("cap-out")
    admin.create_topics({src: PARTITIONS, dst: PARTITIONS})
    try:
        produce(bootstrap, src, [(None, line.encode()) for line in lines])
        ends = {p: high for p, (_, high) in admin.watermarks(src).items()}
        params = {"input": src, "output": dst, "name": unique_name("cap")}
        #: (time, input records covered) at each completed checkpoint.
        marks: list[tuple[float, int]] = []
        with RunningJob(bootstrap, "timed_wordcount", params, interval=interval) as run:
            marks.append((time.monotonic(), 0))
            seen = 0

            def done() -> bool:
                nonlocal seen
                stats = run.runner.stats
                if stats.completed != seen:
                    seen = stats.completed
                    covered = sum(stats.source_offsets.get(src, {}).values())
                    marks.append((time.monotonic(), covered))
                return run.covered(src, ends)

            run.wait("a checkpoint covering the backlog", done, 900)
    finally:
        admin.delete_topics([src, dst])
    return steady_rate(marks, len(lines)) * words / len(lines)


def steady_rate(marks: list[tuple[float, int]], total: int) -> float:
    """Input records/s between the last mark covering none of `total` records and the
    first covering all; `marks` are (time, records covered), in time order, the first
    at the start. With no mark in between (one checkpoint covered everything), over the
    whole span, start-up included.
    """
    start = max((m for m in marks if m[1] == 0), default=marks[0])
    end = min((m for m in marks if m[1] >= total), default=marks[-1])
    if end[0] <= start[0] or end[1] <= start[1]:
        start, end = marks[0], marks[-1]
    if end[0] <= start[0]:
        raise ValueError("no time passed between the first and the last mark")
    return (end[1] - start[1]) / (end[0] - start[0])


class _Pacer(threading.Thread):
    """Appends `lines` at `rate` lines per second, from `start()` on."""

    def __init__(self, bootstrap: str, topic: str, lines: list[str], rate: float) -> None:
        super().__init__(name="pacer", daemon=True)
        self.producer = Producer(
            client_config(bootstrap, {"linger.ms": 2, "enable.idempotence": True})
        )
        # Before the clock starts: a cold producer held its first ~0.5 s of input
        # while it looked the topic up, with timestamps from when it was given
        # them, and that much input (1-2% of a run) set the p99 by itself. Its
        # metadata from a bootstrap connection was not enough: the first record
        # to a partition still waited ~0.2 s in half the trials (`connect`).
        connect(self.producer, topic)
        self.topic, self.lines, self.rate = topic, lines, rate
        self.sent = 0
        self.seconds = 0.0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            t0 = time.monotonic()
            while self.sent < len(self.lines):
                due = min(len(self.lines), int((time.monotonic() - t0) * self.rate) + 1)
                for line in self.lines[self.sent : due]:
                    self.producer.produce(self.topic, line.encode())
                self.sent = due
                self.producer.poll(0)
                time.sleep(TICK_S)  # the pace itself: lines become due as time passes
            self.seconds = time.monotonic() - t0
            if self.producer.flush(60):
                raise RuntimeError("input not acknowledged within 60 s")
        except BaseException as exc:
            self.error = exc


def read_latencies(
    run: RunningJob,
    pacer: _Pacer,
    reader: Consumer,
    words: int,
    deadline: float,
    latencies: list[float],
    created: list[float] | None = None,
) -> None:
    """Append to `latencies` each output's age in ms when `reader` got it (now minus its
    timestamp), and to `created` (if given) that timestamp, until there are `words`;
    raises if the job or `pacer` failed, or at `deadline` (monotonic)."""
    while len(latencies) < words:
        run.check()
        if pacer.error is not None:
            raise RuntimeError(f"the input producer failed: {pacer.error}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(latencies):,} of {words:,} outputs were read")
        batch = _take(reader, 10_000, 0.05)
        now_ms = time.time() * 1000
        stamps = [m.timestamp()[1] for m in batch if m.error() is None]
        latencies.extend(now_ms - t for t in stamps)
        if created is not None:
            created.extend(stamps)


def run_at_rate(
    bootstrap: str, *, interval: float, rate: float, seconds: float, seed: int = 11
) -> dict[str, Any]:
    """One steady run of the timed word count: latencies, checkpoints, bytes (JSON form)."""
    lines = generate(max(1, int(rate * seconds)), seed)
    words = sum(len(x.split()) for x in lines)
    admin = Admin(bootstrap)
    src, dst = unique_name("lat-in"), unique_name("lat-out")
    admin.create_topics({src: PARTITIONS, dst: PARTITIONS})
    name = unique_name("lat")
    params = {"input": src, "output": dst, "name": name}
    latencies: list[float] = []
    load = os.getloadavg()[0]
    try:
        reader = _reader(bootstrap, dst)
        # Channel purging off: the bytes figure reads back every channel record written.
        with RunningJob(
            bootstrap, "timed_wordcount", params, interval=interval, keep_channels=True
        ) as run:
            stages = len({t.stage for t in run.runner.plan.tasks})
            # Workers up and a first checkpoint through: the input starts on a running job.
            run.wait("the first checkpoint", lambda: run.runner.stats.completed > 0, 300)
            # Checkpoints up to this one waited for the workers to start: not counted.
            before = run.runner.stats.latest or 0
            pacer = _Pacer(bootstrap, src, lines, rate * len(lines) / words)
            pacer.start()
            deadline = time.monotonic() + seconds + DRAIN_TIMEOUT_S
            read_latencies(run, pacer, reader, words, deadline, latencies)
            pacer.join()
        reader.close()
        messages = read_messages(bootstrap, name)
        fig = job_bytes(
            bootstrap, name, [dst], input_records=len(lines), words=words, stages=stages
        )
    finally:
        admin.delete_topics([src, dst])
    done = [
        r for r in checkpoint_history(messages) if r.status == "completed" and r.checkpoint > before
    ]
    sync: dict[int, float] = {}
    for m in messages:
        if isinstance(m, Acked):
            sync[m.checkpoint] = max(sync.get(m.checkpoint, 0.0), m.sync_ms)
    lat = quantiles(latencies)
    target = interval * 1000 + TARGET_SLACK_MS
    return {
        "interval_s": interval,
        "rate_words_per_s": rate,
        "achieved_words_per_s": words / pacer.seconds if pacer.seconds else None,
        "seconds": seconds,
        "input_records": len(lines),
        "words": words,
        "latency_ms": lat,
        "target_p99_ms": target,
        "target_met": lat["p99"] is not None and lat["p99"] <= target,
        "checkpoint_duration_ms": quantiles([(r.duration_s or 0) * 1000 for r in done]),
        "alignment_ms": quantiles([r.alignment_ms or 0.0 for r in done]),
        "sync_pause_ms": quantiles([sync[r.checkpoint] for r in done if r.checkpoint in sync]),
        "bytes": fig.as_json(),
        "load_at_start": load,
    }


def measure(
    bootstrap: str,
    *,
    intervals: list[float],
    seconds: float,
    load: float = 0.5,
    rate: float | None = None,
    capacity_words: int = 1_000_000,
    say: Any = print,
) -> dict[str, Any]:
    """The latency figure's JSON form: the capacity and rate used, one run per interval."""
    measured = None
    if rate is None:
        measured = capacity(bootstrap, capacity_words)
        rate = measured * load
        say(f"capacity {measured:,.0f} words/s; input at {rate:,.0f} words/s")
    runs = []
    for interval in intervals:
        r = run_at_rate(bootstrap, interval=interval, rate=rate, seconds=seconds)
        lat = r["latency_ms"]
        say(
            f"interval {interval}s: latency p50 {lat['p50']:.0f} ms p99 {lat['p99']:.0f} ms "
            f"(target {r['target_p99_ms']:.0f} ms)"
        )
        runs.append(r)
    return {
        "job": "word count, exactly-once, 2 workers, event time from Kafka timestamps",
        "capacity_words_per_s": measured,
        "load": load if measured is not None else None,
        "runs": runs,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--intervals", default="0.5,1", help="checkpoint intervals, seconds")
    ap.add_argument("--seconds", type=float, default=30.0, help="input time per interval")
    ap.add_argument("--load", type=float, default=0.5, help="input rate ÷ capacity")
    ap.add_argument("--rate", type=float, help="input words/s (default: load times capacity)")
    ap.add_argument("--capacity-words", type=int, default=1_000_000)
    ap.add_argument("--bootstrap-servers", default=None)
    args = ap.parse_args()
    bootstrap = bootstrap_servers(args.bootstrap_servers, print)
    fig = measure(
        bootstrap,
        intervals=[float(x) for x in args.intervals.split(",")],
        seconds=args.seconds,
        load=args.load,
        rate=args.rate,
        capacity_words=args.capacity_words,
    )
    from rich.console import Console

    from benchmarks.figures_report import tables

    Console().print(*tables({"figures": {"latency": fig}}))


if __name__ == "__main__":
    main()
