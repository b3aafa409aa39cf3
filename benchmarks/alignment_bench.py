"""Aligned vs unaligned checkpoints on a skewed backlog: checkpoint duration and output latency.

    python -m benchmarks.alignment_bench [--lines 100000] [--skew 0.8] [--workers 2]
        [--interval 0.5] [--max-channel-lag 0] [--bootstrap-servers B]

One input topic is written first (generated lines, fixed seed, 3 partitions),
skewed: a share `--skew` of the lines in partition 0, the rest split over the
others, so one source subtask's channels carry most of the backlog and the
counting subtasks' other channels little. The word count then runs over it
once per mode (``aligned``, ``unaligned``), on the same broker, each with a
fresh output topic and job name. Per run it prints the completed checkpoints'
duration and alignment p50/p99 (from the control topic: alignment is the time
from a subtask's first barrier to its last, in both modes; what differs is
whether the other channels were blocked meanwhile), the time from start to
the first output a ``read_committed`` reader sees, words/s over the whole
backlog (until a completed checkpoint covers the input and its output), and
whether the output is exactly-once.

Kafka channels are logs: a barrier never overtakes the records before it, so
an unaligned checkpoint still completes only once every barrier arrived; what
unaligned mode saves is the blocking of the channels that delivered theirs.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from benchmarks.flow_bench import PARTITIONS, WORDCOUNT, percentile
from kstream.infra.admin import Admin
from kstream.infra.client_settings import client_config
from kstream.infra.cluster import bootstrap_servers
from kstream.protocol.barrier import Alignment
from kstream.protocol.checkpoint_history import checkpoint_history
from kstream.protocol.coordination import CoordinatorConfig
from kstream.protocol.flow import FlowConfig
from kstream.runtime.config import JobRef, RunConfig
from kstream.runtime.control import read_messages
from kstream.runtime.runner.runner import Runner
from kstream.testing import BACKLOG_READER, in_flight_at, produce, read_all, unique_name
from kstream.tools.demo import _generate, check_running_counts
from kstream.tools.spec import load_job


@dataclass
class ModeRun:
    """What one run of the word count over the skewed backlog measured."""

    alignment: Alignment
    words: int
    seconds: float = 0.0
    first_output_s: float | None = None
    durations_s: list[float] = field(default_factory=list)
    alignments_ms: list[float] = field(default_factory=list)
    exactly_once: bool = False


def write_skewed(bootstrap: str, lines: list[str], skew: float) -> tuple[str, dict[int, int]]:
    """A new input topic with a share `skew` of `lines` in partition 0; its end offsets."""
    topic = unique_name("align-in")
    Admin(bootstrap).create_topics({topic: PARTITIONS})
    heavy = int(len(lines) * skew)
    parts: dict[int, list[str]] = {0: lines[:heavy]}
    rest = lines[heavy:]
    for p in range(1, PARTITIONS):
        parts[p] = rest[p - 1 :: PARTITIONS - 1]
    for p, chunk in parts.items():
        produce(bootstrap, topic, [(None, line.encode()) for line in chunk], partition=p)
    return topic, {p: len(chunk) for p, chunk in parts.items()}


def mode_run(
    bootstrap: str,
    src: str,
    ends: dict[int, int],
    lines: list[str],
    alignment: Alignment,
    *,
    workers: int,
    interval: float,
    max_channel_lag: int,
    timeout: float = 900.0,
) -> ModeRun:
    dst = unique_name("align-out")
    Admin(bootstrap).create_topics({dst: PARTITIONS})
    params = {"input": src, "output": dst, "name": unique_name("align")}
    job = load_job(WORDCOUNT, params)
    result = ModeRun(alignment, sum(len(line.split()) for line in lines))
    with tempfile.TemporaryDirectory() as state:
        runner = Runner(
            RunConfig(
                JobRef(WORDCOUNT, params),
                bootstrap,
                workers,
                Path(state),
                checkpoints=CoordinatorConfig(interval=interval),
                alignment=alignment,
                flow=FlowConfig(max_lag=max_channel_lag),
            ),
            job,
            say=lambda _: None,
        )
        runner.prepare()
        reader = Consumer(
            client_config(
                bootstrap,
                {
                    "group.id": unique_name("first-output"),
                    "isolation.level": "read_committed",
                    "enable.auto.commit": False,
                    **BACKLOG_READER,
                },
            )
        )
        reader.assign([TopicPartition(dst, p, 0) for p in range(PARTITIONS)])
        started = time.perf_counter()
        running = runner.start()
        try:
            while True:
                running.step()
                now = time.perf_counter()
                if result.first_output_s is None and any(
                    m.error() is None for m in reader.consume(100, 0)
                ):
                    result.first_output_s = now - started
                offsets = runner.stats.source_offsets.get(src, {})
                covered = all(offsets.get(p, 0) >= e for p, e in ends.items() if e > 0)
                # Unaligned: the output of records in flight at the covering
                # snapshot is committed by a later checkpoint.
                if covered and not in_flight_at(runner, runner.stats.latest):
                    break
                if now - started > timeout:
                    raise TimeoutError(f"the word count did not finish within {timeout:.0f}s")
            result.seconds = time.perf_counter() - started
        finally:
            running.stop()
            reader.close()
    for r in checkpoint_history(read_messages(bootstrap, job.name)):
        if r.status == "completed" and r.duration_s is not None:
            result.durations_s.append(r.duration_s)
            result.alignments_ms.append(r.alignment_ms or 0.0)
    result.exactly_once = check_running_counts(lines, read_all(bootstrap, dst)).output_exact
    return result


def table(runs: list[ModeRun]) -> list[str]:
    rows = [
        f"{'alignment':>10} {'ckpts':>5} {'dur p50 s':>9} {'dur p99 s':>9} "
        f"{'align p50 ms':>12} {'align p99 ms':>12} {'1st out s':>9} {'words/s':>9} "
        f"{'exactly-once':>12}"
    ]
    for r in runs:
        first = f"{r.first_output_s:.2f}" if r.first_output_s is not None else "-"
        rows.append(
            f"{r.alignment.value:>10} {len(r.durations_s):>5} "
            f"{percentile(r.durations_s, 0.5):>9.2f} {percentile(r.durations_s, 0.99):>9.2f} "
            f"{percentile(r.alignments_ms, 0.5):>12.1f} {percentile(r.alignments_ms, 0.99):>12.1f} "
            f"{first:>9} {r.words / r.seconds:>9.0f} {r.exactly_once!s:>12}"
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=100_000, help="input lines (~8 words each)")
    ap.add_argument("--skew", type=float, default=0.8, help="share of the lines in partition 0")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--interval", type=float, default=0.5, help="checkpoint interval, seconds")
    ap.add_argument("--max-channel-lag", type=int, default=0, help="flow control's bound (0: off)")
    ap.add_argument("--bootstrap-servers", default=None)
    args = ap.parse_args()
    bootstrap = bootstrap_servers(args.bootstrap_servers, print)
    lines = _generate(args.lines, seed=7)
    src, ends = write_skewed(bootstrap, lines, args.skew)
    print(f"skewed backlog: {args.lines} lines, partition ends {ends}, in {src}")
    runs = []
    for mode in (Alignment.ALIGNED, Alignment.UNALIGNED):
        run = mode_run(
            bootstrap,
            src,
            ends,
            lines,
            mode,
            workers=args.workers,
            interval=args.interval,
            max_channel_lag=args.max_channel_lag,
        )
        print(f"{mode.value}: {run.seconds:.1f}s, {len(run.durations_s)} checkpoints")
        runs.append(run)
    for row in table(runs):
        print(row)


if __name__ == "__main__":
    main()
