"""Cost of storing a snapshot's RocksDB state: hard links vs copies, with and without checksums.

    python benchmarks/checkpoint_store_bench.py [--keys 10000 1000000] [--rounds 5]

For each state size, fills a real `StateStore` (word-count-like keys, pickled
int values), then times `LocalCheckpointStorage.store()` of a fresh RocksDB
checkpoint of it in four variants: files hard-linked (what kstream did before
manifests) or copied (what it does now), each with sizes only or with SHA-256
checksums in the manifest. Also times `validate()` (what the runner does before
a restore). `store()` runs on the upload thread, off the processing path, but
its duration bounds how often checkpoints can complete. Prints the median of
`--rounds` runs per variant, in milliseconds, and the state's size on disk.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from kstream.runtime.checkpoint.storage import LocalCheckpointStorage, SnapshotMeta
from kstream.runtime.state.store import StateStore

VARIANTS = (
    ("link, sizes only", True, False),
    ("link + sha256", True, True),
    ("copy, sizes only", False, False),
    ("copy + sha256 (default)", False, True),
)


def fill(store: StateStore, keys: int) -> None:
    state = store.value_state("s1.count")
    for i in range(keys):
        state.key = f"word-{i:08d}".encode()
        state.set(i % 1000 + 1)
        if i % 100_000 == 99_999:
            store.flush()
    store.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, nargs="+", default=[10_000, 1_000_000])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kstream-ckpt-bench-") as tmp:
        root = Path(tmp)
        for keys in args.keys:
            store = StateStore(root / f"live-{keys}" / "db")
            fill(store, keys)
            print(f"state of {keys:,} keys")
            validate_ms: list[float] = []
            for label, link, checksums in VARIANTS:
                storage = LocalCheckpointStorage(
                    root / f"chk-{keys}-{link}-{checksums}", link_files=link, checksums=checksums
                )
                times = []
                size = 0
                for n in range(1, args.rounds + 1):
                    staged = root / f"staged-{keys}-{n}"
                    size = store.checkpoint(staged)
                    t0 = time.perf_counter()
                    storage.store(SnapshotMeta(n, 1, "s1-0", has_state=True), staged)
                    times.append((time.perf_counter() - t0) * 1000)
                    if checksums and not link:
                        t0 = time.perf_counter()
                        assert storage.validate(n, ["s1-0"]) == []
                        validate_ms.append((time.perf_counter() - t0) * 1000)
                    if n > 1:
                        storage.discard(n - 1)
                print(
                    f"  store() {label:<24} median {statistics.median(times):9.1f} ms"
                    f"   (state {size / 1e6:.1f} MB)"
                )
            print(
                f"  validate() with sha256        median {statistics.median(validate_ms):9.1f} ms"
            )
            store.close()


if __name__ == "__main__":
    main()
