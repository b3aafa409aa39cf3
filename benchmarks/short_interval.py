"""Exactly-once at a short checkpoint interval: throughput, latency and the broker's
requests per checkpoint, side by side at each interval.

    python -m benchmarks.short_interval [--intervals 1,0.1] [--capacity-words 600000]
        [--load 0.5] [--seconds 20] [--idle-seconds 20] [--max-in-flight 1[,2]]
        [--rounds 1] [--bootstrap-servers B]

kstream's exactly-once word count (`benchmarks.figure_jobs.timed_wordcount`, 2
workers) per checkpoint interval:

- **throughput**: words/s over a backlog of `--capacity-words`
  (`benchmarks.latency.capacity`, start-up left out), at each interval;
- **latency**: end-to-end p50/p99 (read_committed reader, output time minus the
  input's CreateTime) with input appended at `--load` times the first interval's
  throughput for `--seconds`;
- **how long checkpoints take** in that run: each completion's duration as the
  coordinator wrote it, trigger to last ack (`kstream.protocol.checkpoint_history`):
  the part of a latency the protocol accounts for; the rest is the records' way
  through the job and the commit;
- **the broker's cost**, idle (the job running, no input) and loaded (the same
  latency run, its first 3 s and its drain left out): the broker process's CPU
  (``/proc``) per second, and its requests by type from its ``RequestsPerSec``
  JMX counters (`benchmarks/jmx/BrokerRequests.java`, attached to the broker's
  JVM; needs a local broker and a JDK), per completed checkpoint and per second.

The counters are the broker's, so they count every client of the broker: each
window notes the other processes connected to it meanwhile (``shared by``),
and a window with any is not a clean figure. The loaded window counts the
benchmark's own input producer and output reader too (the same at every
interval). The machine's load average is printed with each figure.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from benchmarks.cpu import broker_process, process_cpu_s
from benchmarks.harness import RunningJob, quantiles
from benchmarks.latency import PARTITIONS, _Pacer, _reader, capacity, read_latencies
from benchmarks.workloads import generate
from kstream.infra.admin import Admin
from kstream.infra.cluster import bootstrap_servers
from kstream.protocol.checkpoint_history import checkpoint_history
from kstream.runtime.control import read_messages
from kstream.testing import unique_name

JAVA_SOURCE = Path(__file__).resolve().parent / "jmx" / "BrokerRequests.java"
#: The request types shown one by one (the others are summed under "other").
SHOWN = (
    "Produce",
    "Fetch",
    "AddPartitionsToTxn",
    "AddOffsetsToTxn",
    "EndTxn",
    "WriteTxnMarkers",
    "TxnOffsetCommit",
    "OffsetCommit",
    "OffsetFetch",
    "ListOffsets",
    "InitProducerId",
    "FindCoordinator",
    "Metadata",
    "Heartbeat",
)
#: Left out: the broker's own requests (KRaft controller traffic), and the Fetch
#: counters' split by kind (each fetch is counted again as one of them).
BROKER_OWN = (
    "BrokerHeartbeat",
    "BrokerRegistration",
    "ControllerRegistration",
    "FetchConsumer",
    "FetchFollower",
)
#: Loaded window: left out after the input starts (the job reaches its pace).
RAMP_S = 3.0


class BrokerCounters:
    """The broker's request counts by type, read over JMX by one long-lived JVM."""

    def __init__(self, pid: int) -> None:
        self._proc = subprocess.Popen(
            ["java", str(JAVA_SOURCE), str(pid)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def read(self) -> dict[str, int]:
        assert self._proc.stdin is not None
        assert self._proc.stdout is not None
        self._proc.stdin.write("\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError("the JMX reader exited (a local broker and a JDK are needed)")
        return {k: int(v) for k, v in (kv.split("=") for kv in line.split())}

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        self._proc.wait(30)


@dataclass
class Window:
    """What the broker did between `open` and `close`: CPU, requests, checkpoints."""

    broker: psutil.Process
    counters: BrokerCounters
    port: int
    start: dict[str, Any] = field(default_factory=dict)
    foreign: set[str] = field(default_factory=set)
    result: dict[str, Any] = field(default_factory=dict)

    def _mark(self, completed: int) -> dict[str, Any]:
        return {
            "t": time.monotonic(),
            "cpu": process_cpu_s(self.broker),
            "req": self.counters.read(),
            "completed": completed,
        }

    def note_clients(self) -> None:
        """Remember the processes outside this one's tree connected to the broker now."""
        ours = {os.getpid(), *(p.pid for p in psutil.Process().children(recursive=True))}
        for c in psutil.net_connections(kind="tcp"):
            if c.raddr and c.raddr.port == self.port and c.pid and c.pid not in ours:
                if c.pid == self.broker.pid:
                    continue
                try:
                    self.foreign.add(f"{c.pid}:{psutil.Process(c.pid).name()}")
                except psutil.Error:
                    self.foreign.add(str(c.pid))

    def open(self, completed: int) -> None:
        self.note_clients()
        self.start = self._mark(completed)

    def close(self, completed: int) -> dict[str, Any]:
        self.note_clients()
        end = self._mark(completed)
        seconds = end["t"] - self.start["t"]
        checkpoints = end["completed"] - self.start["completed"]
        req = {
            k: v - self.start["req"].get(k, 0)
            for k, v in end["req"].items()
            if k not in BROKER_OWN and v - self.start["req"].get(k, 0) > 0
        }
        self.result = {
            "seconds": seconds,
            "checkpoints": checkpoints,
            "broker_cpu_per_s": (end["cpu"] - self.start["cpu"]) / seconds,
            "requests": req,
            "requests_per_s": sum(req.values()) / seconds,
            "requests_per_checkpoint": {k: v / max(checkpoints, 1) for k, v in req.items()},
            "load": os.getloadavg()[0],
            "shared_by": sorted(self.foreign),
        }
        return self.result


def idle(
    bootstrap: str, interval: float, seconds: float, window: Window, *, rare: bool = True
) -> dict[str, Any]:
    """The word count running with no input for `seconds`: the broker's cost. `rare`:
    checkpointed every idle interval once idle (the default), else at every interval."""
    admin = Admin(bootstrap)
    src, dst = unique_name("si-idle-in"), unique_name("si-idle-out")
    admin.create_topics({src: PARTITIONS, dst: PARTITIONS})
    params = {"input": src, "output": dst, "name": unique_name("si-idle")}
    try:
        job = RunningJob(
            bootstrap, "timed_wordcount", params, interval=interval, idle_checkpoints=rare
        )
        with job as run:
            run.wait("the first checkpoint", lambda: run.runner.stats.completed > 0, 300)
            time.sleep(RAMP_S)  # start-up's requests (metadata, coordinators) left out
            window.open(run.runner.stats.completed)
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                run.check()
                window.note_clients()
                time.sleep(0.5)  # the window's length, sampled for other clients
            return window.close(run.runner.stats.completed)
    finally:
        admin.delete_topics([src, dst])


def loaded(
    bootstrap: str,
    interval: float,
    rate: float,
    seconds: float,
    window: Window,
    *,
    max_in_flight: int = 1,
) -> dict[str, Any]:
    """Input at `rate` words/s for `seconds`, `max_in_flight` checkpoints pending at
    once at most: latencies, and the broker's cost while it flows."""
    lines = generate(max(1, int(rate * seconds)), 11)
    words = sum(len(x.split()) for x in lines)
    admin = Admin(bootstrap)
    src, dst = unique_name("si-in"), unique_name("si-out")
    admin.create_topics({src: PARTITIONS, dst: PARTITIONS})
    params = {"input": src, "output": dst, "name": unique_name("si")}
    latencies: list[float] = []
    created: list[float] = []
    try:
        reader = _reader(bootstrap, dst)
        with RunningJob(
            bootstrap, "timed_wordcount", params, interval=interval, max_in_flight=max_in_flight
        ) as run:
            run.wait("the first checkpoint", lambda: run.runner.stats.completed > 0, 300)
            pacer = _Pacer(bootstrap, src, lines, rate * len(lines) / words)
            pacer.start()
            t0 = time.monotonic()
            # The window: from RAMP_S after the input starts to 1 s before it ends,
            # taken on a thread so that the reader below keeps reading meanwhile.
            stats = run.runner.stats

            def measure() -> None:
                time.sleep(RAMP_S)
                window.open(stats.completed)
                while time.monotonic() < t0 + seconds - 1:
                    window.note_clients()
                    time.sleep(0.5)  # sampled for other clients
                window.close(stats.completed)

            measuring = threading.Thread(target=measure, daemon=True)
            measuring.start()
            read_latencies(run, pacer, reader, words, t0 + seconds + 120, latencies, created)
            pacer.join()
            measuring.join()
        reader.close()
        durations = [
            r.duration_s * 1000
            for r in checkpoint_history(read_messages(bootstrap, params["name"]))
            if r.status == "completed" and r.duration_s is not None
        ]
    finally:
        admin.delete_topics([src, dst])
    return {
        **window.result,
        "rate_words_per_s": rate,
        "achieved_words_per_s": words / pacer.seconds if pacer.seconds else None,
        "latency_ms": quantiles(latencies),
        "steady_latency_ms": quantiles(steady(latencies, created)),
        "checkpoint_ms": quantiles(durations),
    }


def steady(latencies: list[float], created: list[float]) -> list[float]:
    """The `latencies` of outputs whose input was written `RAMP_S` or more after the
    first input: a job's first seconds (its consumers' first fetches, the first
    transactions of its sinks, the coordinator waking from idleness) left out."""
    if not created:
        return []
    start = min(created) + RAMP_S * 1000
    return [lat for lat, at in zip(latencies, created, strict=True) if at >= start]


def _row(name: str, w: dict[str, Any]) -> str:
    per = w["requests_per_checkpoint"]
    other = sum(v for k, v in per.items() if k not in SHOWN)
    others = " ".join(f"{k} {v:.1f}" for k, v in sorted(per.items()) if k not in SHOWN)
    shown = " ".join(f"{k} {per[k]:.1f}" for k in SHOWN if k in per)
    return (
        f"  {name}: {w['checkpoints']} checkpoints in {w['seconds']:.1f} s, "
        f"broker {w['broker_cpu_per_s'] * 100:.1f}% of a core, "
        f"{w['requests_per_s']:.0f} requests/s, load {w['load']:.2f}"
        + (f", shared by {', '.join(w['shared_by'])}" if w["shared_by"] else "")
        + f"\n    per checkpoint: {shown}"
        + (f" other {other:.1f}" if other else "")
        + (f"\n    other: {others}" if others else "")
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--intervals", default="1,0.1", help="checkpoint intervals, s")
    ap.add_argument("--capacity-words", type=int, default=600_000)
    ap.add_argument("--load", type=float, default=0.5, help="input ÷ the first one's throughput")
    ap.add_argument("--seconds", type=float, default=20.0, help="steady input per run")
    ap.add_argument("--idle-seconds", type=float, default=20.0)
    ap.add_argument("--skip", default="", help="comma-separated: throughput,idle,loaded")
    ap.add_argument("--rate", type=float, help="input words/s (default: load times throughput)")
    ap.add_argument(
        "--max-in-flight",
        default="1",
        help="comma-separated: checkpoints pending at once in the loaded runs, side by side",
    )
    ap.add_argument("--rounds", type=int, default=1, help="loaded runs of each setting, alternated")
    ap.add_argument("--bootstrap-servers", default=None)
    args = ap.parse_args()
    bootstrap = bootstrap_servers(args.bootstrap_servers, print)
    intervals = [float(x) for x in args.intervals.split(",")]
    skip = set(filter(None, args.skip.split(",")))
    broker = broker_process(bootstrap)
    if broker is None:
        raise SystemExit("no local broker process listens on the bootstrap port")
    port = int(bootstrap.split(",")[0].rsplit(":", 1)[-1])
    counters = BrokerCounters(broker.pid)
    try:
        rate = args.rate
        if "throughput" not in skip:
            caps = {}
            for i in intervals:
                load = os.getloadavg()[0]
                caps[i] = capacity(bootstrap, args.capacity_words, interval=i)
                print(f"throughput at {i} s: {caps[i]:,.0f} words/s (load {load:.2f})")
            first = caps[intervals[0]]
            for i in intervals[1:]:
                print(f"  ratio {i} s ÷ {intervals[0]} s: {caps[i] / first:.2f}")
            rate = rate or first * args.load
        if "idle" not in skip:
            for i in intervals:
                # Side by side: an idle job checkpointed at every interval, then rarely.
                for rare in (False, True):
                    window = Window(broker, counters, port)
                    w = idle(bootstrap, i, args.idle_seconds, window, rare=rare)
                    print(_row(f"idle at {i} s, {'rare' if rare else 'every'} checkpoints", w))
        if "loaded" not in skip:
            if rate is None:
                raise SystemExit("--rate is needed when throughput is skipped")
            print(f"input at {rate:,.0f} words/s")
            in_flight = [int(x) for x in args.max_in_flight.split(",")]
            settings = [(i, n) for _ in range(args.rounds) for i in intervals for n in in_flight]
            for i, n in settings:
                window = Window(broker, counters, port)
                r = loaded(bootstrap, i, rate, args.seconds, window, max_in_flight=n)
                lat = r["latency_ms"]
                print(
                    f"latency at {i} s, {n} in flight: p50 {lat['p50']:.0f} ms "
                    f"p99 {lat['p99']:.0f} ms max {lat['max']:.0f} ms (n {lat['n']:,}, achieved "
                    f"{r['achieved_words_per_s']:,.0f} words/s)"
                )
                st = r["steady_latency_ms"]
                if st["n"]:
                    print(
                        f"  from {RAMP_S:.0f} s after the input starts: p50 {st['p50']:.0f} ms "
                        f"p99 {st['p99']:.0f} ms max {st['max']:.0f} ms (n {st['n']:,})"
                    )
                ck = r["checkpoint_ms"]
                if ck["n"]:
                    print(
                        f"  checkpoints at {i} s, trigger to last ack: p50 {ck['p50']:.0f} ms "
                        f"p99 {ck['p99']:.0f} ms max {ck['max']:.0f} ms (n {ck['n']})"
                    )
                print(_row(f"loaded at {i} s", r))
    finally:
        counters.close()


if __name__ == "__main__":
    main()
