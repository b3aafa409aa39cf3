"""Incremental checkpoints over a long word count: bytes put per checkpoint, and the pause.

    python benchmarks/increments_bench.py [--minutes 10] [--rate 10000] [--keys 1000000]
        [--shape wordcount|uniform|skewed] [--options built,main]

Starts S3Proxy (`kstream.infra.object_store`) on a free port and runs the word
count example (``kstream run kstream.examples.wordcount:job``, 2 workers,
checkpoints every `--interval` seconds into ``s3://``, every checkpoint
retained) against the broker at ``KSTREAM_BOOTSTRAP`` while a producer writes
`--rate` words a second drawn from `--keys` distinct words by `--shape`:
``wordcount`` (half Zipf-like: a few words are most of the text; half uniform:
new words keep arriving), ``uniform`` (every word uniform over `--keys`: many
keys, each rarely updated) or ``skewed`` (Zipf only: few hot keys, a long
tail). After `--minutes` it stops the job and reads every snapshot's manifest
back from the store.

`--options` runs one job per named set of RocksDB options
(`benchmarks.compaction_bench.CONFIGS`; ``built`` is the state's own,
``main`` RocksDB's defaults) side by side on the same input, each with its
own output topic and place in the store, so that their figures share the
machine's load. Per job:

* per checkpoint, the bytes it put (its own objects plus the shared tables no
  earlier checkpoint referenced) against the bytes its snapshots reference in
  all (the state's size as stored): median, 90th percentile and mean of the
  ratio after the first minute (the steady state);
* the synchronous pause (`SnapshotMeta.sync_ms`) in the first and the last
  quarter of the run: it must not grow with the state.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from kstream.infra.client_settings import client_config
from kstream.infra.object_store import ObjectStore
from kstream.runtime.checkpoint.objects import s3_client


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def draw(shape: str, keys: int, rng: random.Random, i: int) -> int:
    """The `i`-th word of a line of `shape` (see the module docstring)."""
    if shape == "uniform" or (shape == "wordcount" and i % 2 == 0):
        return rng.randrange(keys)
    if shape in ("wordcount", "skewed"):
        return min(int(rng.paretovariate(0.6)), keys)
    raise SystemExit(f"unknown shape {shape!r}")


def produce(
    bootstrap: str, topic: str, rate: int, keys: int, shape: str, stop: threading.Event
) -> int:
    """Write `rate` lines of ten words a second until `stop`; returns the words written."""
    rng = random.Random(7)
    producer = Producer(client_config(bootstrap, {"linger.ms": 20}))
    sent, started = 0, time.monotonic()
    while not stop.is_set():
        due = int((time.monotonic() - started) * rate)
        while sent < due:
            words = (f"w{draw(shape, keys, rng, i):07d}" for i in range(10))
            producer.produce(topic, " ".join(words).encode())
            sent += 10
            if sent % 10_000 == 0:
                producer.poll(0)
        time.sleep(0.01)  # pacing the producer, not synchronisation
    producer.flush(30)
    return sent


def manifests(client: object, bucket: str, prefix: str) -> dict[int, dict[str, dict[str, Any]]]:
    """Checkpoint -> task -> its manifest's files, for every snapshot in the store."""
    out: dict[int, dict[str, dict[str, Any]]] = defaultdict(dict)
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)  # type: ignore[attr-defined]
    for page in pages:
        for o in page.get("Contents", []):
            key = o["Key"]
            if not key.endswith("/manifest.json"):
                continue
            chk, task = key[len(prefix) :].split("/")[:2]
            body = client.get_object(Bucket=bucket, Key=key)["Body"].read()  # type: ignore[attr-defined]
            doc = json.loads(body)
            out[int(chk[4:])][task] = doc["files"]
            attempts[int(chk[4:]), task] = doc.get("attempt", "")
    return out


#: (checkpoint, task) -> the attempt whose objects the manifest names ("": none).
attempts: dict[tuple[int, str], str] = {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--rate", type=int, default=10_000, help="words a second")
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--interval", type=float, default=5.0, help="checkpoint interval, s")
    parser.add_argument("--shape", default="wordcount", choices=("wordcount", "uniform", "skewed"))
    parser.add_argument("--options", default="built", help="RocksDB option sets, one job each")
    args = parser.parse_args()
    bootstrap = os.environ.get("KSTREAM_BOOTSTRAP", "127.0.0.1:9092")
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores", flush=True)
    names = args.options.split(",")
    tag = f"inc{int(time.time())}"
    words = f"{tag}-words"
    counts = {name: f"{tag}-counts-{name}" for name in names}
    admin = AdminClient(client_config(bootstrap))
    topics = [NewTopic(t, 4, 1) for t in (words, *counts.values())]
    for f in admin.create_topics(topics).values():
        f.result(30)
    with tempfile.TemporaryDirectory(prefix="kstream-inc-bench-") as tmp:
        root = Path(tmp)
        proxy = ObjectStore(root / "s3", free_port())
        proxy.start()
        os.environ.update(proxy.env)
        try:
            client = s3_client()
            client.create_bucket(Bucket="bench")
            stop = threading.Event()
            result: list[int] = []
            writer = threading.Thread(
                target=lambda: result.append(
                    produce(bootstrap, words, args.rate, args.keys, args.shape, stop)
                )
            )
            writer.start()
            jobs = {
                name: start_job(root, name, bootstrap, words, counts[name], args) for name in names
            }
            deadline = time.monotonic() + args.minutes * 60
            while time.monotonic() < deadline and all(j.poll() is None for j in jobs.values()):
                time.sleep(min(30.0, max(0.0, deadline - time.monotonic())))
                left = max(0.0, deadline - time.monotonic())
                print(f"  running, {left / 60:.1f} min left", file=sys.stderr, flush=True)
            stop.set()
            writer.join()
            for name, job in jobs.items():
                if job.poll() is not None:
                    log = (root / f"{name}.log").read_text()[-2000:]
                    sys.exit(f"the job with options {name} stopped early:\n{log}")
            on_disk = {name: disk_bytes(root / "state" / name) for name in names}
            for job in jobs.values():
                job.send_signal(signal.SIGTERM)
            for job in jobs.values():
                job.wait(120)
            print(f"{result[0]:,} words in {args.minutes:g} min, shape {args.shape},"
                  f" {args.keys:,} keys")  # fmt: skip
            for name in names:
                print(f"\noptions {name}:")
                report(client, f"{name}/wordcount-{words}-{counts[name]}/", args)
                print(f"tables on local disk at the end: {on_disk[name] / 1e6:.1f} MB")
        finally:
            proxy.stop()
    print(f"load average {os.getloadavg()[0]:.2f}")


def start_job(
    root: Path, name: str, bootstrap: str, words: str, counts: str, args: argparse.Namespace
) -> subprocess.Popen[bytes]:
    """The word count with RocksDB options `name`, checkpointing to ``s3://bench/<name>``."""
    env = dict(os.environ)
    if name != "built":
        # benchmarks/state_options/sitecustomize.py swaps the options in every process.
        repo = Path(__file__).resolve().parent.parent
        path = [str(repo / "benchmarks" / "state_options"), str(repo)]
        env["PYTHONPATH"] = os.pathsep.join([*path, env.get("PYTHONPATH", "")])
        env["KSTREAM_BENCH_STATE_OPTIONS"] = name
    return subprocess.Popen(
        [sys.executable, "-m", "kstream", "run", "kstream.examples.wordcount:job",
         "-p", f"input={words}", "-p", f"output={counts}", "--workers", "2",
         "--bootstrap-servers", bootstrap, "--state-dir", str(root / "state" / name),
         "--checkpoint-storage", f"s3://bench/{name}", "--retained", "100000",
         "--checkpoint-interval", str(args.interval)],
        env=env, stdout=subprocess.DEVNULL, stderr=(root / f"{name}.log").open("w"),
    )  # fmt: skip


def disk_bytes(path: Path) -> int:
    """Bytes of the RocksDB tables under `path`, each inode once (checkpoints hard-link them)."""
    sizes = {(s.st_dev, s.st_ino): s.st_size for s in (f.stat() for f in path.rglob("*.sst"))}
    return sum(sizes.values())


def report(client: object, prefix: str, args: argparse.Namespace) -> None:
    snaps = manifests(client, "bench", prefix)
    seen: set[str] = set()
    small: dict[int, int] = {}  # checkpoint -> bytes put that are not tables
    kinds: dict[str, int] = {}  # "db", "sink", "meta", ... -> bytes put that are not tables
    tables: dict[int, int] = {}  # checkpoint -> table bytes put
    table_total: dict[int, int] = {}  # checkpoint -> table bytes referenced (the state)
    rows = []  # (checkpoint, put bytes, referenced bytes)
    for n in sorted(snaps):
        put = total = 0
        for files in snaps[n].values():
            for fname, entry in files.items():
                total += entry["size"]
                shared = entry.get("shared")
                if shared is None or shared not in seen:
                    put += entry["size"]
                    if shared is None:
                        small[n] = small.get(n, 0) + entry["size"]
                        kind = fname.split("/")[0].split("-")[0].split(".")[0]
                        kinds[kind] = kinds.get(kind, 0) + entry["size"]
                    else:
                        tables[n] = tables.get(n, 0) + entry["size"]
                if shared is not None:
                    table_total[n] = table_total.get(n, 0) + entry["size"]
                if shared is not None:
                    seen.add(shared)
        rows.append((n, put, total))
    if len(rows) < 4:
        sys.exit(f"only {len(rows)} checkpoints stored: nothing to measure")
    skip = min(max(1, int(60 / args.interval)), len(rows) // 2)
    steady = [put / total for _, put, total in rows[skip:] if total]
    state = max((r for r in rows if r[2]), key=lambda r: r[0])[2]  # the last non-empty
    print(f"{len(rows)} checkpoints; state as stored at the end {state / 1e6:.1f} MB")
    print(f"bytes put / bytes referenced per checkpoint after the first minute"
          f" (or half the run): median"
          f" {statistics.median(steady):.1%}, p90 {sorted(steady)[int(0.9 * len(steady))]:.1%},"
          f" mean {statistics.fmean(steady):.1%}")  # fmt: skip
    others = [small.get(n, 0) for n, _, _ in rows[skip:]]
    print(f"of which not tables (small files, meta, manifests): median"
          f" {statistics.median(others) / 1e3:.1f} kB per checkpoint; in all by kind:"
          f" {', '.join(f'{k} {v / 1e6:.1f} MB' for k, v in sorted(kinds.items()))}")  # fmt: skip
    state_only = [
        tables.get(n, 0) / table_total[n] for n, _, _ in rows[skip:] if table_total.get(n)
    ]
    print(f"the state alone (RocksDB tables put / tables referenced): median"
          f" {statistics.median(state_only):.1%}, p90"
          f" {sorted(state_only)[int(0.9 * len(state_only))]:.1%}, mean"
          f" {statistics.fmean(state_only):.1%}; tables referenced at the end"
          f" {table_total[max(table_total)] / 1e6:.1f} MB")  # fmt: skip
    print(f"without increments every checkpoint would put 100% ({state / 1e6:.1f} MB at the end)")
    quarter = max(1, len(rows) // 4)
    from kstream.runtime.checkpoint.storage import SnapshotMeta

    def pauses(ids: list[int]) -> list[float]:
        out = []
        for n in ids:
            for task in snaps[n]:
                attempt = attempts.get((n, task), "")
                key = f"{prefix}chk-{n}/{task}/{attempt + '/' if attempt else ''}meta.json"
                body = client.get_object(Bucket="bench", Key=key)["Body"].read()  # type: ignore[attr-defined]
                out.append(SnapshotMeta.from_json(body.decode()).sync_ms)
        return out

    first = pauses([n for n, _, _ in rows[:quarter]])
    last = pauses([n for n, _, _ in rows[-quarter:]])
    print(f"sync pause, first quarter: median {statistics.median(first):.2f} ms, max"
          f" {max(first):.1f} ms; last quarter: median {statistics.median(last):.2f} ms,"
          f" max {max(last):.1f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
