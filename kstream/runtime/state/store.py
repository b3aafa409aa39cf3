"""Keyed state of one subtask, kept in RocksDB (rocksdict) with a write-back cache.

Values are encoded by the job's state serde (`kstream.dataflow.state.serde`).
Writes go to an in-memory cache first (`kstream.runtime.state.keyed`) and reach
RocksDB in one `WriteBatch` at each checkpoint, and between checkpoints once a
state has gathered `kstream.runtime.state.keyed.FLUSH_AT` changed keys
(`flush_due`), so the per-record cost of value state is a dict operation and a
key rewritten by many records is encoded once per write. The WAL is
off: durability comes from snapshots, and after a crash the local database is
thrown away and restored from the latest completed checkpoint.

**Checkpoints off the processing path** (`checkpoint_later`). A RocksDB
checkpoint flushes the memtable into a new SST file and syncs it, the
directory and the manifest; on a busy disk each sync can take hundreds of
milliseconds (measured: a 250 kB `fdatasync` p50 0.9 ms, max 195 ms while a
broker wrote next to it). So the snapshot's synchronous part only moves the
cached writes into the memtable (no disk I/O), and the checkpoint is created
on the snapshot executor. Until it exists the database must not change: flushes
are deferred (`flush` writes nothing while one is pending), so writes made
after the barrier stay in the write-back cache, where reads find them first.

**The memtable is flushed by RocksDB, not inside the checkpoint call.**
rocksdict holds the GIL for the whole of ``create_checkpoint``, so a checkpoint
that flushes the memtable itself stops every thread of the worker, the
processing thread included, for the flush and its syncs (measured in workers
at 10 M keys on a loaded machine: p50 36-41 ms, p99 282-361 ms). `_create` first asks RocksDB to
flush on its own background thread (``flush(wait=False)``) and waits for that
in `time.sleep` (without the GIL); the checkpoint then finds nothing to flush
and holds the GIL only to link the tables and copy the small manifest files.
The pre-flush only moves work: if it does not finish (a background error, or
a flush that takes longer than `MEMTABLE_FLUSH_WAIT_S`), ``create_checkpoint``
flushes as before, so what the checkpoint holds never depends on it.
"""

from __future__ import annotations

import pickle
import shutil
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocksdict import (
    AccessType,
    BlockBasedOptions,
    Checkpoint,
    Options,
    Rdict,
    WriteBatch,
    WriteOptions,
)

from kstream.dataflow.state.serde import MSGPACK, StateSerde
from kstream.errors import UnsupportedTypeError
from kstream.protocol.codec import Codec
from kstream.protocol.key_groups import group_prefixes
from kstream.runtime.state.keyed import Flushable, KeyedStateContext
from kstream.runtime.state.timers import OperatorTimers

__all__ = [
    "KEY_FORMAT",
    "LEGACY_KEY_FORMAT",
    "UNGROUPED_KEY_FORMAT",
    "RocksDBFigures",
    "StateStore",
    "key_bytes",
    "key_encoder",
]

#: Key formats, recorded in snapshots (`SnapshotMeta.key_format`): 1 wrote int
#: keys as decimal text (the same bytes as the str key) and pickled other keys;
#: 2 encodes keys with `key_bytes` and routes by ``crc32 % parallelism``; 3
#: (written by every job started fresh) encodes them the same way, routes by key
#: group (`kstream.protocol.key_groups`) and starts every state key with its
#: key group's two bytes (`kstream.runtime.state.keyed`), so it can be rescaled.
LEGACY_KEY_FORMAT, UNGROUPED_KEY_FORMAT, KEY_FORMAT = 1, 2, 3
#: How often `StateStore._flush_memtable` looks whether RocksDB's flush is done:
#: a look costs microseconds, and each one adds at most this to a checkpoint.
MEMTABLE_FLUSH_POLL_S = 0.002
#: Past this the checkpoint flushes what is left itself (holding the GIL), rather
#: than wait longer for a background flush that may be stuck behind an error.
MEMTABLE_FLUSH_WAIT_S = 30.0
#: RocksDB properties that are all zero once no memtable flush is pending or running.
_FLUSH_PROPERTIES = (
    "rocksdb.num-immutable-mem-table",
    "rocksdb.mem-table-flush-pending",
    "rocksdb.num-running-flushes",
)


@dataclass(frozen=True)
class RocksDBFigures:
    """What RocksDB says of one subtask's database (its own estimates, in bytes)."""

    #: Live data, an estimate (``rocksdb.estimate-live-data-size``).
    live_data_bytes: int
    #: The SST files on disk (``rocksdb.total-sst-files-size``).
    sst_bytes: int
    #: Memtables, active and immutable (``rocksdb.cur-size-all-mem-tables``).
    memtable_bytes: int
    #: Block cache in use (``rocksdb.block-cache-usage``).
    block_cache_bytes: int
    #: Index and filter blocks held by table readers (``rocksdb.estimate-table-readers-mem``).
    table_readers_bytes: int
    #: Keys, an estimate (``rocksdb.estimate-num-keys``).
    keys: int


#: Entries per `WriteBatch` when `copy_groups` copies a key-group range.
COPY_BATCH = 4096
#: First byte of every key that is not a str or bytes: 0xFF never occurs in UTF-8.
_TYPED = b"\xff"
_KEY_CODEC = Codec(canonical=True)


def key_bytes(key: Any) -> bytes:
    """A stable, canonical byte encoding of a key (also what channels hash to pick a partition).

    Python's `hash()` is salted per process, so it cannot route keys between
    workers. A str is its UTF-8 bytes and bytes are themselves (so a str key
    and the bytes of its UTF-8 are one key); any other key is 0xFF followed by
    its canonical `kstream.protocol.codec` encoding (sets sorted), so ``1`` and
    ``"1"`` differ. `UnsupportedTypeError` for a key of a type the codec does
    not carry.
    """
    if isinstance(key, str):
        return key.encode()
    if isinstance(key, bytes):
        return key
    if isinstance(key, int) and type(key) is not int and not isinstance(key, bool):
        key = int(key)  # an IntEnum member is the key of its value
    try:
        return _TYPED + _KEY_CODEC.dumps(key)
    except UnsupportedTypeError as exc:
        raise UnsupportedTypeError(
            type(key),
            f"a key of type {type(key).__qualname__} holds a {exc.type_name}: keys"
            " must be built of None, bool, int, float, str, bytes, tuples and frozensets",
        ) from None


def legacy_key_bytes(key: Any) -> bytes:
    """Key format 1, kept for jobs resumed from checkpoints taken with it (dumps only)."""
    if isinstance(key, str):
        return key.encode()
    if isinstance(key, bytes):
        return key
    if isinstance(key, int) and not isinstance(key, bool):
        return str(key).encode()
    return pickle.dumps(key, protocol=4)


def key_encoder(key_format: int) -> Callable[[Any], bytes]:
    """`key_bytes` of key format `key_format` (`KEY_FORMAT` or `LEGACY_KEY_FORMAT`).

    Every format encodes a str as its UTF-8 bytes, and the per-record paths
    (a keyed operator's call, a channel's routing) rely on it: they encode a
    str key inline and call the encoder only for other keys.
    """
    return legacy_key_bytes if key_format == LEGACY_KEY_FORMAT else key_bytes


#: L0 tables RocksDB gathers before compacting them into L1 (its default is 4).
#: Every checkpoint flushes the memtable into one L0 table, and a state of up to
#: a few hundred MB lives in L1 whole (word-count keys span the key space), so
#: each L0 compaction rewrites the whole state and an object store gets it all
#: again. The trigger sets how often: one checkpoint in 4 by default, one in 16
#: here. Measured (`benchmarks/compaction_bench.py`, table bytes put per
#: checkpoint / bytes referenced, mean): word-count shape 29.6 % -> 10.3 %,
#: uniform keys 31.2 % -> 12.2 %, Zipf keys 42.5 % -> 19.9 %; 8 gave 16.6-28.9 %,
#: 24 little more than 16 for twice the tables. In a 10-minute word count into
#: S3Proxy, beside one with the defaults: 29.7 % -> 11.1 % (p90 100 % -> 8 %);
#: with the sink's write-ahead copies, 44.6 % -> 25.1 % of all bytes
#: (docs/benchmarks/results/2026-11-27-increments.md). The price: up to 16 more tables
#: for a read that misses the cache (bloom filters make that one table read) and
#: up to 16 flushes' worth of older versions on disk (space 1.2-1.4x -> 1.4-2x).
L0_COMPACTION_TRIGGER = 16
#: RocksDB slows writes at this many L0 tables and stops them at the next; both
#: must stay above the trigger (RocksDB's 20 and 36 would leave 16 little room).
L0_SLOWDOWN_TRIGGER = 28
L0_STOP_TRIGGER = 40
#: Bits per key of the tables' bloom filters: a point read of an absent key (a
#: new key, the commonest miss of keyed state) then skips nearly every table.
BLOOM_BITS_PER_KEY = 10


def state_options() -> Options:
    """The RocksDB options of a subtask's state database (raw keys and values)."""
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    options.set_level_zero_file_num_compaction_trigger(L0_COMPACTION_TRIGGER)
    options.set_level_zero_slowdown_writes_trigger(L0_SLOWDOWN_TRIGGER)
    options.set_level_zero_stop_writes_trigger(L0_STOP_TRIGGER)
    table = BlockBasedOptions()
    table.set_bloom_filter(BLOOM_BITS_PER_KEY, False)
    options.set_block_based_table_factory(table)
    return options


class StateStore:
    """The RocksDB database of one subtask at `path`, its values encoded by `serde`.

    `max_parallelism`: the job's key groups in key format 3 (keys start with
    their group: the chain sets ``ctx.key`` to ``<g><key>``); 0 for formats 1
    and 2.
    """

    def __init__(self, path: Path, serde: StateSerde = MSGPACK, max_parallelism: int = 0) -> None:
        self.path = path
        self.serde = serde
        self.max_parallelism = max_parallelism
        path.parent.mkdir(parents=True, exist_ok=True)
        # Naming the default column family's options makes them apply to an existing
        # database too: without it rocksdict reopens one with the options in its
        # OPTIONS file, which a restore copies from the checkpoint, so a state
        # restored from an older version would keep that version's options forever.
        self._db = Rdict(str(path), state_options(), column_families={"default": state_options()})
        write = WriteOptions()
        # rocksdict's stub declares a method; at run time it is a settable property.
        write.disable_wal = True  # type: ignore[method-assign,assignment]
        self._db.set_write_options(write)
        self._contexts: dict[str, KeyedStateContext] = {}
        self._states: list[Flushable] = []
        #: The checkpoint being created on an executor: the database is frozen until done.
        self._pending: Future[int] | None = None

    def context(self, name: str) -> KeyedStateContext:
        """The keyed state of operator `name` (``s<stage>.<operator>``), created on first use.

        It is the operator's default value state and makes its named states,
        which this store flushes with the rest.
        """
        ctx = self._contexts.get(name)
        if ctx is None:
            ctx = KeyedStateContext(
                self._db,
                name,
                self.serde,
                self._states.append,
                grouped=self.max_parallelism > 0,
            )
            self._contexts[name] = ctx
            self._states.append(ctx)
        return ctx

    def timers(self, name: str) -> OperatorTimers:
        """The timers of operator `name`, loaded from the database; flushed with the state."""
        groups = group_prefixes(self.max_parallelism) if self.max_parallelism else ()
        timers = OperatorTimers(self._db, name, self.serde, groups)
        self._states.append(timers)
        return timers

    def value_state(self, name: str) -> KeyedStateContext:
        """Operator `name`'s default value state: its `context`."""
        return self.context(name)

    def flush_due(self) -> int:
        """`flush`, if a state holds enough changes or too large a cache (`Flushable.due`);
        else nothing (0). Called after every processed batch of records.

        Between checkpoints a hot key's changes then stay in the cache and reach
        RocksDB once (a checkpoint `flush`es everything). Reads never depend on
        it: they find the cache first.
        """
        if any(s.due() for s in self._states):
            return self.flush()
        return 0

    def flush(self) -> int:
        """Write cached changes to RocksDB in one batch; return the number of keys written.

        While a checkpoint is being created (`checkpoint_later`) nothing is
        written: the changes stay cached, and the first flush after it writes them.
        """
        if self._pending is not None:
            if not self._pending.done():
                return 0
            self._pending = None
        batch = WriteBatch(raw_mode=True)
        n = sum(s.flush_into(batch) for s in self._states)
        if n:
            self._db.write(batch)
        return n

    def checkpoint(self, target: Path) -> int:
        """Flush, then write a RocksDB checkpoint to `target` (must not exist); return its size.

        Cheap in bytes (memtables are flushed and SST files hard-linked, not
        copied) but not in time: the flush and the links are synced to disk.
        """
        self.settle()
        self.flush()
        return self._create(target)

    def checkpoint_later(self, target: Path, executor: Executor) -> Future[int]:
        """Checkpoint the state as it is now into `target`, on `executor`.

        Returns at once, after moving the cached changes into the memtable; the
        future gives the checkpoint's size in bytes. Until it is done `flush`
        defers every change, so the checkpoint holds exactly the state of this
        call. A previous checkpoint still being created is waited for first.
        """
        self.settle()
        self.flush()
        self._pending = executor.submit(self._create, target)
        return self._pending

    def settle(self) -> None:
        """Wait until no checkpoint is being created (its failure is its future's to report)."""
        if self._pending is not None:
            self._pending.exception()
            self._pending = None

    def _create(self, target: Path) -> int:
        target.parent.mkdir(parents=True, exist_ok=True)
        self._flush_memtable()
        Checkpoint(self._db).create_checkpoint(str(target))
        return sum(f.stat().st_size for f in target.rglob("*") if f.is_file())

    def _flush_memtable(self) -> None:
        """Flush the memtable on RocksDB's background thread, and wait until it is done.

        Waits in `time.sleep`, so other threads run meanwhile (see the module
        docstring). Returns early if a background error appeared or the flush
        was not done after `MEMTABLE_FLUSH_WAIT_S`: the checkpoint then flushes
        what is left itself. The database must not be written meanwhile (the
        caller defers writes).
        """
        errors = self._db.property_int_value("rocksdb.background-errors") or 0
        self._db.flush(wait=False)  # schedules the flush and returns
        deadline = time.monotonic() + MEMTABLE_FLUSH_WAIT_S
        while any(self._db.property_int_value(p) for p in _FLUSH_PROPERTIES):
            if (self._db.property_int_value("rocksdb.background-errors") or 0) > errors:
                return
            if time.monotonic() >= deadline:
                return
            time.sleep(MEMTABLE_FLUSH_POLL_S)

    def figures(self) -> RocksDBFigures:
        """RocksDB's own figures for the database. Callable from any thread (RocksDB
        reads its properties under its own locks), but not after `close`."""

        def prop(name: str) -> int:
            return self._db.property_int_value(name) or 0

        return RocksDBFigures(
            live_data_bytes=prop("rocksdb.estimate-live-data-size"),
            sst_bytes=prop("rocksdb.total-sst-files-size"),
            memtable_bytes=prop("rocksdb.cur-size-all-mem-tables"),
            block_cache_bytes=prop("rocksdb.block-cache-usage"),
            table_readers_bytes=prop("rocksdb.estimate-table-readers-mem"),
            keys=prop("rocksdb.estimate-num-keys"),
        )

    def close(self) -> None:
        self.settle()
        self._db.close()

    def copy_groups(self, source: Path, groups: range) -> int:
        """Copy every entry of key groups `groups` from the database at `source`
        (key format 3, opened read-only) into this one; return how many.

        A range of key groups is one contiguous run of keys (they start with
        their group's two bytes), so this is one seek and a scan; the entries go
        in `WriteBatch`es of `COPY_BATCH`. Used by a restore at another
        parallelism (`kstream.runtime.checkpoint.restore`).
        """
        if not groups:
            return 0
        options = Options(raw_mode=True)
        src = Rdict(str(source), options, access_type=AccessType.read_only())
        try:
            end = groups.stop.to_bytes(2, "big") if groups.stop < 1 << 16 else None
            it = src.iter()
            it.seek(groups.start.to_bytes(2, "big"))
            n = 0
            batch = WriteBatch(raw_mode=True)
            while it.valid():
                key = it.key()
                if end is not None and key >= end:
                    break
                batch.put(key, it.value())
                n += 1
                if n % COPY_BATCH == 0:
                    self._db.write(batch)
                    batch = WriteBatch(raw_mode=True)
                it.next()
            if n % COPY_BATCH:
                self._db.write(batch)
            del it
            return n
        finally:
            src.close()

    @staticmethod
    def restore(snapshot: Path, path: Path) -> None:
        """Replace the database at `path` with a copy of `snapshot` (None-safe if absent)."""
        shutil.rmtree(path, ignore_errors=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(snapshot, path)

    @staticmethod
    def wipe(path: Path) -> None:
        shutil.rmtree(path, ignore_errors=True)
