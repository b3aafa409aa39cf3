"""What key groups cost per record, and how long a restore at another parallelism takes.

    python -m benchmarks.key_groups_bench [--words 300000] [--rounds 5] [--keys 100000,1000000]
                                          [--new 3] [--s3] [--savepoint]

* **routing**: CPU time per record of `ChannelWriter.send` on a hash edge to 4
  channels, key format 2 (``crc32 % D``) against key format 3 (the owner of
  ``crc32 % K``, K = 128), channel records handed to memory, not produced;
* **state**: CPU time per word of the word count's keyed call (`count`, value
  state behind the write-back cache, flushed to RocksDB every 500 words), with
  an ungrouped store (formats 1, 2) against a grouped one (format 3);
* **restore**: wall-clock time for each of 3 new subtasks to restore, from 2
  old snapshots holding `--keys` keys in all, the key groups they own (fetch,
  open read-only, copy), against the whole-database fetch of an unchanged
  parallelism.

Rounds alternate the variants so that a change in the machine's load lands on
both; the median round is printed.

With `--savepoint`, instead: a whole job rescaled from 2 workers to `--new`
from a savepoint, phase by phase, for each of `--keys`
(`benchmarks/rescale_bench.py`).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kstream.connectors.kafka import KafkaSink, KafkaSource
from kstream.dataflow.job import Job
from kstream.dataflow.state.serde import MSGPACK
from kstream.examples.wordcount import count
from kstream.protocol.key_groups import group_of, owner
from kstream.runtime.channels.writer import ChannelWriter
from kstream.runtime.checkpoint.finish import finish
from kstream.runtime.checkpoint.objects import ObjectCheckpointStorage, s3_client
from kstream.runtime.checkpoint.restore import restore
from kstream.runtime.checkpoint.storage import CheckpointStorage, LocalCheckpointStorage
from kstream.runtime.checkpoint.take import Subject, take_snapshot
from kstream.runtime.checkpoint.url import parse_storage_url
from kstream.runtime.state.store import KEY_FORMAT, StateStore
from kstream.runtime.worker.chain import compile_chain

K = 128


def _words(n: int) -> list[str]:
    rnd = random.Random(1)
    vocabulary = [f"w{i}" for i in range(50_000)]
    return [rnd.choice(vocabulary) for _ in range(n)]


def routing(words: list[str], k: int) -> float:
    """CPU ns per record of a hash edge's `send` (with its flushes)."""
    writer = ChannelWriter(
        None, "t", 0, 4, 1, lambda w: w, max_parallelism=k, out=lambda p, v: None
    )
    t0 = time.process_time()
    for i in range(0, len(words), 500):
        for w in words[i : i + 500]:
            writer.send(w)
        writer.flush()
    return (time.process_time() - t0) * 1e9 / len(words)


def state(words: list[str], k: int, tmp: Path) -> float:
    """CPU ns per word of the word count's keyed call on a store with `k` key groups."""
    job = Job("bench", max_parallelism=K)
    job.source(KafkaSource("in")).key_by(lambda w: w).process(count).sink(KafkaSink("out"))
    store = StateStore(tmp / f"db-{k}-{time.monotonic_ns()}", MSGPACK, k)
    push = compile_chain(
        job.stages[1].root,
        stage_index=1,
        state=store,
        open_sink=lambda node: lambda v: None,
        open_edge=lambda node: lambda v: None,
    )
    t0 = time.process_time()
    for i in range(0, len(words), 500):
        for w in words[i : i + 500]:
            push(w, w)
        store.flush()
    ns = (time.process_time() - t0) * 1e9 / len(words)
    store.close()
    return ns


class _Faults:
    def hit(self, point: str, checkpoint: int) -> None:
        pass


def _snapshots(storage: CheckpointStorage, keys: int, old: int, tmp: Path) -> None:
    """Checkpoint 1 of stage 1 at parallelism `old`, `keys` keys in all, in key format 3."""
    stores = [StateStore(tmp / f"old-{j}", MSGPACK, K) for j in range(old)]
    for j, store in enumerate(stores):
        ctx = store.context("s1.count")
        for n in range(j, keys * old, old):
            kb = f"key-{n}".encode()
            if owner(group_of(kb, K), K, old) != j:
                continue
            ctx.key = group_of(kb, K).to_bytes(2, "big") + kb
            ctx.set(n)
        store.flush()
    with ThreadPoolExecutor(1) as executor:
        for j, store in enumerate(stores):
            subject = Subject(
                task=f"s1-{j}",
                generation=1,
                identity="",
                state=store,
                state_serde=MSGPACK.name,
                key_format=KEY_FORMAT,
                max_parallelism=K,
                parallelism=old,
                staging=tmp / "staging",
                executor=executor,
                sinks={},
                writers=[],
                faults=_Faults(),
                watermarks=dict,
            )
            taken = take_snapshot(dataclasses.replace(subject), 1)
            finish(storage, executor, taken).future.result(timeout=600)
            store.close()


def restore_times(
    keys: int, tmp: Path, storage: CheckpointStorage | None = None, new: int = 3
) -> tuple[float, float, int]:
    """Seconds for the slowest of `new` new subtasks to restore from 2 old ones, for
    the slowest of 2 to restore unchanged, and the keys stored (in `storage`; a
    local directory if None)."""
    storage = storage or LocalCheckpointStorage(tmp / "checkpoints")
    _snapshots(storage, keys, 2, tmp)

    def run(new: int) -> float:
        worst = 0.0
        for i in range(new):
            t0 = time.perf_counter()
            r = restore(
                storage,
                1,
                f"s1-{i}",
                state_db=tmp / f"new-{new}-{i}-{time.monotonic_ns()}" / "db",
                state_serde=MSGPACK,
                max_parallelism=K,
                layout=(1, i, (1, new)),
            )
            worst = max(worst, time.perf_counter() - t0)
            assert r.state is not None
            r.state.close()
        return worst

    return run(new), run(2), keys


def _median(f: Callable[[], float], rounds: int) -> float:
    return statistics.median(f() for _ in range(rounds))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--words", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--keys", default="100000,1000000")
    parser.add_argument("--new", type=int, default=3, help="parallelism restored at")
    parser.add_argument(
        "--s3", action="store_true", help="restore from S3Proxy (started here), not a directory"
    )
    parser.add_argument(
        "--savepoint",
        action="store_true",
        help="a whole job rescaled from a savepoint, phase by phase (rescale_bench.py)",
    )
    args = parser.parse_args(argv)
    if args.savepoint:
        from benchmarks import rescale_bench

        for keys in args.keys.split(","):
            rescale_bench.main(["--keys", keys, "--new", str(args.new), *(["--s3"] * args.s3)])
        return
    words = _words(args.words)
    results: dict[str, list[float]] = {"route2": [], "route3": [], "state2": [], "state3": []}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for _ in range(args.rounds):
            results["route2"].append(routing(words, 0))
            results["route3"].append(routing(words, K))
            results["state2"].append(state(words, 0, tmp))
            results["state3"].append(state(words, K, tmp))
    med: dict[str, Any] = {k: statistics.median(v) for k, v in results.items()}
    print(
        f"routing ns/record: format 2 {med['route2']:.0f}, format 3 {med['route3']:.0f}, "
        f"ratio {med['route3'] / med['route2']:.3f}"
    )
    print(
        f"state   ns/word:   format 2 {med['state2']:.0f}, format 3 {med['state3']:.0f}, "
        f"ratio {med['state3'] / med['state2']:.3f}"
    )
    where = "S3Proxy" if args.s3 else "a local directory"
    for keys in (int(k) for k in args.keys.split(",")):
        with tempfile.TemporaryDirectory() as d, _storage(args.s3, Path(d)) as storage:
            rescaled, unchanged, n = restore_times(keys, Path(d), storage, args.new)
        print(
            f"restore of {n:,} keys from {where}: 2 -> {args.new} subtasks {rescaled:.2f} s"
            f" (slowest subtask), unchanged 2 {unchanged:.2f} s"
        )


@contextlib.contextmanager
def _storage(s3: bool, tmp: Path) -> Iterator[CheckpointStorage | None]:
    """An object-store storage on a S3Proxy started for it, or None (a directory)."""
    if not s3:
        yield None
        return
    from benchmarks.rescale_bench import s3proxy

    with s3proxy(tmp, "kg") as url:
        yield ObjectCheckpointStorage(parse_storage_url(url), "bench", s3_client())


if __name__ == "__main__":
    main()
