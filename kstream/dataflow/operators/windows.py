"""Event-time windows: which windows a record belongs to, when they fire and end.

A window is the half-open interval ``[start, end)`` of timestamps (ms). It
fires when the watermark reaches its end (``W >= end``: every record with a
timestamp below ``end`` has been seen; its timer is at ``end``), its result
carries the timer's timestamp ``end`` (not `TimeWindow.max_timestamp`: a
result stamped ``end - 1`` would be behind the watermark ``end`` that fired
it, so late to a window downstream), and its state is deleted when the
watermark reaches `cleanup_time` (``end + allowed_lateness``).

* `Tumbling(size, offset)`: ``[offset + k·size, offset + (k+1)·size)``, one per
  record;
* `Sliding(size, slide, offset)`: every ``[s, s + size)`` with ``s ≡ offset
  (mod slide)`` and ``s <= ts < s + size``: ``ceil(size / slide)`` or
  ``floor(size / slide)`` per record (``slide <= size``, so at least one);
* `Session(gap)`: a record's own window is ``[ts, ts + gap)``; windows of a key
  that overlap (share a timestamp) merge into their cover, so records less
  than ``gap`` apart are in one session (`merge_session`). Windows that only
  touch (``a.end == b.start``) stay apart: that keeps every late-but-allowed
  record able to find the sessions it joins before they are cleaned.

Whether a record is too late is decided before it reaches a window, from its
partition's watermark (`kstream.protocol.watermarks.lateness`), so the
verdict does not depend on how partitions interleave. `window_phase` says
what the window operator does with a record that was not too late.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import overload

from kstream.dataflow.deprecated import renamed, required
from kstream.errors import ConfigurationError

__all__ = [
    "Assigner",
    "Session",
    "SessionMerge",
    "Sliding",
    "TimeWindow",
    "Tumbling",
    "WindowPhase",
    "cleanup_time",
    "merge_session",
    "session",
    "sliding",
    "tumbling",
    "window_phase",
]


@dataclass(frozen=True, slots=True, order=True)
class TimeWindow:
    """The timestamps ``start <= ts < end``."""

    start: int
    end: int

    def __post_init__(self) -> None:
        if self.end <= self.start:
            raise ConfigurationError(f"a window needs start < end, got [{self.start}, {self.end})")

    @property
    def max_timestamp(self) -> int:
        """The last timestamp inside (a result carries ``end``, its timer's time)."""
        return self.end - 1

    def __contains__(self, timestamp: object) -> bool:
        return isinstance(timestamp, int) and self.start <= timestamp < self.end

    def overlaps(self, other: TimeWindow) -> bool:
        """They share at least one timestamp (merely touching is not overlapping)."""
        return self.start < other.end and other.start < self.end

    def cover(self, other: TimeWindow) -> TimeWindow:
        return TimeWindow(min(self.start, other.start), max(self.end, other.end))


def _positive(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigurationError(
            f"a window's {name}_ms must be a whole number of ms > 0, got {value!r}"
        )


@functools.lru_cache(maxsize=64)
def _tumbling_window(start: int, size: int) -> tuple[TimeWindow]:
    # Remembered: the records of a window (thousands) share it, and building a
    # validated `TimeWindow` per record was a twentieth of the window operator's time.
    return (TimeWindow(start, start + size),)


@dataclass(frozen=True, slots=True)
class Tumbling:
    """Fixed windows of `size` ms, aligned to `offset` (0: to the epoch)."""

    size: int
    offset: int = 0

    def __post_init__(self) -> None:
        _positive("size", self.size)

    @property
    def merging(self) -> bool:
        return False

    def assign(self, timestamp: int) -> tuple[TimeWindow, ...]:
        start = timestamp - (timestamp - self.offset) % self.size
        return _tumbling_window(start, self.size)


@dataclass(frozen=True, slots=True)
class Sliding:
    """Windows of `size` ms starting every `slide` ms, aligned to `offset`.

    `slide` must not exceed `size`: longer slides leave gaps between windows,
    and a record in a gap would belong to no window (neither a result, nor
    late, nor a dead letter), so they are refused when the job is built.
    """

    size: int
    slide: int
    offset: int = 0

    def __post_init__(self) -> None:
        _positive("size", self.size)
        _positive("slide", self.slide)
        if self.slide > self.size:
            gap = self.slide - self.size
            raise ConfigurationError(
                f"sliding({self.size}, {self.slide}): a slide longer than the window leaves "
                f"{gap} ms of every {self.slide} in no window, and records there would be "
                "dropped unseen; use a slide <= the size (tumbling(size) for equal ones)"
            )

    @property
    def merging(self) -> bool:
        return False

    def assign(self, timestamp: int) -> tuple[TimeWindow, ...]:
        """Every window holding `timestamp`, earliest start first."""
        last = timestamp - (timestamp - self.offset) % self.slide
        starts = range(last, timestamp - self.size, -self.slide)
        return tuple(TimeWindow(s, s + self.size) for s in reversed(starts))


@dataclass(frozen=True, slots=True)
class Session:
    """Sessions: records of a key less than `gap` ms apart."""

    gap: int

    def __post_init__(self) -> None:
        _positive("gap", self.gap)

    @property
    def merging(self) -> bool:
        return True

    def assign(self, timestamp: int) -> tuple[TimeWindow, ...]:
        """The record's own window; `merge_session` then merges it into the key's sessions."""
        return (TimeWindow(timestamp, timestamp + self.gap),)


Assigner = Tumbling | Sliding | Session


@dataclass(frozen=True, slots=True)
class SessionMerge:
    """Inserting a window into a key's sessions.

    `window` is the session the new window ends up in; `merged` are the
    existing sessions it absorbed (their state is merged into `window`'s and
    their timers deleted); `sessions` is the key's new set.
    """

    window: TimeWindow
    merged: frozenset[TimeWindow]
    sessions: frozenset[TimeWindow]


def merge_session(sessions: Iterable[TimeWindow], new: TimeWindow) -> SessionMerge:
    """Insert `new` into `sessions` (pairwise non-overlapping), merging what overlaps it."""
    existing = frozenset(sessions)
    merged = frozenset(w for w in existing if w.overlaps(new))
    window = new
    for w in merged:
        window = window.cover(w)
    return SessionMerge(window, merged, (existing - merged) | {window})


class WindowPhase(enum.Enum):
    """Where a window stands at a watermark."""

    #: Not fired yet: a record adds to it silently.
    OPEN = "open"
    #: Fired, state kept: a record updates it and the result is emitted again.
    FIRED = "fired"
    #: Its state is gone: a record for it goes to the late output. Reached by a
    #: record not too late at its partition only when that partition had been
    #: idle and resumed behind the watermark (not reproducible).
    CLEANED = "cleaned"


def cleanup_time(window: TimeWindow, allowed_lateness: int) -> int:
    """The watermark at which the window's state is deleted."""
    return window.end + allowed_lateness


def window_phase(window: TimeWindow, watermark: int, allowed_lateness: int) -> WindowPhase:
    """The window's phase at the window operator's input `watermark`."""
    if watermark >= cleanup_time(window, allowed_lateness):
        return WindowPhase.CLEANED
    if watermark >= window.end:
        return WindowPhase.FIRED
    return WindowPhase.OPEN


@overload
def tumbling(size_ms: int, offset_ms: int = 0) -> Tumbling: ...


@overload
def tumbling(*, size: int, offset: int = 0) -> Tumbling: ...


def tumbling(
    size_ms: int | None = None,
    offset_ms: int = 0,
    *,
    size: int | None = None,
    offset: int | None = None,
) -> Tumbling:
    """Tumbling windows of `size_ms` ms aligned to `offset_ms` (the job API's spelling
    of `Tumbling`). `size=` and `offset=` are deprecated spellings."""
    size_ms = renamed("tumbling", "size_ms", size_ms, "size", size, stacklevel=2)
    start = renamed("tumbling", "offset_ms", offset_ms, "offset", offset, default=0, stacklevel=2)
    return Tumbling(required("tumbling", "size_ms", size_ms), _ms("offset_ms", start))


@overload
def sliding(size_ms: int, slide_ms: int, offset_ms: int = 0) -> Sliding: ...


@overload
def sliding(*, size: int, slide: int, offset: int = 0) -> Sliding: ...


def sliding(
    size_ms: int | None = None,
    slide_ms: int | None = None,
    offset_ms: int = 0,
    *,
    size: int | None = None,
    slide: int | None = None,
    offset: int | None = None,
) -> Sliding:
    """Windows of `size_ms` ms every `slide_ms` ms aligned to `offset_ms` (the job API's
    spelling of `Sliding`). `size=`, `slide=` and `offset=` are deprecated spellings."""
    size_ms = renamed("sliding", "size_ms", size_ms, "size", size, stacklevel=2)
    slide_ms = renamed("sliding", "slide_ms", slide_ms, "slide", slide, stacklevel=2)
    start = renamed("sliding", "offset_ms", offset_ms, "offset", offset, default=0, stacklevel=2)
    return Sliding(
        required("sliding", "size_ms", size_ms),
        required("sliding", "slide_ms", slide_ms),
        _ms("offset_ms", start),
    )


@overload
def session(gap_ms: int) -> Session: ...


@overload
def session(*, gap: int) -> Session: ...


def session(gap_ms: int | None = None, *, gap: int | None = None) -> Session:
    """Sessions closed by `gap_ms` ms without a record (the job API's spelling of
    `Session`). `gap=` is a deprecated spelling."""
    gap_ms = renamed("session", "gap_ms", gap_ms, "gap", gap, stacklevel=2)
    return Session(required("session", "gap_ms", gap_ms))


def _ms(name: str, value: object) -> int:
    """`value`, refused unless it is a whole number of ms."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(f"a window's {name} must be a whole number of ms, got {value!r}")
    return value
