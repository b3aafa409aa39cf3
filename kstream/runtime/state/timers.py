"""The timers of keyed operators inside a subtask.

`OperatorTimers` keeps the timers of one keyed operator (`TimerService`,
`kstream.dataflow.state.timers`) in memory and in the subtask's RocksDB, written at
the same flush as its state, so that a snapshot's RocksDB checkpoint holds
exactly the timers not fired at that snapshot. The key layout
(:ref:`internals-event-time-timers`)::

    <g>s<stage>.<operator>.timers\\0<encode_timer_key(domain, timer)>  ->  the key, state serde

``<g>`` is the key group's two bytes, in key format 3 only: there a timer's key
is ``<g><key>`` (`kstream.runtime.state.keyed`) and its group is moved to the
front, so a timer moves with its key's state when a key-group range is copied.

The value keeps the key as the function saw it (a timer is ordered by the
key's bytes, but ``on_timer`` gets the key object back).
"""

from __future__ import annotations

from typing import Any

from rocksdict import Rdict, WriteBatch

from kstream.dataflow.state.serde import StateSerde
from kstream.dataflow.state.timers import (
    Timer,
    TimerDomain,
    TimerService,
    decode_timer_key,
    encode_timer_key,
)
from kstream.errors import ConfigurationError, StateValueError
from kstream.runtime.state.element import TIMERS_STATE, ElementContext
from kstream.runtime.state.keyed import FLUSH_AT, KeyedStateContext

__all__ = ["KeyTimers", "OperatorTimers"]

EVENT = TimerDomain.EVENT
PROCESSING = TimerDomain.PROCESSING
#: Bytes of an encoded timer before its key (domain and timestamp).
_HEAD = len(encode_timer_key(EVENT, Timer(0, b"")))


class OperatorTimers:
    """The timers of keyed operator `op` (``s<stage>.<operator>``) of one subtask.

    Loaded from `db` at open; changes are buffered and written by `flush_into`
    (a `Flushable` of the subtask's `StateStore`).
    """

    def __init__(
        self, db: Rdict, op: str, serde: StateSerde, groups: tuple[bytes, ...] = ()
    ) -> None:
        self._prefix = f"{op}.{TIMERS_STATE}".encode() + b"\x00"
        #: Key format 3: every key group's two bytes (empty: formats 1 and 2).
        self._grouped = bool(groups)
        self._dumps = serde.dumps
        self.service = TimerService()
        #: The key object of every pending timer (what ``on_timer`` is called with).
        self._objects: dict[tuple[TimerDomain, Timer], Any] = {}
        #: Encoded timer -> the timer to store, or None to delete it, at the next flush.
        self._dirty: dict[bytes, tuple[TimerDomain, Timer] | None] = {}
        if not groups:
            self._load(db, self._prefix, b"", serde)
            return
        # One seek per key group holding anything: after a group's timers the
        # iterator stands on the next group with keys, which is where to look next.
        g = 0
        while g < len(groups):
            start = groups[g] + self._prefix
            it = self._load(db, start, groups[g], serde)
            if not it.valid():
                break
            g = max(g + 1, int.from_bytes(it.key()[:2], "big"))

    def _load(self, db: Rdict, start: bytes, group: bytes, serde: StateSerde) -> Any:
        """Load the timers stored under `start`; return the iterator past them."""
        it = db.iter()
        it.seek(start)
        while it.valid():
            key = it.key()
            if not key.startswith(start):
                break
            domain, timer = decode_timer_key(key[len(start) :])
            timer = Timer(timer.timestamp, group + timer.key)
            self.service.queue(domain).register(timer)
            self._objects[domain, timer] = serde.loads(it.value())
            it.next()
        return it

    def __len__(self) -> int:
        return len(self.service.event) + len(self.service.processing)

    def register(self, domain: TimerDomain, timestamp: int, key: bytes, obj: Any) -> None:
        timer = Timer(timestamp, key)
        if self.service.queue(domain).register(timer):
            self._objects[domain, timer] = obj
            self._dirty[encode_timer_key(domain, timer)] = (domain, timer)

    def delete(self, domain: TimerDomain, timestamp: int, key: bytes) -> None:
        timer = Timer(timestamp, key)
        if self.service.queue(domain).delete(timer):
            del self._objects[domain, timer]
            self._dirty[encode_timer_key(domain, timer)] = None

    def pop_due(self, domain: TimerDomain, time: int) -> tuple[Timer, Any] | None:
        """The next timer of `domain` due at `time` (removed) with its key object, or None."""
        timer = self.service.queue(domain).pop_due(time)
        if timer is None:
            return None
        self._dirty[encode_timer_key(domain, timer)] = None
        return timer, self._objects.pop((domain, timer))

    def due(self) -> bool:
        return len(self._dirty) >= FLUSH_AT

    def flush_into(self, batch: WriteBatch) -> int:
        n = len(self._dirty)
        prefix, objects, dumps = self._prefix, self._objects, self._dumps
        for encoded, what in self._dirty.items():
            if self._grouped:
                # <domain><timestamp><g><key> is stored as <g><prefix><domain><timestamp><key>.
                where = encoded[_HEAD : _HEAD + 2] + prefix + encoded[:_HEAD] + encoded[_HEAD + 2 :]
            else:
                where = prefix + encoded
            if what is None:
                batch.delete(where)
            else:
                key = objects[what]
                try:
                    batch.put(where, dumps(key))
                except Exception as exc:
                    raise StateValueError(
                        f"the key {key!r} of a timer of {self._prefix[:-1].decode()} cannot be "
                        f"stored by the job's state serde ({type(exc).__name__}: {exc}): "
                        "key by values it can encode"
                    ) from exc
        self._dirty.clear()
        return n


class KeyTimers:
    """``ctx.timers``: the timers of the current key of one keyed operator.

    Event-time timers need a stage with event time and an ``on_timer``
    function; either missing is a `ConfigurationError` at the call (the
    planner refuses ``on_timer`` on a stream without timestamps beforehand).
    """

    __slots__ = ("_ctx", "_element", "_has_on_timer", "_timers")

    def __init__(
        self,
        ctx: KeyedStateContext,
        timers: OperatorTimers,
        element: ElementContext,
        has_on_timer: bool,
    ) -> None:
        self._ctx = ctx
        self._timers = timers
        self._element = element
        self._has_on_timer = has_on_timer

    def _check(self, event: bool) -> None:
        if event and not self._element.timed:
            raise ConfigurationError(
                "an event-time timer needs a stream with timestamps: give the source "
                "timestamps= (e.g. KafkaSource(..., timestamps='kafka'))"
            )
        if not self._has_on_timer:
            raise ConfigurationError(
                "a timer needs an on_timer function: process(fn, on_timer=...)"
            )

    def register(self, timestamp: int) -> None:
        """Call ``on_timer(key, timestamp, ctx)`` once the watermark reaches `timestamp`."""
        self._check(True)
        ctx = self._ctx
        self._timers.register(EVENT, timestamp, ctx.key, ctx.key_object)

    def delete(self, timestamp: int) -> None:
        """Forget the key's event-time timer at `timestamp` (nothing if there is none)."""
        self._timers.delete(EVENT, timestamp, self._ctx.key)

    def register_processing(self, timestamp: int) -> None:
        """Call ``on_timer`` once the wall clock (`now_ms`) reaches `timestamp`."""
        self._check(False)
        ctx = self._ctx
        self._timers.register(PROCESSING, timestamp, ctx.key, ctx.key_object)

    def delete_processing(self, timestamp: int) -> None:
        """Forget the key's processing-time timer at `timestamp`."""
        self._timers.delete(PROCESSING, timestamp, self._ctx.key)
