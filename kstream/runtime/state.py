"""Keyed state of one subtask, kept in RocksDB (rocksdict) with a write-back cache.

Values are pickled. Writes go to an in-memory dict first and reach RocksDB in
one `WriteBatch` per processed batch of records (`flush`), so the per-record
cost is a dict operation. The WAL is off: durability comes from snapshots, and
after a crash the local database is thrown away and restored from the latest
completed checkpoint.
"""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path
from typing import Any

from rocksdict import Checkpoint, Options, Rdict, WriteBatch, WriteOptions

__all__ = ["KeyedValueState", "StateStore", "key_bytes"]

_MISSING = object()
#: Cached entries kept after a flush; beyond this the read cache is dropped.
CACHE_LIMIT = 200_000


def key_bytes(key: Any) -> bytes:
    """A stable byte encoding of a key (also what channels hash to pick a partition).

    Python's `hash()` is salted per process, so it cannot route keys between workers.
    """
    if isinstance(key, str):
        return key.encode()
    if isinstance(key, bytes):
        return key
    if isinstance(key, int) and not isinstance(key, bool):
        return str(key).encode()
    return pickle.dumps(key, protocol=4)


class KeyedValueState:
    """One value per key for one operator; `key` is set by the runtime before each call."""

    __slots__ = ("_cache", "_db", "_dirty", "_prefix", "key")

    def __init__(self, db: Rdict, prefix: bytes) -> None:
        self._db = db
        self._prefix = prefix
        self._cache: dict[bytes, Any] = {}
        self._dirty: set[bytes] = set()
        self.key = b""

    def get(self, default: Any = None) -> Any:
        value = self._cache.get(self.key, _MISSING)
        if value is _MISSING:
            raw = self._db.get(self._prefix + self.key)
            value = _MISSING if raw is None else pickle.loads(raw)
            self._cache[self.key] = value
        return default if value is _MISSING else value

    def set(self, value: Any) -> None:
        self._cache[self.key] = value
        self._dirty.add(self.key)

    def clear(self) -> None:
        self._cache[self.key] = _MISSING
        self._dirty.add(self.key)

    def flush_into(self, batch: WriteBatch) -> int:
        """Move dirty entries into `batch`; return how many."""
        n = len(self._dirty)
        for k in self._dirty:
            value = self._cache[k]
            if value is _MISSING:
                batch.delete(self._prefix + k)
            else:
                batch.put(self._prefix + k, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
        self._dirty.clear()
        if len(self._cache) > CACHE_LIMIT:
            self._cache.clear()
        return n


class StateStore:
    """The RocksDB database of one subtask at `path`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        options = Options(raw_mode=True)
        options.create_if_missing(True)
        self._db = Rdict(str(path), options)
        write = WriteOptions()
        # rocksdict's stub declares a method; at run time it is a settable property.
        write.disable_wal = True  # type: ignore[method-assign,assignment]
        self._db.set_write_options(write)
        self._states: dict[str, KeyedValueState] = {}

    def value_state(self, name: str) -> KeyedValueState:
        """The keyed value state of operator `name` (created on first use)."""
        state = self._states.get(name)
        if state is None:
            state = KeyedValueState(self._db, name.encode() + b"\x00")
            self._states[name] = state
        return state

    def flush(self) -> int:
        """Write cached changes to RocksDB in one batch; return the number of keys written."""
        batch = WriteBatch(raw_mode=True)
        n = sum(s.flush_into(batch) for s in self._states.values())
        if n:
            self._db.write(batch)
        return n

    def checkpoint(self, target: Path) -> int:
        """Flush, then write a RocksDB checkpoint to `target` (must not exist); return its size.

        Cheap: memtables are flushed and SST files hard-linked, not copied.
        """
        self.flush()
        target.parent.mkdir(parents=True, exist_ok=True)
        Checkpoint(self._db).create_checkpoint(str(target))
        return sum(f.stat().st_size for f in target.rglob("*") if f.is_file())

    def close(self) -> None:
        self._db.close()

    @staticmethod
    def restore(snapshot: Path, path: Path) -> None:
        """Replace the database at `path` with a copy of `snapshot` (None-safe if absent)."""
        shutil.rmtree(path, ignore_errors=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(snapshot, path)

    @staticmethod
    def wipe(path: Path) -> None:
        shutil.rmtree(path, ignore_errors=True)
