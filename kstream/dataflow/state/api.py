"""What a keyed function sees of its key's state: the protocols a job author writes against.

A keyed `process` function is called as ``fn(key, value, ctx)``. ``ctx`` is a
`KeyedContext`: it *is* the function's default `ValueState` (so
``ctx.get()``/``ctx.set(v)`` keep working) and gives named state of the
current key. Every state is scoped to the key of the record being processed:
``ctx.map("seen")`` is a different map for every key.

Contracts every kind shares:

* changes are kept with the next checkpoint and rolled back with it, so after
  a recovery the replayed records see exactly the state they saw before;
* a value handed to the state (``set``, ``put``, ``append``, ``add``) is
  kept as the object and encoded by the job's state serde when the batch of
  records is flushed, so the per-record cost is a dict operation; a value the
  serde cannot encode fails that flush, and the subtask
  (`kstream.errors.StateValueError`). Do not mutate a value after handing it
  over: whether the change is stored would depend on when flushes happen;
  hand over a new one;
* iteration (``items``, ``keys``, ``values``, iterating a list) follows a
  fixed order (map entries by their encoded key, list entries in append
  order), never the order of processing or of flushes, so a replay yields the
  same outputs.

Event time (a stage whose source has timestamps): ``ctx.timestamp`` is the
current record's timestamp (or the firing timer's), ``ctx.partition_watermark``
its partition's watermark before it (for `kstream.protocol.watermarks.lateness`),
``ctx.watermark`` the subtask's input watermark, ``ctx.now()`` processing time,
and ``ctx.timers`` registers timers of the current key (`Timers`).

The RocksDB-backed implementation is `kstream.runtime.state.keyed`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol

__all__ = [
    "AggregatingState",
    "KeyedContext",
    "ListState",
    "MapState",
    "ReducingState",
    "Timers",
    "ValueState",
]


class ValueState(Protocol):
    """One value of the current key."""

    def get(self, default: Any = None) -> Any:
        """The key's value, or `default` if it has none."""

    def set(self, value: Any) -> None:
        """Replace the key's value (persisted with the next snapshot)."""

    def clear(self) -> None:
        """Remove the key's value."""


class MapState(Protocol):
    """A map of the current key; each entry is stored apart, so a big map is never read whole.

    Entry keys must be encodable by the state serde and hashable once decoded.
    """

    def get(self, entry: Any, default: Any = None) -> Any:
        """The value under `entry`, or `default`."""

    def put(self, entry: Any, value: Any) -> None:
        """Set the value under `entry`."""

    def remove(self, entry: Any) -> None:
        """Remove `entry` (nothing if absent)."""

    def contains(self, entry: Any) -> bool:
        """Whether `entry` has a value."""

    def items(self) -> Iterator[tuple[Any, Any]]:
        """Every (entry, value), ordered by the entry's encoded bytes (reads the whole map)."""

    def keys(self) -> Iterator[Any]:
        """Every entry, in the order of `items`."""

    def values(self) -> Iterator[Any]:
        """Every value, in the order of `items`."""

    def clear(self) -> None:
        """Remove every entry of the current key."""


class ListState(Protocol):
    """A list of the current key; each element is stored apart, so `append` reads nothing."""

    def append(self, value: Any) -> None:
        """Add `value` at the end."""

    def extend(self, values: Any) -> None:
        """Append every value of the iterable `values`, in order."""

    def __iter__(self) -> Iterator[Any]:
        """The elements in append order."""

    def __len__(self) -> int:
        """The number of elements."""

    def clear(self) -> None:
        """Remove every element."""


class ReducingState(Protocol):
    """One value of the current key, folded with ``fn(accumulated, value)`` on each `add`.

    ``fn`` must return a new value rather than mutate its arguments.
    """

    def add(self, value: Any) -> None:
        """The first value is kept as is; later ones are reduced into it."""

    def get(self, default: Any = None) -> Any:
        """The reduced value, or `default` before the first `add`."""

    def clear(self) -> None:
        """Forget the reduced value."""


class AggregatingState(Protocol):
    """An accumulator of the current key: ``add(accumulator, value)`` from ``initial``."""

    def add(self, value: Any) -> None:
        """Store ``add(copy of the accumulator, value)``; ``add`` may mutate its copy."""

    def get(self) -> Any:
        """The accumulator (``initial`` before the first `add`); do not mutate it."""

    def clear(self) -> None:
        """Reset the accumulator to ``initial``."""


class Timers(Protocol):
    """The timers of the current key (``ctx.timers``); a timer is (key, timestamp), so
    registering one twice is registering it once.

    An event-time timer at ``t`` fires once the subtask's watermark reaches
    ``t``; a processing-time one once the wall clock (``ctx.now()``) does (not
    reproducible after a rollback). Firing calls the operator's
    ``on_timer(key, t, ctx)`` with ``ctx.timestamp == t``; its outputs have
    timestamp and partition stamp ``t``. Timers are kept with the key's state in
    checkpoints. Registering needs an ``on_timer``, and an event-time timer a
    stream with timestamps: otherwise `ConfigurationError`.
    """

    def register(self, timestamp: int) -> None:
        """An event-time timer of the current key at `timestamp` (ms)."""

    def delete(self, timestamp: int) -> None:
        """Remove the current key's event-time timer at `timestamp`, if any."""

    def register_processing(self, timestamp: int) -> None:
        """A processing-time timer of the current key at wall-clock `timestamp` (ms)."""

    def delete_processing(self, timestamp: int) -> None:
        """Remove the current key's processing-time timer at `timestamp`, if any."""


class KeyedContext(ValueState, Protocol):
    """The third argument of a keyed function: its default `ValueState` and named states.

    A name is any non-empty string without NUL; a name is bound to one kind of
    state per operator (asking for ``ctx.map("x")`` and ``ctx.list("x")`` in one
    operator is a `ConfigurationError`). `reducing` and `aggregating` take their
    functions on every call, so the first call's functions are the ones used.
    """

    def value(self, name: str) -> ValueState:
        """Named single-value state of the current key."""

    def map(self, name: str) -> MapState:
        """Named map state of the current key."""

    def list(self, name: str) -> ListState:
        """Named list state of the current key."""

    def reducing(self, name: str, fn: Callable[[Any, Any], Any]) -> ReducingState:
        """Named reducing state of the current key."""

    def aggregating(
        self, name: str, add: Callable[[Any, Any], Any], initial: Any
    ) -> AggregatingState:
        """Named aggregating state of the current key."""

    @property
    def timestamp(self) -> int | None:
        """Event time (ms) of the record being processed or the timer firing; None
        on a stream without timestamps."""

    @property
    def partition_watermark(self) -> int:
        """The record's partition watermark before it (its stamp): judge lateness
        with ``lateness(ctx.timestamp, ctx.partition_watermark, allowed)``."""

    @property
    def watermark(self) -> int:
        """The subtask's input watermark (`MIN_WATERMARK` until one is known)."""

    @property
    def timers(self) -> Timers:
        """The current key's timers."""

    def now(self) -> int:
        """Processing time: wall-clock milliseconds."""
