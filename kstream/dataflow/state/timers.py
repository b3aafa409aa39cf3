"""Timers of a keyed operator, and their RocksDB key encoding.

A timer is a (key, timestamp) pair; registering one twice is registering it
once, deleting one that is not there does nothing. Two independent domains:

* **event time**: a timer at ``t`` is due once the input watermark reaches
  ``t`` (``W >= t``: every record with a timestamp below ``t`` has been seen);
* **processing time**: a timer at ``t`` is due once the (monotonic) clock the
  caller passes in reaches ``t``. Not reproducible after a rollback.

Due timers come out in timestamp order, ties by key bytes, so the firing order
is the same on every run. `pop_due` hands out one timer at a time so that the
caller can run ``on_timer`` in between: a timer it registers that is already
due fires in the same advance, after the ones before it in that order.

In RocksDB a timer is the key ``<domain byte><8-byte big-endian timestamp with
its sign bit flipped><key bytes>`` (`encode_timer_key`): byte order is then
(domain, timestamp, key) order, negative timestamps included, so a prefix scan
of one domain yields timers in firing order. `TimerQueue` mirrors the stored
timers in memory (a heap), so finding the next due timer costs no scan.
"""

from __future__ import annotations

import enum
import heapq
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Final

from kstream.errors import TimestampError

__all__ = [
    "Timer",
    "TimerDomain",
    "TimerQueue",
    "TimerService",
    "decode_timer_key",
    "encode_timer_key",
]

#: 64-bit signed timestamps, stored offset by 2**63 (sign bit flipped) so that
#: unsigned big-endian byte order is numeric order.
_OFFSET: Final = 2**63
_TIMESTAMP: Final = struct.Struct(">Q")


class TimerDomain(enum.Enum):
    """Which clock a timer waits for; the value is its RocksDB key prefix byte."""

    EVENT = b"e"
    PROCESSING = b"p"


@dataclass(frozen=True, slots=True, order=True)
class Timer:
    """A timer of `key` at `timestamp`; ordered as they fire (timestamp, then key bytes)."""

    timestamp: int
    key: bytes


def _check(timestamp: int) -> None:
    if isinstance(timestamp, bool) or not isinstance(timestamp, int):
        raise TimestampError(f"a timer's timestamp must be an integer (ms), got {timestamp!r}")
    if not -_OFFSET <= timestamp < _OFFSET:
        raise TimestampError(f"a timer's timestamp must fit in 64 signed bits, got {timestamp}")


def encode_timer_key(domain: TimerDomain, timer: Timer) -> bytes:
    """The RocksDB key suffix of `timer`: byte order equals firing order within a domain."""
    _check(timer.timestamp)
    return domain.value + _TIMESTAMP.pack(timer.timestamp + _OFFSET) + timer.key


def decode_timer_key(encoded: bytes) -> tuple[TimerDomain, Timer]:
    """The inverse of `encode_timer_key`."""
    if len(encoded) < 1 + _TIMESTAMP.size:
        raise TimestampError(f"not a timer key (too short): {encoded!r}")
    try:
        domain = TimerDomain(encoded[:1])
    except ValueError:
        raise TimestampError(f"not a timer key (domain {encoded[:1]!r}): {encoded!r}") from None
    (shifted,) = _TIMESTAMP.unpack_from(encoded, 1)
    return domain, Timer(shifted - _OFFSET, encoded[1 + _TIMESTAMP.size :])


class TimerQueue:
    """The timers of one domain: a set with a heap of the pending ones.

    Deletion is lazy (a deleted timer stays in the heap and is skipped when it
    surfaces), so register, delete and pop are O(log n).
    """

    def __init__(self, timers: Iterable[Timer] = ()) -> None:
        self._set: set[Timer] = set(timers)
        self._heap: list[Timer] = sorted(self._set)

    def __len__(self) -> int:
        return len(self._set)

    def __contains__(self, timer: object) -> bool:
        return timer in self._set

    def __iter__(self) -> Iterator[Timer]:
        """The pending timers in firing order."""
        return iter(sorted(self._set))

    def register(self, timer: Timer) -> bool:
        """Add `timer`; False if it was already pending."""
        _check(timer.timestamp)
        if timer in self._set:
            return False
        self._set.add(timer)
        heapq.heappush(self._heap, timer)
        return True

    def delete(self, timer: Timer) -> bool:
        """Remove `timer`; False if it was not pending."""
        if timer not in self._set:
            return False
        self._set.remove(timer)
        return True

    def peek(self) -> Timer | None:
        """The next timer to fire, if any."""
        while self._heap and self._heap[0] not in self._set:
            heapq.heappop(self._heap)
        return self._heap[0] if self._heap else None

    def pop_due(self, time: int) -> Timer | None:
        """Remove and return the next timer with ``timestamp <= time``, or None."""
        head = self.peek()
        if head is None or head.timestamp > time:
            return None
        heapq.heappop(self._heap)
        self._set.remove(head)
        return head

    def advance(self, time: int) -> list[Timer]:
        """Every timer due at `time`, removed, in firing order."""
        due: list[Timer] = []
        while (timer := self.pop_due(time)) is not None:
            due.append(timer)
        return due


class TimerService:
    """The event-time and processing-time timers of one operator of one subtask."""

    def __init__(self) -> None:
        self.event = TimerQueue()
        self.processing = TimerQueue()

    def queue(self, domain: TimerDomain) -> TimerQueue:
        return self.event if domain is TimerDomain.EVENT else self.processing

    def stored(self) -> Iterator[tuple[bytes, Timer]]:
        """Every pending timer with its RocksDB key suffix, in key order."""
        for domain in TimerDomain:
            for timer in self.queue(domain):
                yield encode_timer_key(domain, timer), timer

    @classmethod
    def load(cls, keys: Iterable[bytes]) -> TimerService:
        """The timers stored under `keys` (suffixes as `encode_timer_key` made them)."""
        service = cls()
        for key in keys:
            domain, timer = decode_timer_key(key)
            service.queue(domain).register(timer)
        return service
