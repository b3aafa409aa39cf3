"""Checkpoints in an object store (S3Proxy on this machine): throughput and increments.

    python benchmarks/object_store_bench.py [--mb 64] [--checkpoints 10] [--lines 30000]

Starts S3Proxy (`kstream.infra.object_store`) on a free port and prints:

* upload throughput: `ObjectCheckpointStorage.store()` of a RocksDB checkpoint of
  `--mb` MB of incompressible values, nothing reused (every table hashed and put,
  `TRANSFER_THREADS` at a time);
* restore throughput: `fetch_db()` of it into an empty directory, every file's
  SHA-256 checked;
* bytes put per checkpoint over a word-count-like state (counts of 200 k words,
  a batch of updates and a flush between checkpoints) with increments (tables
  of the last completed checkpoint referenced) and without (`forget()` each time);
* with `--lines` > 0, the word count demo (3 workers) run with
  ``--checkpoint-storage s3://...``: the synchronous pause (`SnapshotMeta.sync_ms`)
  of the snapshots left in the store, and the run's words/s.

The store runs on the same machine, so throughput is bounded by S3Proxy's CPU
and the local disk, not by a network: a lower bound on what S3 itself would take.
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import statistics
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rocksdict import Checkpoint, Options, Rdict

from kstream.infra.object_store import ObjectStore
from kstream.runtime.checkpoint.objects import ObjectCheckpointStorage, s3_client
from kstream.runtime.checkpoint.storage import SnapshotMeta
from kstream.runtime.checkpoint.url import parse_storage_url


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def open_db(path: Path) -> Rdict:
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    return Rdict(str(path), opts)


def stage(db: Rdict, root: Path, n: int) -> Path:
    target = root / f"staged-{n}"
    Checkpoint(db).create_checkpoint(str(target))
    return target


def throughput(store: ObjectCheckpointStorage, root: Path, mb: int) -> None:
    db = open_db(root / "big")
    rng = random.Random(1)
    value = 4096
    for i in range(mb * (1 << 20) // value):
        db[f"k{i:09d}".encode()] = rng.randbytes(value)
    db.flush()
    staged = stage(db, root, 0)
    size = sum(f.stat().st_size for f in staged.iterdir())
    started = time.perf_counter()
    store.store(SnapshotMeta(1, 1, "s1-0", has_state=True), staged)
    up = time.perf_counter() - started
    db.close()
    reader = ObjectCheckpointStorage(store_url, "bench", s3_client())
    started = time.perf_counter()
    reader.fetch_db(1, "s1-0", root / "restored")
    down = time.perf_counter() - started
    print(f"state {size / 1e6:.1f} MB in {len(list(staged.parent.glob('restored/*')))} files")
    print(f"upload   {size / 1e6 / up:7.1f} MB/s  ({up:.2f} s, store(), nothing reused)")
    print(f"restore  {size / 1e6 / down:7.1f} MB/s  ({down:.2f} s, fetch_db(), sha256 checked)")


def increments(store: ObjectCheckpointStorage, root: Path, checkpoints: int) -> None:
    words = [f"word-{i:06d}".encode() for i in range(200_000)]
    rng = random.Random(2)
    for incremental in (True, False):
        db = open_db(root / f"wc-{incremental}")
        counts: dict[bytes, int] = {}
        put: list[int] = []
        for n in range(1, checkpoints + 1):
            # A batch of input: 50 k words, Zipf-like (a few words are most of the text).
            for _ in range(50_000):
                w = words[min(int(rng.paretovariate(1.2)) - 1, len(words) - 1)]
                counts[w] = counts.get(w, 0) + 1
                db[w] = counts[w].to_bytes(8, "big")
            if n == 1:
                for w in words:  # the first checkpoint holds every word
                    db[w] = counts.get(w, 0).to_bytes(8, "big")
            db.flush()
            task = f"wc-{incremental}"
            store.store(
                SnapshotMeta(100 + n, 1, task, has_state=True),
                stage(db, root, n * 10 + incremental),
            )
            put.append(store.last_put_bytes)
            if incremental:
                store.note_complete(100 + n)
            else:
                store.forget()
        db.close()
        label = "with increments   " if incremental else "without increments"
        later = put[1:] or put
        print(
            f"bytes put per checkpoint {label}: first {put[0] / 1e6:.2f} MB, then median"
            f" {statistics.median(later) / 1e6:.3f} MB (max {max(later) / 1e6:.3f} MB)"
        )


def wordcount(url: str, lines: int) -> None:
    from kstream.runtime.checkpoint.objects import ObjectCheckpointStorage as Storage
    from kstream.tools.demo import wordcount_demo

    said: list[str] = []
    outcome = wordcount_demo(
        lines=lines, workers=3, kills=0, bootstrap=os.environ.get("KSTREAM_BOOTSTRAP"),
        checkpoint_interval=1.0, say=said.append, console=Console(quiet=True),
        checkpoint_storage=url,
    )  # fmt: skip
    parsed = parse_storage_url(url)
    job = f"wordcount-{outcome.input_topic.removesuffix('-words')}"
    storage = Storage(parsed, job, s3_client())
    pages = storage.client.get_paginator("list_objects_v2").paginate(
        Bucket=parsed.bucket, Prefix=storage.base
    )
    snapshots = [
        o["Key"][len(storage.base) :].split("/")[:2]
        for page in pages
        for o in page.get("Contents", [])
        if o["Key"].endswith("/manifest.json")
    ]
    sync = [storage.load(int(chk[4:]), task).sync_ms for chk, task in snapshots]
    print(
        f"word count, 3 workers, {outcome.words:,} words: {outcome.words / outcome.seconds:,.0f}"
        f" words/s, {outcome.checkpoints} checkpoints; sync pause per snapshot: median"
        f" {statistics.median(sync):.1f} ms, max {max(sync):.1f} ms ({len(sync)} snapshots)"
        if sync
        else f"word count: no snapshot left to read sync_ms from ({said[-3:]})"
    )


store_url = parse_storage_url("s3://bench/o")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=64)
    parser.add_argument("--checkpoints", type=int, default=10)
    parser.add_argument("--lines", type=int, default=30_000)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory(prefix="kstream-s3-bench-") as tmp:
        root = Path(tmp)
        proxy = ObjectStore(root / "s3" / "data", free_port())
        proxy.start()
        os.environ.update(proxy.env)
        try:
            client = s3_client()
            client.create_bucket(Bucket="bench")
            store = ObjectCheckpointStorage(store_url, "bench", client)
            throughput(store, root, args.mb)
            increments(store, root, args.checkpoints)
            if args.lines:
                wordcount("s3://bench/wc", args.lines)
        finally:
            proxy.stop()
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
