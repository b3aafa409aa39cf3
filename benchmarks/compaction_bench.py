"""RocksDB options for incremental checkpoints: bytes new per checkpoint, offline.

    python benchmarks/compaction_bench.py [--configs main,built] [--shapes wordcount,uniform]
        [--checkpoints 120] [--updates 25000] [--keys 500000]

Plays one keyed subtask's state the way a job writes it, without Kafka or a
job: per checkpoint interval `--updates` counter updates of words drawn by
`--shapes` (below) go through a write-back cache into RocksDB in batches of
1000, then a checkpoint is taken as `StateStore._create` takes it (memtable
flushed on RocksDB's thread, then ``create_checkpoint``), and the benchmark
waits until RocksDB's compactions are done (a real job has seconds between
checkpoints for them). Every configuration (`CONFIGS`) plays the same words.

Per configuration and shape it prints, after the first sixth of the
checkpoints (the state's growth):

* **put %**: the bytes a checkpoint puts to an object store (tables no
  earlier checkpoint held, which `ObjectCheckpointStorage` uploads, plus the
  database's small files) against all the bytes it references: median, mean
  and 90th percentile. The target of issue 23 is at most 20 %;
* **space**: the checkpoint's bytes at the end against the same state
  compacted into one sorted run (``compact_range``): space amplification;
* **cpu µs/upd**: process CPU time (RocksDB's background threads included)
  per update, writes, flushes, checkpoints and compactions together;
* **restore**: opening the last checkpoint as a fresh database (the work of a
  restore once its files are local) and 20 000 point reads of keys drawn
  like the writes, half of them absent (a new key), in µs per read; and the
  tables a read may have to consult (L0 files + non-empty levels).

Configurations run in rounds, one shape at a time, so that a change in the
machine's load lands on all of them alike; the byte figures do not depend on
load (compactions are waited for), the CPU figures do somewhat.

Shapes (one subtask's share of the key space; keys carry a key-group prefix):

* ``wordcount``: what `increments_bench` writes (half the words Zipf-hot,
  half uniform over `--keys`);
* ``uniform``: every update a uniform draw over `--keys` (many keys, each
  rarely updated: the worst case for compaction);
* ``skewed``: Zipf over `--keys` only (few hot keys, a long tail);
* ``few``: uniform over `--keys` // 100 keys (a small state rewritten often).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import msgpack
from rocksdict import (
    BlockBasedOptions,
    Checkpoint,
    DBCompactionStyle,
    Options,
    Rdict,
    UniversalCompactOptions,
    WriteBatch,
    WriteOptions,
)

from kstream.runtime.state.store import state_options


def _base() -> Options:
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    return options


def _bloom(options: Options) -> Options:
    table = BlockBasedOptions()
    table.set_bloom_filter(10, False)
    options.set_block_based_table_factory(table)
    return options


def main_options() -> Options:
    """Before: RocksDB's defaults."""
    return _base()


def l0(trigger: int) -> Callable[[], Options]:
    def build() -> Options:
        options = _bloom(_base())
        options.set_level_zero_file_num_compaction_trigger(trigger)
        options.set_level_zero_slowdown_writes_trigger(max(20, trigger + 12))
        options.set_level_zero_stop_writes_trigger(max(36, trigger + 24))
        return options

    return build


def universal(amp: int, ratio: int = 1, width: int = 2) -> Callable[[], Options]:
    def build() -> Options:
        options = _bloom(_base())
        options.set_compaction_style(DBCompactionStyle.universal())
        uni = UniversalCompactOptions()
        uni.max_size_amplification_percent = amp
        uni.size_ratio = ratio
        uni.min_merge_width = width
        options.set_universal_compaction_options(uni)
        options.set_level_zero_file_num_compaction_trigger(4)
        options.set_level_zero_slowdown_writes_trigger(20)
        options.set_level_zero_stop_writes_trigger(36)
        return options

    return build


def small_base(base_mb: int, multiplier: float, trigger: int = 4) -> Callable[[], Options]:
    """Levels sized from the top: recent data in a small L1, the big level rewritten rarely."""

    def build() -> Options:
        options = _bloom(_base())
        options.set_level_compaction_dynamic_level_bytes(False)
        options.set_max_bytes_for_level_base(base_mb << 20)
        options.set_max_bytes_for_level_multiplier(multiplier)
        options.set_target_file_size_base(max(1, base_mb // 4) << 20)
        options.set_level_zero_file_num_compaction_trigger(trigger)
        return options

    return build


CONFIGS: dict[str, Callable[[], Options]] = {
    "main": main_options,
    "built": state_options,
    "l0-8": l0(8),
    "l0-16": l0(16),
    "l0-24": l0(24),
    "uni-200": universal(200),
    "uni-100": universal(100),
    "uni-50": universal(50),
    "uni-200-w4": universal(200, 1, 4),
    "base4x4": small_base(4, 4),
    "base8x10": small_base(8, 10),
    "base4x4-t8": small_base(4, 4, 8),
}


def words(shape: str, keys: int, rng: random.Random) -> Iterator[int]:
    while True:
        if shape == "wordcount":
            yield min(int(rng.paretovariate(0.6)), keys)
            yield rng.randrange(keys)
        elif shape == "uniform":
            yield rng.randrange(keys)
        elif shape == "skewed":
            yield min(int(rng.paretovariate(0.6)), keys)
        elif shape == "few":
            yield rng.randrange(max(1, keys // 100))
        else:
            raise SystemExit(f"unknown shape {shape!r}")


def key_of(word: int) -> bytes:
    # <key group (2 bytes)><state name>\0<key>, as key format 3 lays keys out.
    text = f"w{word:07d}".encode()
    group = zlib.crc32(text) % 128
    return group.to_bytes(2, "big") + b"s1.count\x00" + text


class Run:
    """One configuration's database, checkpoints and tallies."""

    def __init__(self, name: str, root: Path) -> None:
        self.name = name
        self.root = root / name
        self.db = Rdict(str(self.root / "db"), CONFIGS[name]())
        write = WriteOptions()
        write.disable_wal = True  # type: ignore[method-assign,assignment]
        self.db.set_write_options(write)
        self.counts: dict[bytes, int] = {}
        self.seen: set[str] = set()
        self.ratios: list[float] = []
        self.cpu = 0.0
        self.updates = 0
        self.last: Path | None = None

    def interval(self, batch_words: list[list[int]], n: int) -> None:
        started = time.process_time()
        for chunk in batch_words:
            batch = WriteBatch(raw_mode=True)
            changed: dict[bytes, int] = {}
            for w in chunk:
                k = key_of(w)
                v = changed.get(k)
                if v is None:
                    v = self.counts.get(k)
                    if v is None:
                        raw = self.db.get(k)
                        v = msgpack.unpackb(raw) if raw is not None else 0
                changed[k] = v + 1
            for k, v in changed.items():
                self.counts[k] = v
                batch.put(k, msgpack.packb(v))
            self.db.write(batch)
            self.updates += len(chunk)
        self.db.flush(wait=True)
        target = self.root / f"chk-{n}"
        Checkpoint(self.db).create_checkpoint(str(target))
        self.wait_compactions()
        self.cpu += time.process_time() - started
        put = total = 0
        for f in target.iterdir():
            size = f.stat().st_size
            total += size
            if f.suffix == ".sst":
                if f.name not in self.seen:
                    put += size
                    self.seen.add(f.name)
            else:
                put += size
        self.ratios.append(put / total)
        if self.last is not None:
            shutil.rmtree(self.last)
        self.last = target
        # The write-back cache holds only what the last batches touched in a job.
        if len(self.counts) > 50_000:
            self.counts.clear()

    def wait_compactions(self) -> None:
        # "compaction-pending" can stay set when the picker finds nothing it may
        # merge (universal with a min merge width): past 0.3 s with nothing
        # running it counts as done.
        idle_since: float | None = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.db.property_int_value("rocksdb.num-running-compactions"):
                idle_since = None
            elif not self.db.property_int_value("rocksdb.compaction-pending"):
                return
            elif idle_since is None:
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since > 0.3:
                return
            time.sleep(0.005)
        raise SystemExit(f"{self.name}: compactions not done after 120 s")

    def finish(self, shape: str, keys: int, skip: int) -> str:
        assert self.last is not None
        steady = self.ratios[skip:]
        size = sum(f.stat().st_size for f in self.last.iterdir())
        # Restore: open the checkpoint as a database, read keys drawn like the writes.
        rng = random.Random(11)
        draw = words(shape, keys, rng)
        probe = [key_of(next(draw)) if i % 2 else key_of(keys + i) for i in range(20_000)]
        opened = time.perf_counter()
        restored = Rdict(str(self.last), CONFIGS[self.name]())
        open_ms = (time.perf_counter() - opened) * 1000
        t0 = time.perf_counter()
        for k in probe:
            restored.get(k)
        read_us = (time.perf_counter() - t0) / len(probe) * 1e6
        l0_files = restored.property_int_value("rocksdb.num-files-at-level0") or 0
        levels = sum(
            1
            for lvl in range(1, 7)
            if (restored.property_int_value(f"rocksdb.num-files-at-level{lvl}") or 0) > 0
        )
        restored.close()
        self.db.compact_range(None, None)
        self.wait_compactions()
        compact = self.root / "compact"
        Checkpoint(self.db).create_checkpoint(str(compact))
        floor = sum(f.stat().st_size for f in compact.iterdir() if f.suffix == ".sst")
        self.db.close()
        p90 = sorted(steady)[int(0.9 * len(steady))]
        return (
            f"{self.name:<12} {statistics.median(steady):6.1%} {statistics.fmean(steady):6.1%}"
            f" {p90:6.1%} {max(steady):6.1%}  {size / 1e6:6.1f} MB {size / floor:5.2f}x"
            f"  {self.cpu / self.updates * 1e6:6.2f}  {open_ms:6.1f} ms {read_us:5.1f} µs"
            f"  L0 {l0_files:2d} +{levels}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--shapes", default="wordcount,uniform,skewed")
    parser.add_argument("--checkpoints", type=int, default=120)
    parser.add_argument("--updates", type=int, default=25_000, help="per checkpoint")
    parser.add_argument("--keys", type=int, default=500_000)
    args = parser.parse_args()
    names = args.configs.split(",")
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores", flush=True)
    for shape in args.shapes.split(","):
        with tempfile.TemporaryDirectory(prefix="kstream-compaction-bench-") as tmp:
            runs = [Run(n, Path(tmp)) for n in names]
            draw = words(shape, args.keys, random.Random(7))
            for n in range(args.checkpoints):
                chunks = [[next(draw) for _ in range(1000)] for _ in range(args.updates // 1000)]
                for i in range(len(runs)):
                    # rotate who goes first: load changes land on all alike
                    runs[(i + n) % len(runs)].interval(chunks, n)
            print(
                f"\n{shape}: {args.keys:,} keys, {args.updates:,} updates per checkpoint,"
                f" {args.checkpoints} checkpoints (load {os.getloadavg()[0]:.2f})"
            )
            print(
                f"{'config':<12} {'put %: median':>13} {'mean':>6} {'p90':>6} {'max':>6}"
                f"  {'size':>9} {'space':>5}  {'cpu µs/upd':>10}  restore: open, read"
            )
            skip = args.checkpoints // 6
            for run in runs:
                print(run.finish(shape, args.keys, skip), flush=True)
    print(f"\nload average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
