"""Flow control against a backlog: the word count started on a large input, off and on.

    python -m benchmarks.flow_bench [--lines 200000] [--workers 2] [--interval 0.5]
        [--max-channel-lag 100,20] [--bootstrap-servers B]

One input topic is written first (generated lines, fixed seed, 3 partitions);
then the word count runs over it twice in the same process, on the same
broker, each time with a fresh output topic and job name: once with flow
control off (``--max-channel-lag 0``), then once per bound given. Per run it prints checkpoint
duration and alignment p50/p99 (from the job's control topic, the figures
``kstream checkpoints`` shows), the time from start to the first output a
``read_committed`` reader sees, words/s over the whole backlog (start until a
completed checkpoint covers the input), the largest channel lag seen (end
offset minus the reader's reported position, via the admin API, every
0.1 s), and whether the output is exactly-once (every word's counts 1..N,
once, in order). Then each run's throughput over the first's.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from kstream.infra.admin import Admin
from kstream.infra.client_settings import client_config
from kstream.infra.cluster import bootstrap_servers
from kstream.protocol.checkpoint_history import checkpoint_history
from kstream.protocol.coordination import CoordinatorConfig
from kstream.protocol.flow import DEFAULT_MAX_LAG, FlowConfig, channel_lags
from kstream.runtime.channels.flow import ChannelProbe, written_channels
from kstream.runtime.config import JobRef, RunConfig
from kstream.runtime.control import read_messages
from kstream.runtime.runner.runner import Runner
from kstream.testing import BACKLOG_READER, produce, read_all, unique_name
from kstream.tools.demo import _generate, check_running_counts
from kstream.tools.spec import load_job

WORDCOUNT = "kstream.examples.wordcount:job"
PARTITIONS = 3


def percentile(values: list[float], q: float) -> float:
    """The `q`-quantile (0..1) of `values`, nearest rank; NaN if empty."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


@dataclass
class BacklogRun:
    """What one run of the word count over a backlog measured."""

    max_channel_lag: int
    words: int
    seconds: float
    first_output_s: float | None
    #: Completed checkpoints' durations (s) and alignments (ms), in order.
    durations_s: list[float] = field(default_factory=list)
    alignments_ms: list[float] = field(default_factory=list)
    #: Largest lag of any channel seen, in channel records.
    peak_lag: int = 0
    exactly_once: bool = False
    recoveries: int = 0

    @property
    def words_per_s(self) -> float:
        return self.words / self.seconds


def write_backlog(bootstrap: str, lines: list[str]) -> tuple[str, dict[int, int]]:
    """A new input topic holding `lines` (line i in partition i % 3); its end offsets."""
    topic = unique_name("flow-in")
    Admin(bootstrap).create_topics({topic: PARTITIONS})
    for p in range(PARTITIONS):
        produce(
            bootstrap, topic, [(None, line.encode()) for line in lines[p::PARTITIONS]], partition=p
        )
    ends = {p: len(range(p, len(lines), PARTITIONS)) for p in range(PARTITIONS)}
    return topic, ends


def backlog_run(
    bootstrap: str,
    src: str,
    ends: dict[int, int],
    lines: list[str],
    *,
    max_channel_lag: int,
    workers: int = 2,
    interval: float = 0.5,
    timeout: float = 900.0,
    spec: str = WORDCOUNT,
) -> BacklogRun:
    """Run the word count over the backlog in `src` until a checkpoint covers it.

    `spec` may name another job with the word count's parameters (``input``,
    ``output``, ``name``) and output.
    """
    dst = unique_name("flow-out")
    Admin(bootstrap).create_topics({dst: PARTITIONS})
    params = {"input": src, "output": dst, "name": unique_name("flow")}
    job = load_job(spec, params)
    words = sum(len(line.split()) for line in lines)
    with tempfile.TemporaryDirectory() as state:
        runner = Runner(
            RunConfig(
                JobRef(spec, params),
                bootstrap,
                workers,
                Path(state),
                checkpoints=CoordinatorConfig(interval=interval),
                flow=FlowConfig(max_lag=max_channel_lag),
            ),
            job,
            say=lambda _: None,
        )
        runner.prepare()
        # The channels every source subtask writes, with their readers' groups.
        channels = {}
        for t in runner.plan.tasks:
            channels.update(written_channels(runner.plan, t))
        probe = ChannelProbe(bootstrap, channels)
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
        result = BacklogRun(max_channel_lag, words, 0.0, None)
        started = time.perf_counter()
        running = runner.start()
        seen_probe = None
        try:
            while True:
                running.step()
                now = time.perf_counter()
                if result.first_output_s is None and any(
                    m.error() is None for m in reader.consume(100, 0)
                ):
                    result.first_output_s = now - started
                latest = probe.latest
                if latest is not None and latest is not seen_probe:
                    seen_probe = latest
                    lags = channel_lags(latest.ends, latest.positions, latest.starts)
                    result.peak_lag = max([result.peak_lag, *lags.values()])
                offsets = runner.stats.source_offsets.get(src, {})
                if all(offsets.get(p, 0) >= e for p, e in ends.items() if e > 0):
                    break
                if now - started > timeout:
                    raise TimeoutError(f"the word count did not finish within {timeout:.0f}s")
            result.seconds = time.perf_counter() - started
        finally:
            running.stop()
            probe.close()
            reader.close()
        result.recoveries = runner.stats.recoveries
    for r in checkpoint_history(read_messages(bootstrap, job.name)):
        if r.status == "completed" and r.duration_s is not None:
            result.durations_s.append(r.duration_s)
            result.alignments_ms.append(r.alignment_ms or 0.0)
    result.exactly_once = check_running_counts(lines, read_all(bootstrap, dst)).output_exact
    return result


def table(runs: list[BacklogRun]) -> list[str]:
    """The runs side by side, one row each, and each throughput against the first run's."""
    head = (
        f"{'max-channel-lag':>15} {'ckpts':>5} {'dur p50 s':>9} {'dur p99 s':>9} "
        f"{'align p50 ms':>12} {'align p99 ms':>12} {'1st out s':>9} {'words/s':>9} "
        f"{'peak lag':>8} {'exactly-once':>12}"
    )
    rows = [head]
    for r in runs:
        first = f"{r.first_output_s:.2f}" if r.first_output_s is not None else "-"
        rows.append(
            f"{r.max_channel_lag or 'off':>15} {len(r.durations_s):>5} "
            f"{percentile(r.durations_s, 0.5):>9.2f} {percentile(r.durations_s, 0.99):>9.2f} "
            f"{percentile(r.alignments_ms, 0.5):>12.1f} {percentile(r.alignments_ms, 0.99):>12.1f} "
            f"{first:>9} {r.words_per_s:>9.0f} {r.peak_lag:>8} {r.exactly_once!s:>12}"
        )
    for r in runs[1:]:
        rows.append(
            f"throughput with max-channel-lag {r.max_channel_lag} / off: "
            f"{r.words_per_s / runs[0].words_per_s:.2f}"
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=200_000, help="input lines (~8 words each)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--interval", type=float, default=0.5, help="checkpoint interval, seconds")
    ap.add_argument(
        "--max-channel-lag",
        default=f"{DEFAULT_MAX_LAG},20",
        help="the bounds of the runs with flow control, comma-separated",
    )
    ap.add_argument("--bootstrap-servers", default=None)
    args = ap.parse_args()
    bootstrap = bootstrap_servers(args.bootstrap_servers, print)
    lines = _generate(args.lines, seed=7)
    src, ends = write_backlog(bootstrap, lines)
    print(f"backlog: {args.lines} lines, {sum(len(x.split()) for x in lines)} words in {src}")
    runs = []
    for lag in (0, *(int(x) for x in args.max_channel_lag.split(","))):
        run = backlog_run(
            bootstrap,
            src,
            ends,
            lines,
            max_channel_lag=lag,
            workers=args.workers,
            interval=args.interval,
        )
        print(
            f"max-channel-lag {lag or 'off'}: {run.seconds:.1f}s, "
            f"{len(run.durations_s)} checkpoints, "
            f"median {statistics.median(run.durations_s or [float('nan')]):.2f}s"
        )
        runs.append(run)
    for row in table(runs):
        print(row)


if __name__ == "__main__":
    main()
