"""Synchronous snapshot pause, recovery time and worker RSS against the size of keyed state.

    python -m benchmarks.state_bench [--keys 10000,1000000] [--value-bytes 100]
        [--checkpoints 5] [--interval 1] [--bootstrap-servers B]

Per state size, a fresh job (`benchmarks.figure_jobs.state_filler`,
exactly-once, 2 workers) is filled with that many keys, each holding a value of
`--value-bytes` bytes (10 M keys of 100 bytes is about 1 GB), `FILL_GROUP` keys
at a time. Then, with a
trickle of probe records keeping it live:

* **synchronous pause**: the part of a snapshot during which a subtask
  processes nothing — the cached state changes moved into the memtable, the
  sinks' pre-commit and the barriers downstream (the RocksDB checkpoint itself
  is created on the snapshot thread) — as the subtask measures it
  (`Task.snapshot`, the ack's ``sync_ms``); per checkpoint the largest over
  its subtasks. Given for the checkpoints taken while filling and for
  `--checkpoints` checkpoints taken with all the state in place.
* **worker RSS**: each worker process's resident set (``VmRSS``) then, and its
  peak (``VmHWM``), from /proc; the largest over the workers.
* **recovery time**: a worker is SIGKILLed; from the kill until a
  read_committed reader sees the output of a probe appended after the kill.
  That spans noticing the death, the rollback, starting a worker process,
  restoring every subtask's state, and the first checkpoint after it (whose
  completion commits the output), so it includes up to one interval.
"""

from __future__ import annotations

import argparse
import os
import signal
import time
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from benchmarks.harness import RunningJob, quantiles, vm_kib
from kstream.infra.admin import Admin
from kstream.infra.client_settings import client_config
from kstream.infra.cluster import bootstrap_servers
from kstream.protocol.checkpoint_history import checkpoint_history
from kstream.runtime.control import read_messages
from kstream.testing import produce, unique_name

PARTITIONS = 3
#: Keys per fill record (the flat_map expands each into this many state updates).
FILL_CHUNK = 1_000
#: Keys appended at once; the next group waits for a checkpoint covering this one.
#: Appended all at once, a poll batch of fill records expands into millions of
#: updates and its worker sends no heartbeat until done: at 10 M keys on a loaded
#: machine that outlasted the liveness timeout, and every rollback restarted the fill.
FILL_GROUP = 100_000
#: Probes keep the job live while its pause is measured, and time its recovery.
PROBE_EVERY_S = 0.02
#: Probes appended after the kill are numbered from here (those before stay below).
AFTER_KILL = 1_000_000_000
#: Generous bounds for one state size on a loaded 2-core machine (no figure depends on them).
FILL_TIMEOUT_S = 3600.0
RECOVERY_TIMEOUT_S = 600.0


def _probe(producer: Producer, topic: str, seq: int) -> None:
    producer.produce(topic, f"probe {seq}".encode())
    producer.poll(0)


def run_size(
    bootstrap: str, keys: int, *, value_bytes: int, checkpoints: int, interval: float
) -> dict[str, Any]:
    """One state size: pauses while filling and when full, RSS, recovery (JSON form)."""
    admin = Admin(bootstrap)
    src, dst = unique_name("state-in"), unique_name("state-out")
    admin.create_topics({src: PARTITIONS, dst: PARTITIONS})
    name = unique_name("state")
    params = {"input": src, "output": dst, "name": name}
    load = os.getloadavg()[0]
    producer = Producer(client_config(bootstrap, {"linger.ms": 1}))
    reader = Consumer(
        client_config(
            bootstrap,
            {
                "group.id": unique_name("state-reader"),
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 10,
            },
        )
    )
    reader.assign([TopicPartition(dst, p, 0) for p in range(PARTITIONS)])
    try:
        with RunningJob(bootstrap, "state_filler", params, interval=interval) as run:
            stats = run.runner.stats
            run.wait("the first checkpoint", lambda: stats.completed > 0, 300)
            started = time.monotonic()
            fill_from = len(stats.sync_ms)
            for group in range(0, keys, FILL_GROUP):
                fills = [
                    (None, f"fill {i} {min(FILL_CHUNK, keys - i)} {value_bytes}".encode())
                    for i in range(group, min(keys, group + FILL_GROUP), FILL_CHUNK)
                ]
                produce(bootstrap, src, fills)
                ends = {p: high for p, (_, high) in admin.watermarks(src).items()}
                run.wait(
                    "a checkpoint covering the fill",
                    lambda: run.covered(src, ends),  # noqa: B023 (waited for at once)
                    FILL_TIMEOUT_S,
                )
            fill_s = time.monotonic() - started
            filling = stats.sync_ms[fill_from:]
            full_from = len(stats.sync_ms)
            seq = 0
            next_probe = time.monotonic()

            def full() -> bool:
                nonlocal seq, next_probe
                if time.monotonic() >= next_probe:
                    _probe(producer, src, seq)
                    seq += 1
                    next_probe += PROBE_EVERY_S
                return len(stats.sync_ms) >= full_from + checkpoints

            run.wait(f"{checkpoints} checkpoints of the full state", full, 60 + 10 * checkpoints)
            pauses = stats.sync_ms[full_from:]
            pids = run.running.worker_pids()
            rss = [vm_kib(pid, "VmRSS") or 0 for pid in pids.values()]
            hwm = [vm_kib(pid, "VmHWM") or 0 for pid in pids.values()]
            victim = min(pids)
            os.kill(pids[victim], signal.SIGKILL)
            killed = time.monotonic()
            seq = AFTER_KILL
            next_probe = killed
            recovered: float | None = None

            def back() -> bool:
                nonlocal recovered, seq, next_probe
                if time.monotonic() >= next_probe:
                    _probe(producer, src, seq)
                    seq += 1
                    next_probe += PROBE_EVERY_S
                for m in reader.consume(1000, 0.01):
                    if m.error() is None and int(m.value() or b"0") >= AFTER_KILL:
                        recovered = time.monotonic()
                        return True
                return False

            run.wait("the first output after recovery", back, RECOVERY_TIMEOUT_S)
            assert recovered is not None
        sizes = [
            r.size
            for r in checkpoint_history(read_messages(bootstrap, name))
            if r.status == "completed" and r.size is not None
        ]
    finally:
        producer.flush(30)
        reader.close()
        admin.delete_topics([src, dst])
    return {
        "keys": keys,
        "value_bytes": value_bytes,
        "state_bytes": max(sizes, default=None),
        "fill_seconds": fill_s,
        "sync_pause_filling_ms": quantiles(filling),
        "sync_pause_ms": quantiles(pauses),
        "worker_rss_mb": max(rss) / 1024,
        "worker_peak_rss_mb": max(hwm) / 1024,
        "recovery_s": recovered - killed,
        "interval_s": interval,
        "load_at_start": load,
    }


def measure(
    bootstrap: str,
    keys: list[int],
    *,
    value_bytes: int = 100,
    checkpoints: int = 5,
    interval: float = 1.0,
    say: Any = print,
) -> dict[str, Any]:
    """The state-size figure's JSON form: one entry per size."""
    out = []
    for k in keys:
        r = run_size(
            bootstrap, k, value_bytes=value_bytes, checkpoints=checkpoints, interval=interval
        )
        say(
            f"{k:,} keys: pause p99 {r['sync_pause_ms']['p99']:.1f} ms, "
            f"recovery {r['recovery_s']:.2f} s, worker RSS {r['worker_rss_mb']:.0f} MB"
        )
        out.append(r)
    return {"job": "keyed state filler, exactly-once, 2 workers", "sizes": out}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", default="10000,1000000", help="state sizes, comma-separated")
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--checkpoints", type=int, default=5, help="of the full state, per size")
    ap.add_argument("--interval", type=float, default=1.0, help="checkpoint interval, seconds")
    ap.add_argument("--bootstrap-servers", default=None)
    args = ap.parse_args()
    bootstrap = bootstrap_servers(args.bootstrap_servers, print)
    fig = measure(
        bootstrap,
        [int(k) for k in args.keys.split(",")],
        value_bytes=args.value_bytes,
        checkpoints=args.checkpoints,
        interval=args.interval,
    )
    from rich.console import Console

    from benchmarks.figures_report import tables

    Console().print(*tables({"figures": {"state": fig}}))


if __name__ == "__main__":
    main()
