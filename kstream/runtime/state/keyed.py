"""Keyed state of one operator in RocksDB: the default value, and named value, map, list,
reducing and aggregating states (`kstream.dataflow.state.api` states their contracts).

RocksDB keys (``<op>`` is ``s<stage>.<operator>``; ``<len>`` four big-endian bytes;
``<g>`` the key's key group, two big-endian bytes, in key format 3 only)::

    <g><op>\\0<key>                           the operator's default value
    <g><op>.<name>\\0<key>                    a named value, reducing or aggregating state
    <g><op>.<name>\\0<len><key><entry>         one entry of a named map or list

The key group comes first so that a range of key groups is one contiguous
scan (`kstream.protocol.key_groups`: a restore at another parallelism copies
ranges). In key format 3 the runtime sets ``ctx.key`` to the key's bytes
*after* its group's two bytes (``<g><key>``, computed once per record), and a
state places its prefix between them; formats 1 and 2 have no group
(``ctx.key`` is the key's bytes).

Map and list entries carry the key's length because key bytes may contain NUL:
without it, one key's entries could be read as another's. A map entry is the
state serde's encoding of its key; a list has its length under the empty entry
and element i under i as eight big-endian bytes, so a prefix scan yields the
elements in order.

Writes go to a write-back cache; `flush_into` encodes them into the batch's
`WriteBatch` (a key written many times in a batch is encoded once), so the
per-record cost of value state stays a dict operation. A value the serde
cannot encode fails that flush with `StateValueError`. Map entry keys are
encoded when used (they are looked up by their encoding); the encodings of
entries whose equality fixes their encoding (str, bytes, and pairs of ints:
a window's ``(start, end)``) are remembered, so a map read and written for
every record, as a window's, pays no serde call for its entry. Reads merge
RocksDB with the cache: cached entries (written, removed, or a whole key's
map cleared) win.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol, TypeVar

from rocksdict import Rdict, WriteBatch

from kstream.dataflow.state.api import (
    AggregatingState,
    ListState,
    MapState,
    ReducingState,
    ValueState,
)
from kstream.dataflow.state.serde import StateSerde
from kstream.errors import ConfigurationError, StateValueError
from kstream.runtime.state.element import TIMERS_STATE, ElementContext

__all__ = ["CACHE_LIMIT", "FLUSH_AT", "Flushable", "KeyedStateContext", "KeyedValueState"]

_MISSING: Any = object()
_S = TypeVar("_S")
#: Cached entries kept after a flush; beyond this the read cache is dropped.
CACHE_LIMIT = 200_000
#: Changed keys (entries of maps and lists) a state gathers before it asks to be
#: written to RocksDB between checkpoints (`StateStore.flush_due`). Until then a
#: key rewritten by many records is encoded and written once. The bound keeps the
#: write at a checkpoint's synchronous part short: about 3 ms of puts here
#: (4,096 keys took 6-8 ms).
FLUSH_AT = 2048
#: Entry of a list that holds its length (sorts before every element).
_LIST_LENGTH = b""
#: Remembered map entry encodings kept; beyond this they are forgotten (they
#: are few in practice: a window map has one per live window, shared by all keys).
ENTRY_MEMO_LIMIT = 10_000


class Flushable(Protocol):
    """A state that buffers writes until the store's flush."""

    def flush_into(self, batch: WriteBatch) -> int:
        """Move buffered writes into `batch`; return how many keys they touch."""

    def due(self) -> bool:
        """Whether it holds enough to write now: `FLUSH_AT` changed keys, or a
        cache past `CACHE_LIMIT` (only a flush drops it)."""


class _HasKey(Protocol):
    key: bytes


class KeyedValueState:
    """One value per key; the key is read from `ctx` (itself for an operator's default state)."""

    __slots__ = (
        "_cache",
        "_ctx",
        "_db",
        "_dirty",
        "_dumps",
        "_grouped",
        "_loads",
        "_prefix",
        "key",
    )

    def __init__(
        self,
        db: Rdict,
        prefix: bytes,
        serde: StateSerde,
        ctx: _HasKey | None = None,
        *,
        grouped: bool = False,
    ) -> None:
        self._db = db
        self._prefix = prefix
        #: Key format 3: keys are ``<g><key>`` and the prefix goes between.
        self._grouped = grouped
        self._dumps = serde.dumps
        self._loads = serde.loads
        self._cache: dict[bytes, Any] = {}
        #: Keys written since the last flush (their values are in `_cache`).
        self._dirty: set[bytes] = set()
        self._ctx: _HasKey = self if ctx is None else ctx
        self.key = b""

    def get(self, default: Any = None) -> Any:
        k = self._ctx.key
        value = self._cache.get(k, _MISSING)
        if value is _MISSING and k not in self._cache:
            raw = self._db.get(k[:2] + self._prefix + k[2:] if self._grouped else self._prefix + k)
            value = _MISSING if raw is None else self._loads(raw)
            self._cache[k] = value
        return default if value is _MISSING else value

    def set(self, value: Any) -> None:
        k = self._ctx.key
        self._cache[k] = value
        self._dirty.add(k)

    def clear(self) -> None:
        k = self._ctx.key
        self._cache[k] = _MISSING
        self._dirty.add(k)

    def due(self) -> bool:
        return len(self._dirty) >= FLUSH_AT or len(self._cache) > CACHE_LIMIT

    def flush_into(self, batch: WriteBatch) -> int:
        n = len(self._dirty)
        prefix, cache, dumps, grouped = self._prefix, self._cache, self._dumps, self._grouped
        for k in self._dirty:
            value = cache[k]
            where = k[:2] + prefix + k[2:] if grouped else prefix + k
            if value is _MISSING:
                batch.delete(where)
            else:
                batch.put(where, _encode(dumps, value, prefix, k[2:] if grouped else k))
        self._dirty.clear()
        if len(self._cache) > CACHE_LIMIT:
            self._cache.clear()
        return n


class _KeyEntries:
    """The cached entries of one key of a map or list."""

    __slots__ = ("cleared", "dirty", "values")

    def __init__(self, cleared: bool) -> None:
        #: RocksDB's entries of this key are gone (deleted at the next flush).
        self.cleared = cleared
        #: Entry -> decoded value, or _MISSING if known absent.
        self.values: dict[bytes, Any] = {}
        #: Entries written since the last flush (their values, or _MISSING, in `values`).
        self.dirty: set[bytes] = set()


class _Entries:
    """Entries of every key of one named map or list, with their write-back cache."""

    def __init__(
        self, db: Rdict, prefix: bytes, serde: StateSerde, ctx: _HasKey, *, grouped: bool = False
    ) -> None:
        self._db = db
        self._prefix = prefix
        self._grouped = grouped
        self.dumps = serde.dumps
        self.loads = serde.loads
        self.ctx = ctx
        self._keys: dict[bytes, _KeyEntries] = {}
        #: The keys with entries written or removed, or cleared, since the last
        #: flush: a flush visits these, not every cached key.
        self._changed: dict[bytes, _KeyEntries] = {}
        self._cached = 0

    def _key_prefix(self, k: bytes) -> bytes:
        if self._grouped:
            return k[:2] + self._prefix + (len(k) - 2).to_bytes(4, "big") + k[2:]
        return self._prefix + len(k).to_bytes(4, "big") + k

    def _entries(self, k: bytes) -> _KeyEntries:
        ke = self._keys.get(k)
        if ke is None:
            ke = self._keys[k] = _KeyEntries(cleared=False)
        return ke

    def read(self, entry: bytes) -> Any:
        """The decoded value of `entry` of the current key, or _MISSING."""
        k = self.ctx.key
        ke = self._entries(k)
        value = ke.values.get(entry, _MISSING)
        if value is _MISSING and entry not in ke.values and not ke.cleared:
            raw = self._db.get(self._key_prefix(k) + entry)
            value = _MISSING if raw is None else self.loads(raw)
            ke.values[entry] = value
            self._cached += 1
        return value

    def write(self, entry: bytes, value: Any) -> None:
        ke = self._entries(self.ctx.key)
        values = ke.values
        # Count entries, not writes: a hot entry rewritten per record must not
        # drop the whole read cache at every flush past the limit.
        if entry not in values:
            self._cached += 1
        values[entry] = value
        ke.dirty.add(entry)
        self._changed[self.ctx.key] = ke

    def delete(self, entry: bytes) -> None:
        k = self.ctx.key
        ke = self._entries(k)
        ke.values[entry] = _MISSING
        ke.dirty.add(entry)
        self._changed[k] = ke

    def clear(self) -> None:
        k = self.ctx.key
        self._keys[k] = self._changed[k] = _KeyEntries(cleared=True)

    def due(self) -> bool:
        return len(self._changed) >= FLUSH_AT or self._cached > CACHE_LIMIT

    def scan(self) -> list[tuple[bytes, Any]]:
        """Every (entry, decoded value) of the current key, ordered by entry bytes."""
        k = self.ctx.key
        ke = self._keys.get(k)
        found: dict[bytes, Any] = {}
        if ke is None or not ke.cleared:
            start = self._key_prefix(k)
            it = self._db.iter()
            it.seek(start)
            while it.valid():
                key = it.key()
                if not key.startswith(start):
                    break
                found[key[len(start) :]] = it.value()
                it.next()
            found = {e: self.loads(raw) for e, raw in found.items()}
        if ke is not None:
            found.update(ke.values)
        return sorted((e, v) for e, v in found.items() if v is not _MISSING)

    def flush_into(self, batch: WriteBatch) -> int:
        n = 0
        for k, ke in self._changed.items():
            start = self._key_prefix(k)
            if ke.cleared:
                batch.delete_range(start, _after(start))
                ke.cleared = False
                n += 1
            for entry in ke.dirty:
                value = ke.values[entry]
                if value is _MISSING:
                    batch.delete(start + entry)
                else:
                    shown = k[2:] if self._grouped else k
                    batch.put(start + entry, _encode(self.dumps, value, self._prefix, shown))
            n += len(ke.dirty)
            ke.dirty.clear()
        self._changed.clear()
        if self._cached > CACHE_LIMIT:
            self._keys.clear()
            self._cached = 0
        return n


def _encode(dumps: Callable[[Any], bytes], value: Any, prefix: bytes, key: bytes) -> bytes:
    try:
        return dumps(value)
    except (TypeError, ValueError, OverflowError) as exc:
        state = prefix.rstrip(b"\x00").decode(errors="replace")
        raise StateValueError(
            f"state {state} of key {key!r} holds a {type(value).__name__} value its state serde "
            f"cannot store ({exc}): store another value or choose another Job(state_serde=...)"
        ) from exc


def _after(prefix: bytes) -> bytes:
    """The smallest byte string greater than every string starting with `prefix`."""
    stripped = prefix.rstrip(b"\xff")
    return stripped[:-1] + bytes([stripped[-1] + 1])


def _memoizable(entry: Any) -> bool:
    """Whether every entry equal to `entry` has its encoding (so it may key a memo).

    Equal values of different types encode differently (``1``, ``1.0``,
    ``True``; ``(1, 2)`` and ``(1.0, 2)``), so only exact types qualify.
    """
    t = type(entry)
    if t is str or t is bytes:
        return True
    return t is tuple and len(entry) == 2 and type(entry[0]) is int and type(entry[1]) is int


class _MapState:
    __slots__ = ("_e", "_memo")

    def __init__(self, entries: _Entries) -> None:
        self._e = entries
        #: Entry -> its encoding, for `_memoizable` entries.
        self._memo: dict[Any, bytes] = {}

    def _encoded(self, entry: Any) -> bytes:
        if not _memoizable(entry):
            return self._e.dumps(entry)
        encoded = self._memo.get(entry)
        if encoded is None:
            encoded = self._e.dumps(entry)
            if len(self._memo) >= ENTRY_MEMO_LIMIT:
                self._memo.clear()
            self._memo[entry] = encoded
        return encoded

    def get(self, entry: Any, default: Any = None) -> Any:
        value = self._e.read(self._encoded(entry))
        return default if value is _MISSING else value

    def put(self, entry: Any, value: Any) -> None:
        self._e.write(self._encoded(entry), value)

    def remove(self, entry: Any) -> None:
        self._e.delete(self._encoded(entry))

    def contains(self, entry: Any) -> bool:
        return self._e.read(self._encoded(entry)) is not _MISSING

    def items(self) -> Iterator[tuple[Any, Any]]:
        loads = self._e.loads
        return ((loads(e), v) for e, v in self._e.scan())

    def keys(self) -> Iterator[Any]:
        loads = self._e.loads
        return (loads(e) for e, _ in self._e.scan())

    def values(self) -> Iterator[Any]:
        return (v for _, v in self._e.scan())

    def clear(self) -> None:
        self._e.clear()


class _ListState:
    __slots__ = ("_e",)

    def __init__(self, entries: _Entries) -> None:
        self._e = entries

    def __len__(self) -> int:
        n = self._e.read(_LIST_LENGTH)
        return 0 if n is _MISSING else int(n)

    def append(self, value: Any) -> None:
        n = len(self)
        self._e.write(n.to_bytes(8, "big"), value)
        self._e.write(_LIST_LENGTH, n + 1)

    def extend(self, values: Iterable[Any]) -> None:
        for v in values:
            self.append(v)

    def __iter__(self) -> Iterator[Any]:
        return iter([v for e, v in self._e.scan() if e != _LIST_LENGTH])

    def clear(self) -> None:
        self._e.clear()


class _ReducingState:
    __slots__ = ("_fn", "_slot")

    def __init__(self, slot: KeyedValueState, fn: Callable[[Any, Any], Any]) -> None:
        self._slot = slot
        self._fn = fn

    def add(self, value: Any) -> None:
        current = self._slot.get(_MISSING)
        self._slot.set(value if current is _MISSING else self._fn(current, value))

    def get(self, default: Any = None) -> Any:
        return self._slot.get(default)

    def clear(self) -> None:
        self._slot.clear()


class _AggregatingState:
    __slots__ = ("_add", "_initial", "_slot")

    def __init__(self, slot: KeyedValueState, add: Callable[[Any, Any], Any], initial: Any) -> None:
        self._slot = slot
        self._add = add
        self._initial = initial

    def add(self, value: Any) -> None:
        # A copy: an `add` that mutates its accumulator must change neither
        # `initial` nor an accumulator `get` returned (and the job emitted) before.
        self._slot.set(self._add(copy.deepcopy(self._slot.get(self._initial)), value))

    def get(self) -> Any:
        return self._slot.get(self._initial)

    def clear(self) -> None:
        self._slot.clear()


class KeyedStateContext(KeyedValueState):
    """What a keyed function gets as ``ctx``: its default value state and its named states.

    The runtime sets `key` (the key's bytes, `kstream.runtime.state.store.key_bytes`,
    after its key group's two bytes when `grouped`: key format 3) and
    `key_object` (the key itself, for timers) before each call; every named
    state reads it from here. The event-time members read the subtask's
    `ElementContext`; `timers` is set by the chain (`kstream.runtime.worker.chain`).
    """

    __slots__ = ("_element", "_named", "_op", "_register", "_serde", "key_object", "timers")

    def __init__(
        self,
        db: Rdict,
        op: str,
        serde: StateSerde,
        register: Callable[[Flushable], None],
        *,
        grouped: bool = False,
    ) -> None:
        super().__init__(db, op.encode() + b"\x00", serde, grouped=grouped)
        self._op = op
        self._serde = serde
        self._register = register
        self._named: dict[str, tuple[str, Any]] = {}
        self._element = ElementContext(timed=False)
        self.key_object: Any = None
        self.timers: Any = None

    def attach(self, element: ElementContext, timers: Any) -> None:
        """Read event time from `element`; `timers` is what ``ctx.timers`` gives."""
        self._element = element
        self.timers = timers

    @property
    def timestamp(self) -> int | None:
        return self._element.timestamp if self._element.timed else None

    @property
    def partition_watermark(self) -> int:
        return self._element.stamp

    @property
    def watermark(self) -> int:
        return self._element.watermark

    def now(self) -> int:
        return self._element.clock()

    def _state(self, name: str, kind: str, build: Callable[[bytes], _S]) -> _S:
        found = self._named.get(name)
        if found is not None:
            if found[0] != kind:
                raise ConfigurationError(
                    f"state {name!r} of {self._op} is a {found[0]} state, not a {kind} state"
                )
            made: _S = found[1]
            return made
        if not name or "\x00" in name:
            raise ConfigurationError(f"state name {name!r} must be non-empty, without NUL")
        if name == TIMERS_STATE:
            raise ConfigurationError(
                f"state name {name!r} is reserved for the operator's timers: choose another"
            )
        state = build(f"{self._op}.{name}".encode() + b"\x00")
        self._named[name] = (kind, state)
        return state

    def _slot(self, prefix: bytes) -> KeyedValueState:
        slot = KeyedValueState(self._db, prefix, self._serde, self, grouped=self._grouped)
        self._register(slot)
        return slot

    def _entries(self, prefix: bytes) -> _Entries:
        entries = _Entries(self._db, prefix, self._serde, self, grouped=self._grouped)
        self._register(entries)
        return entries

    # Each builder's result is checked against its protocol by the return type.
    def value(self, name: str) -> ValueState:
        return self._state(name, "value", self._slot)

    def map(self, name: str) -> MapState:
        return self._state(name, "map", lambda p: _MapState(self._entries(p)))

    def list(self, name: str) -> ListState:
        return self._state(name, "list", lambda p: _ListState(self._entries(p)))

    def reducing(self, name: str, fn: Callable[[Any, Any], Any]) -> ReducingState:
        return self._state(name, "reducing", lambda p: _ReducingState(self._slot(p), fn))

    def aggregating(
        self, name: str, add: Callable[[Any, Any], Any], initial: Any
    ) -> AggregatingState:
        return self._state(
            name, "aggregating", lambda p: _AggregatingState(self._slot(p), add, initial)
        )
