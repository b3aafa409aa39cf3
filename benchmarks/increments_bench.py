"""Incremental checkpoints over a long word count: bytes put per checkpoint, and the pause.

    python benchmarks/increments_bench.py [--minutes 10] [--rate 10000] [--keys 1000000]

Starts S3Proxy (`kstream.infra.object_store`) on a free port and runs the word
count example (``kstream run kstream.examples.wordcount:job``, 2 workers,
checkpoints every `--interval` seconds into ``s3://``, every checkpoint
retained) against the broker at ``KSTREAM_BOOTSTRAP`` while a producer writes
`--rate` words a second drawn from `--keys` distinct words (Zipf-like: a few
words are most of the text, and new words keep arriving). After `--minutes` it
stops the job and reads every snapshot's manifest back from the store:

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

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kstream.infra.client_settings import client_config
from kstream.infra.object_store import ObjectStore
from kstream.runtime.checkpoint.objects import s3_client


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def produce(bootstrap: str, topic: str, rate: int, keys: int, stop: threading.Event) -> int:
    """Write `rate` lines of ten words a second until `stop`; returns the words written."""
    rng = random.Random(7)
    producer = Producer(client_config(bootstrap, {"linger.ms": 20}))
    sent, started = 0, time.monotonic()
    while not stop.is_set():
        due = int((time.monotonic() - started) * rate)
        while sent < due:
            # Half the words hot (Zipf-like), half uniform over all keys: the state
            # grows towards `keys` words while a few are updated all the time.
            words = (
                f"w{min(int(rng.paretovariate(0.6)), keys) if i % 2 else rng.randrange(keys):07d}"
                for i in range(10)
            )
            producer.produce(topic, " ".join(words).encode())
            sent += 10
            if sent % 10_000 == 0:
                producer.poll(0)
        time.sleep(0.01)  # pacing the producer, not synchronisation
    producer.flush(30)
    return sent


def manifests(client: object, bucket: str, prefix: str) -> dict[int, dict[str, dict]]:
    """Checkpoint -> task -> its manifest's files, for every snapshot in the store."""
    out: dict[int, dict[str, dict]] = defaultdict(dict)
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
    args = parser.parse_args()
    bootstrap = os.environ.get("KSTREAM_BOOTSTRAP", "127.0.0.1:9092")
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores", flush=True)
    tag = f"inc{int(time.time())}"
    words, counts = f"{tag}-words", f"{tag}-counts"
    admin = AdminClient(client_config(bootstrap))
    for f in admin.create_topics([NewTopic(t, 4, 1) for t in (words, counts)]).values():
        f.result(30)
    with tempfile.TemporaryDirectory(prefix="kstream-inc-bench-") as tmp:
        root = Path(tmp)
        proxy = ObjectStore(root / "s3", free_port())
        proxy.start()
        env = {**os.environ, **proxy.env}
        os.environ.update(proxy.env)
        try:
            client = s3_client()
            client.create_bucket(Bucket="bench")
            stop = threading.Event()
            result: list[int] = []
            writer = threading.Thread(
                target=lambda: result.append(produce(bootstrap, words, args.rate, args.keys, stop))
            )
            writer.start()
            log = (root / "run.log").open("w")
            job = subprocess.Popen(
                [sys.executable, "-m", "kstream", "run", "kstream.examples.wordcount:job",
                 "-p", f"input={words}", "-p", f"output={counts}", "--workers", "2",
                 "--bootstrap-servers", bootstrap, "--state-dir", str(root / "state"),
                 "--checkpoint-storage", "s3://bench/wc", "--retained", "100000",
                 "--checkpoint-interval", str(args.interval)],
                env=env, stdout=subprocess.DEVNULL, stderr=log,
            )  # fmt: skip
            deadline = time.monotonic() + args.minutes * 60
            while time.monotonic() < deadline and job.poll() is None:
                time.sleep(min(30.0, max(0.0, deadline - time.monotonic())))
                left = max(0.0, deadline - time.monotonic())
                print(f"  running, {left / 60:.1f} min left", file=sys.stderr, flush=True)
            stop.set()
            writer.join()
            if job.poll() is not None:
                sys.exit(f"the job stopped early:\n{(root / 'run.log').read_text()[-2000:]}")
            job.send_signal(signal.SIGTERM)
            job.wait(120)
            report(client, f"wc/wordcount-{words}-{counts}/", args, result[0])
        finally:
            proxy.stop()
    print(f"load average {os.getloadavg()[0]:.2f}")


def report(client: object, prefix: str, args: argparse.Namespace, sent: int) -> None:
    snaps = manifests(client, "bench", prefix)
    seen: set[str] = set()
    rows = []  # (checkpoint, put bytes, referenced bytes)
    for n in sorted(snaps):
        put = total = 0
        for files in snaps[n].values():
            for entry in files.values():
                total += entry["size"]
                shared = entry.get("shared")
                if shared is None or shared not in seen:
                    put += entry["size"]
                if shared is not None:
                    seen.add(shared)
        rows.append((n, put, total))
    if len(rows) < 4:
        sys.exit(f"only {len(rows)} checkpoints stored: nothing to measure")
    skip = min(max(1, int(60 / args.interval)), len(rows) // 2)
    steady = [put / total for _, put, total in rows[skip:] if total]
    state = rows[-1][2]
    print(f"{sent:,} words in {args.minutes:g} min; {len(rows)} checkpoints; state as stored"
          f" at the end {state / 1e6:.1f} MB")  # fmt: skip
    print(f"bytes put / bytes referenced per checkpoint after the first minute"
          f" (or half the run): median"
          f" {statistics.median(steady):.1%}, p90 {sorted(steady)[int(0.9 * len(steady))]:.1%},"
          f" mean {statistics.fmean(steady):.1%}")  # fmt: skip
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
